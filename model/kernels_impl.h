/* One instruction-set path of the kernels (portable C, AVX2+FMA,
 * AVX-512): the inner loops that kernels.c tiles and threads.  Every path
 * computes the same functions; they differ only in rounding (summation
 * order, FMA, the exp polynomial), which test_kernels bounds against the
 * portable path.
 *
 * Within one path the rounding of a result never depends on the tile
 * shape, the number of tokens in the call or the thread that computes it:
 * a dot product always sums lane-strided partials over k and then reduces
 * the lanes with one fixed tree; a weighted sum always adds its terms in
 * index order.  That is what makes decode (n = 1) and prefill (n > 1), and
 * 1 and 2 threads, agree bit for bit. */
#ifndef POSENC_KERNELS_IMPL_H
#define POSENC_KERNELS_IMPL_H
#include <stddef.h>
#include <stdint.h>

#include "base/tensor.h"

typedef struct {
    const char *name;
    /* out[t*ldo + r] = x[t*ldx + 0..k) . w[r*ldw + 0..k) for t < n, r < m;
     * w is f32, f16 or bf16 (the last two as raw uint16_t). */
    void (*dot_f32)(float *out, size_t ldo, const float *x, size_t ldx, const float *w,
                    size_t ldw, int n, int m, int k);
    void (*dot_f16)(float *out, size_t ldo, const float *x, size_t ldx, const uint16_t *w,
                    size_t ldw, int n, int m, int k);
    void (*dot_bf16)(float *out, size_t ldo, const float *x, size_t ldx, const uint16_t *w,
                     size_t ldw, int n, int m, int k);
    /* out[t*ldo + 0..hs) = sum over c < cells of p[t*ldp + c] * v[c*ldv + 0..hs),
     * terms added in order of c; v is f32 or f16. */
    void (*mix_f32)(float *out, size_t ldo, const float *p, size_t ldp, const float *v,
                    size_t ldv, int n, int cells, int hs);
    void (*mix_f16)(float *out, size_t ldo, const float *p, size_t ldp, const uint16_t *v,
                    size_t ldv, int n, int cells, int hs);
    /* Activations to Q8 blocks of 32 (k a multiple of 32): q = round(x / d),
     * d = max|x| / 127 per block, kept as f32. */
    void (*quantize_q8)(int8_t *q, float *d, const float *x, int k);
    /* out[r] = sum over blocks of d_w * d_x * (q_w . q_x) for r < m; rows of
     * w are GGUF Q8_0 blocks, row_bytes apart. */
    void (*dot_q8)(float *out, const int8_t *xq, const float *xd, const uint8_t *w,
                   size_t row_bytes, int m, int k);
    /* n elements of type t (f16, bf16, q8_0) to f32, exactly. */
    void (*to_f32)(float *dst, const void *src, TensorType t, size_t n);
    /* f32 to f16 (round to nearest even), for the f16 KV cache. */
    void (*to_f16)(uint16_t *dst, const float *src, size_t n);
    void (*softmax)(float *x, int n);
    float (*sum_exp)(const float *x, int n, float *max);
    void (*swiglu)(float *h, const float *g, int n);
    void (*gelu)(float *h, int n);
} KernelPath;

/* The paths compiled into this build; NULL when the compiler does not
 * target the instruction set (see the Makefile's PORTABLE). */
extern const KernelPath kernels_portable;
extern const KernelPath *const kernels_avx2;
extern const KernelPath *const kernels_avx512;
#endif
