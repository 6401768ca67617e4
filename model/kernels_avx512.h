/* What the AVX-512 path's files share: kernels_avx512.c (the path's
 * table, its float tiles, the row-wise decode of block-quantized weights,
 * conversions and activations), kernels_avx512_packed.c (decode and F32/F16
 * prefill on packed rows) and kernels_avx512_int8.c (prefill's int8 product
 * on units).  Each compiles to its path only where the build targets
 * AVX-512 F, BW and VL with FMA and F16C (KERNELS_AVX512), the int8 units
 * only with VNNI too (KERNELS_AVX512_INT8); the build's flags say which
 * (`make` uses -march=native), so no file needs flags of its own. */
#ifndef POSENC_KERNELS_AVX512_H
#define POSENC_KERNELS_AVX512_H
#include "model/kernels_impl.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__FMA__) && defined(__F16C__)
#define KERNELS_AVX512 1
#if defined(__AVX512VNNI__)
#define KERNELS_AVX512_INT8 1
#endif
#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))

/* Per int32 lane: the sum of 4 products of unsigned bytes u by signed
 * bytes x (the packed rows' and Q4_0's quants by Q8 activations); without
 * VNNI, u below 128 (maddubs' pair sums saturate at 32767). */
INLINE __m512i dot4_u8(__m512i u, __m512i x) {
#ifdef __AVX512VNNI__
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x);
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, x), _mm512_set1_epi16(1)); /* pairs <= 2 * 15 * 127 */
#endif
}

/* Decode on packed rows (KernelPath.dot_packed) and F32/F16 prefill on
 * them (gemm_packed): kernels_avx512_packed.c. */
void avx512_packed_q4_0(float *out, const DecodeActs *x, const void *w, int m, int k);
void avx512_packed_mxfp4(float *out, const DecodeActs *x, const void *w, int m, int k);
void avx512_packed_q8_0(float *out, const DecodeActs *x, const void *w, int m, int k);
void avx512_packed_q4_k(float *out, const DecodeActs *x, const void *w, int m, int k);
void avx512_packed_q5_k(float *out, const DecodeActs *x, const void *w, int m, int k);
void avx512_packed_q6_k(float *out, const DecodeActs *x, const void *w, int m, int k);
void avx512_packed_f32(float *out, const DecodeActs *x, const void *w, int m, int k);
void avx512_packed_f16(float *out, const DecodeActs *x, const void *w, int m, int k);
void avx512_gemm_packed_f32(float *out, size_t ldo, const float *x, size_t ldx, const void *w, int n, int m,
                            int k);
void avx512_gemm_packed_f16(float *out, size_t ldo, const float *x, size_t ldx, const void *w, int n, int m,
                            int k);

/* Prefill's int8 product on units (KernelPath.gemm_q8) and Q8_0's unit
 * fills: kernels_avx512_int8.c, with VNNI. */
void avx512_gemm_q8(float *out, size_t ldo, const QuantUnit *w, int rows, const QuantActs *x, int t0, int t1);
void avx512_unit_fill_q8_0(QuantUnit *u, const void *rows, size_t row_bytes, int n_rows, int k, int centred);
void avx512_unit_fill_packed_q8_0(QuantUnit *u, const void *groups, int n_rows, int k);
#endif
#endif
