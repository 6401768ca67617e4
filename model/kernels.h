/* Numeric kernels of the forward pass.  Activations are row-major
 * (n_tokens, width) matrices; n = 1 is decoding, n > 1 is prefill.
 *
 * Each kernel runs on one instruction-set path (kernels_impl.h): AVX-512
 * or AVX2 when the build targets them (`make` uses -march=native), else
 * portable C (`make PORTABLE=1`).  Results never depend on the number of
 * threads, and decode and prefill round alike, except for block-quantized
 * weights, whose decode and prefill quantize activations differently
 * (see matmul). */
#ifndef POSENC_KERNELS_H
#define POSENC_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#include "base/tensor.h"
#include "base/util.h"

/* Below this many multiply-adds a parallel region costs more than it saves
 * (a fork/join takes microseconds; on a busy machine a descheduled thread
 * can hold a barrier for a whole time slice). */
#define PARALLEL_MIN_MACS (1 << 15)

/* Where the matmuls' time went, summed over calls until the caller resets
 * it (-m bench shows it per test). */
typedef struct {
    long regions;           /* parallel regions started (teams of more than one thread) */
    long barriers;          /* matmul_team's barriers */
    double seconds;         /* wall time in the matmuls' work: a chunk's whole call; for a
                               single token, from its activations quantized to the end of its
                               region or of the team's barrier (matmul_team: thread 0's) */
    double idle_seconds;    /* thread-seconds in the matrix-vector products between a thread's
                               last row and the region's end or the barrier: load imbalance and
                               the join */
} MatmulStats;

/* Working memory of matmul, sized once per context so that no kernel
 * allocates per token. */
typedef struct {
    int n_threads;
    int max_cols;        /* widest input a matmul may see */
    size_t panel_floats; /* per thread */
    float *panel;        /* (n_threads, panel_floats) weight rows converted to f32 */
    char *token_acts;    /* (n_threads, a layout's bytes) one token's activations quantized, each
                            thread's own (TokenActs in kernels.c): Q8 and Q8_K quants, scales and
                            sums */
    /* prefill against block-quantized weights (kernels_impl.h): */
    struct QuantActs *acts;   /* one chunk's activations */
    struct QuantUnit *units;  /* (n_threads) a unit of weight rows per thread */
    char *acts_data, *units_data; /* the memory behind them */
    uint16_t *xbf;       /* (512, max_cols) activations rounded to BF16 (BF16 prefill, Bf16Prefill) */
    double *thread_done; /* (n_threads, 8) when each thread left the last matrix-vector region, one
                            cache line each */
    double *thread_idle; /* (n_threads, 8) each thread's waits at matmul_team's barriers, until
                            matmul_team_end adds them to stats */
    MatmulStats stats;
} MatmulScratch;

int matmul_scratch_build(MatmulScratch *s, int max_cols, PosencError *err);
/* The bytes matmul_scratch_build allocates at omp_get_max_threads(). */
size_t matmul_scratch_bytes(int max_cols);
void matmul_scratch_free(MatmulScratch *s);
/* The threads a region may start: those asked for (omp_get_max_threads),
 * at most the ones s was built for. */
int matmul_scratch_threads(const MatmulScratch *s);

/* out (n, w->rows) = x (n, w->cols) . w^T, parallel over output rows (and,
 * for n > 1, over blocks of tokens).  n = 1 streams the weights once with
 * a matrix-vector kernel; block-quantized weights (Q8_0, Q4_0 ... Q6_K, MXFP4)
 * then quantize x to int8 blocks (Q8_K super-blocks for the K-quants) and
 * use integer dot products.  n > 1 runs a cache-blocked matrix-matrix
 * kernel: on the packed copy of f32 weights where the path packs them
 * (each output then decode's chain of multiply-adds, so the same bits),
 * for bf16 on AMX tiles or AVX512-BF16's pair products where the path has
 * them (kernels_bf16_activations), else on f32 copies of L2-sized weight
 * panels for f32/f16/bf16, and
 * for block-quantized weights either the same (kernels_int8_prefill() 0)
 * or, with x quantized to Q8 blocks of 32, integer products on units of
 * 32 rows unpacked to bytes (kernels_impl.h), which VNNI multiplies
 * several times faster than the f32 panels. */
void matmul(float *out, const float *x, const Tensor *w, int n, MatmulScratch *s);
/* outs[i] = x . ws[i]^T for `count` <= MATMUL_MANY_MAX matrices of the same
 * width (q, k, v; gate, up; the gates and ups of a decoded token's experts,
 * up to 8): for decode, and for prefill against
 * block-quantized weights or BF16 ones with BF16 activations
 * (kernels_bf16_activations), one parallel region does them all, and the
 * activations are quantized or rounded once. */
#define MATMUL_MANY_MAX 16
void matmul_many(float *const *outs, const float *x, const Tensor *const *ws, int count, int n,
                 MatmulScratch *s);

/* One token's outs[i] = x . ws[i]^T, called by every thread of a parallel
 * region with the same arguments (a decoded token's team, forward.c): each
 * thread quantizes x into its own buffers, computes its share of the rows
 * (matmul_many's split by bytes: the same bits), then waits at a barrier
 * for the others, so that outs are whole when it returns.  Each thread
 * calls matmul_team_end before the region ends. */
void matmul_team(float *const *outs, const float *x, const Tensor *const *ws, int count, MatmulScratch *s);
void matmul_team_end(MatmulScratch *s);

/* The packed copy of a Q4_0/Q8_0/MXFP4/Q4_K/Q5_K/Q6_K, F32 or F16 matrix
 * (kernels_impl.h): the bytes it takes (SIZE_MAX if they overflow), 0 when
 * the kernel path in use has no packed kernel for w's type; kernels_pack
 * writes it into dst (64-byte aligned), which matmul then reads through
 * w->packed.  The copy interleaves KERNELS_PACK_ROWS rows at a time. */
#define KERNELS_PACK_ROWS 16
size_t kernels_packed_bytes(const Tensor *w);
void kernels_pack(void *dst, const Tensor *w);
/* Rows [first, first + n) of w as a matrix of their own (an expert in a
 * mixture's stacked tensor), reading w's packed copy where w has one and
 * `first` starts one of its groups, else the file's rows. */
Tensor kernels_rows(const Tensor *w, int first, int n);

/* Single-threaded pieces of attention, for callers that parallelize over
 * heads themselves.  w and v are f32 or f16 (the KV cache's types).
 *   dot_rows: out[t*ldo + r] = x[t*ldx + 0..k) . w[r*ldw + 0..k)   (t < n, r < m)
 *   mix_rows: out[t*ldo + 0..hs) = sum_c p[t*ldp + c] * v[c*ldv + 0..hs)  (c < cells) */
void dot_rows(float *out, size_t ldo, const float *x, size_t ldx, TensorType wt, const void *w,
              size_t ldw, int n, int m, int k);
void mix_rows(float *out, size_t ldo, const float *p, size_t ldp, TensorType vt, const void *v,
              size_t ldv, int n, int cells, int hs);
/* f32 <-> f16 (round to nearest even) for the f16 KV cache. */
void convert_to_f16(uint16_t *dst, const float *src, size_t n);
void convert_to_f32(float *dst, const void *src, TensorType t, size_t n);
/* One token's activations as Q8_K super-blocks, as the K-quants' decode
 * reads them (k a multiple of 256): q (k) = round(x / d), d (k / 256) =
 * max|x| / 127 per 256, sum (k / 16) the sums of each 16 q.  The same bits
 * on every path. */
void quantize_q8k(int8_t *q, float *d, int16_t *sum, const float *x, int k);

/* y (n, width) += b (width) broadcast over rows; no-op when b is NULL. */
void add_bias(float *y, const float *b, int n, int width);

void rmsnorm(float *out, const float *x, const float *w, int dim, float eps);
/* b may be NULL: a LayerNorm without a bias (mpt). */
void layernorm(float *out, const float *x, const float *w, const float *b, int dim, float eps);
void softmax(float *x, int n);
/* Softmax's normalizer without overflow: sum_i e^(x_i - m) with m = max_i x_i
 * stored in *max, for n >= 1.  The float sum is within ~n ulp relative, so
 * its log is that close absolutely whatever the logits' magnitude: -m ppl's
 * NLL is (m - x_target) + log(sum), ~10 us per 32000-token vocabulary. */
float sum_exp(const float *x, int n, float *max);
/* x[i] = e^(x[i] - max) in place, returning their sum: one block of
 * attention's online softmax (max at least every x[i]; -inf gives 0). */
float exp_sum(float *x, int n, float max);
/* The same against the running maximum *max, first raised to the block's
 * own maximum if that is larger; with no maximum yet (all -inf) the block
 * becomes zeros and the sum 0. */
float exp_sum_running(float *x, int n, float *max);
/* h (n) = silu(h) * g: SwiGLU's gate. */
void swiglu(float *h, const float *g, int n);
/* GELU, tanh approximation (GPT-2's "gelu_new"). */
void gelu(float *h, int n);
/* GELU, exact: x/2 (1 + erf(x/sqrt 2)) (GPT-NeoX's "gelu"); one path, scalar. */
void gelu_erf(float *h, int n);

/* What a type is used as decides the kernels it needs on every path:
 * weights a dot product for decode (against f32 or Q8 activations) and a
 * conversion to f32 for prefill's panels; the KV cache's elements a dot
 * product (scores), a weighted sum (values) and a conversion to f32. */
typedef enum { KERNEL_USE_WEIGHTS, KERNEL_USE_KV_CACHE } KernelUse;
/* 0 if every path compiled in has them for type t; else -1 with a line
 * naming the type, the path and the missing kernel.  test_kernels checks
 * every type the loaders accept (tensor_type_supported). */
int kernels_check_type(TensorType t, KernelUse use, PosencError *err);

/* The instruction-set paths, for tests and benchmarks: "portable", "avx2",
 * "avx512".  kernels_use() switches every kernel above to one (0), or
 * returns -1 when this build lacks it; kernels_path_name() names the one
 * in use (the best compiled in, by default). */
int kernels_use(const char *name);
const char *kernels_path_name(void);
/* What of prefill runs on AMX's tiles with the path in use: "bf16+int8",
 * "bf16", "int8" or "none" (bench reports it beside the path's name). */
const char *kernels_amx_name(void);
/* 1 if the path in use prefills block-quantized weights with int8
 * activations (portable, and AVX-512 with VNNI), 0 if with f32 panels. */
int kernels_int8_prefill(void);
/* 1 if prefill multiplies BF16 weights with activations rounded to BF16
 * (k a multiple of 32): on AMX tiles where the CPU and kernel allow AMX,
 * else on AVX512-BF16's pair products, on the AVX-512 path of a build
 * that targets them; 0 if in f32.  Decode always keeps f32 activations. */
int kernels_bf16_activations(void);
/* 1 if block-quantized prefill multiplies its int8 products on AMX tiles
 * (the AVX-512 path where the CPU and kernel allow AMX): the same bits as
 * with VNNI, only faster. */
int kernels_int8_amx(void);
/* Test seam: tests hold AMX's prefill against the same path without it: 0 keeps
 * AMX's tiles unused (BF16 prefill on pair products or in f32,
 * block-quantized on VNNI). */
void kernels_allow_amx(int allow);
/* Units of block-quantized rows multiplied on AMX-INT8 so far: tests see
 * that prefill went there (its bits are VNNI's, so nothing else shows). */
size_t kernels_amx_units(void);
/* The f32 multiply-add peak of the path in use at omp_get_max_threads()
 * threads, GFLOP/s (a multiply-add is 2 flops): the best of a few ~20 ms
 * passes, as the bandwidth probe takes the best of its passes. */
double kernels_fma_peak_gflops(void);
#endif
