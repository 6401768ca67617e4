/* Every SIMD path of the kernels against the portable one, in this one
 * binary (kernels_use switches paths), plus the properties the engine
 * relies on within a path: results independent of the thread count and of
 * how many tokens a call carries (decode = prefill, bit for bit), masked
 * attention cells weighing exactly nothing, exact conversions.
 *
 * Tolerances are bounds, not measurements: two float32 sums of the same k
 * products in different orders (with or without FMA) each lie within
 * (k - 1) u sum|x_i w_i| of the exact value (u = 2^-24), so they differ by
 * at most 2 k u sum|x_i w_i|.  Each bound has a negative control: a wrong
 * result of the kind the comparison is there to catch (the next row's, a
 * quant one step off, a maximum off) lies outside it, so the bound can fail.
 *
 * The suite checks every kernel path this build and CPU have and prints,
 * once, a line naming them and the absent ones, with the tests that could
 * then not run: a log shows what was not tested. */
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
#include "model/kernels.h"
#include "model/shift.h"
#include "tests/common.h"

#define U 5.9604645e-8 /* 2^-24 */

/* The kernels a build and CPU may have: the instruction-set paths
 * kernels_use switches between, then the prefill kernels of the AVX-512
 * path (kernels.h): int8 units on VNNI, BF16 pair products, and AMX's
 * tiles for BF16 and for int8.  main finds them before the tests run (each
 * test is a child process that inherits what it found). */
enum { HAS_PORTABLE, HAS_AVX2, HAS_AVX512, HAS_VNNI, HAS_BF16_PAIRS, HAS_AMX_BF16, HAS_AMX_INT8, N_KERNELS };
static const char *const KERNEL_NAMES[N_KERNELS] = {"portable",    "avx2",     "avx512",  "avx512-vnni",
                                                    "avx512-bf16", "amx-bf16", "amx-int8"};
static int has[N_KERNELS];
/* The instruction-set paths present, portable first and the default (the
 * best compiled in) last, as kernels_use names them. */
static const char *paths[HAS_AVX512 + 1];
static int n_paths;

static void find_kernels(void) {
    for (int i = HAS_PORTABLE; i <= HAS_AVX512; i++)
        if (kernels_use(KERNEL_NAMES[i]) == 0) {
            has[i] = 1;
            paths[n_paths++] = KERNEL_NAMES[i];
        }
    if (has[HAS_AVX512]) {
        kernels_use("avx512");
        has[HAS_VNNI] = kernels_int8_prefill();
        has[HAS_AMX_BF16] = strstr(kernels_amx_name(), "bf16") != NULL;
        has[HAS_AMX_INT8] = kernels_int8_amx();
        kernels_allow_amx(0);
        has[HAS_BF16_PAIRS] = kernels_bf16_activations();
        kernels_allow_amx(1);
    }
    kernels_use(paths[n_paths - 1]); /* the default again: the kv_cache tests run on it */
}

/* A negative control's tally: of `total` results, `outside` lie outside
 * their bound around a wrong value (what the description names); more
 * than the fraction `most` of them must, or the bound could not tell that
 * mistake from the right result.  A control with no cases fails too. */
__attribute__((format(printf, 4, 5))) static void expect_control(int outside, int total, double most,
                                                                 const char *fmt, ...) {
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    printf("control, %s: %d of %d outside the bound\n", what, outside, total);
    ck_assert_msg(total > 0 && outside > total * most, "control, %s: only %d of %d outside the bound", what, outside,
                  total);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static float *random_floats(size_t n) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* The offsets of a block's f16 scales (d, then m or dmin; -1: none). */
static void scale_offsets(TensorType type, int *d, int *m) {
    *m = -1;
    switch (type) {
    case TENSOR_Q4_1: case TENSOR_Q5_1: case TENSOR_Q4_K: case TENSOR_Q5_K: *d = 0, *m = 2; break;
    case TENSOR_Q2_K: *d = 80, *m = 82; break;
    case TENSOR_Q3_K: *d = 108; break;
    case TENSOR_Q6_K: *d = 208; break;
    default: *d = 0; break;
    }
}

/* Random bytes for the quants and sub-block scales of n blocks, with f16
 * scales chosen so that weights stay within a few units (q * sc * d; the
 * K-quants' integer scales reach 63 or 128) and the mins of the _1 and K
 * types are of the size of the weights: cancellation is then exercised.
 * MXFP4's E8M0 scale: 2^-6 to 2^-3 halved, weights up to 12 times that,
 * or in one block of 16 2^-128 or 2^-127, the subnormal ones (a scale made
 * from the wrong bits there is infinite or far off). */
static void random_blocks(TensorType type, uint8_t *data, size_t n) {
    size_t bytes = tensor_block_bytes(type);
    int off_d, off_m;
    scale_offsets(type, &off_d, &off_m);
    float dmax = tensor_block_size(type) == 32 ? 0.1f : type == TENSOR_Q6_K ? 1e-3f : 0.01f;
    for (size_t b = 0; b < n; b++) {
        uint8_t *blk = data + b * bytes;
        for (size_t i = 0; i < bytes; i++) {
            frand();
            blk[i] = (uint8_t)(rng >> 32);
        }
        if (type == TENSOR_MXFP4) { /* one block in 16 at e = 0 or 1, the scales that are subnormal */
            unsigned bits = (unsigned)(rng >> 32);
            blk[0] = (uint8_t)((bits & 0xF0) == 0 ? bits & 1 : 122 + (bits & 3));
            continue;
        }
        uint16_t d = fp32_to_fp16(dmax * (0.5f + 0.25f * frand()));
        memcpy(blk + off_d, &d, 2);
        if (off_m >= 0) {
            uint16_t m = fp32_to_fp16(dmax * frand());
            memcpy(blk + off_m, &m, 2);
        }
    }
}

/* The unpacking of a K-quant type's super-blocks (base/quant.h). */
typedef void SuperBlockUnpack(const void *blk, QuantSuperBlock *u);
static SuperBlockUnpack *superblock_unpack(TensorType type) {
    switch (type) {
    case TENSOR_Q2_K: return quant_unpack_q2_k;
    case TENSOR_Q3_K: return quant_unpack_q3_k;
    case TENSOR_Q4_K: return quant_unpack_q4_k;
    case TENSOR_Q5_K: return quant_unpack_q5_k;
    default: ck_assert_msg(type == TENSOR_Q6_K, "%s is no K-quant", tensor_type_name(type)); return quant_unpack_q6_k;
    }
}

/* Per weight, the magnitude of the min term a kernel subtracts (m of the _1
 * types, dmin * min of the K-quants; 0 for the others): the float bound of
 * a sum that cancels is relative to both terms. */
static void min_terms(TensorType type, const uint8_t *data, float *out, size_t n) {
    size_t qk = tensor_block_size(type), bytes = tensor_block_bytes(type);
    for (size_t b = 0; b < n / qk; b++) {
        const uint8_t *blk = data + b * bytes;
        for (size_t i = 0; i < qk; i++) out[b * qk + i] = 0.0f;
        if (type == TENSOR_Q4_1 || type == TENSOR_Q5_1) {
            QuantBlock u;
            (type == TENSOR_Q4_1 ? quant_unpack_q4_1 : quant_unpack_q5_1)(blk, &u);
            for (size_t i = 0; i < qk; i++) out[b * qk + i] = fabsf(u.m);
        }
        if (type == TENSOR_Q2_K || type == TENSOR_Q4_K || type == TENSOR_Q5_K) {
            QuantSuperBlock u;
            superblock_unpack(type)(blk, &u);
            for (size_t i = 0; i < qk; i++) out[b * qk + i] = fabsf(u.dmin * u.mn[i / (size_t)u.sub]);
        }
    }
}

/* Per weight, what its quant one higher adds to it (d, or for the K-quants
 * d times its sub-block's scale, for MXFP4 its half scale: one step of the
 * doubled values): a quant unpacked one step off, as a wrong centre makes
 * every quant of a block, moves the weight that much. */
static void quant_steps(TensorType type, const uint8_t *data, float *out, size_t n) {
    size_t qk = tensor_block_size(type), bytes = tensor_block_bytes(type);
    int off_d, off_m;
    scale_offsets(type, &off_d, &off_m);
    for (size_t b = 0; b < n / qk; b++) {
        const uint8_t *blk = data + b * bytes;
        QuantSuperBlock u;
        if (qk == QK_K) superblock_unpack(type)(blk, &u);
        for (size_t i = 0; i < qk; i++)
            out[b * qk + i] = qk == QK_K ? u.d * (float)u.sc[i / (size_t)u.sub]
                            : type == TENSOR_MXFP4 ? quant_e8m0_half(blk[0]) : quant_half(blk + off_d);
    }
}

/* A rows x cols tensor of `type` with random weights; *ref gets them as f32. */
static Tensor random_tensor(TensorType type, int rows, int cols, float **ref) {
    size_t n = (size_t)rows * cols, bytes = tensor_row_bytes(type, (size_t)cols) * rows;
    uint8_t *data = malloc(bytes);
    for (size_t i = 0; i < n; i++) {
        float v = frand();
        if (type == TENSOR_F32) memcpy(data + 4 * i, &v, 4);
        if (type == TENSOR_F16) {
            uint16_t h = fp32_to_fp16(v);
            memcpy(data + 2 * i, &h, 2);
        }
        if (type == TENSOR_BF16) {
            uint32_t b;
            memcpy(&b, &v, 4);
            uint16_t h = (uint16_t)(b >> 16);
            memcpy(data + 2 * i, &h, 2);
        }
    }
    if (type == TENSOR_Q8_0)
        for (size_t b = 0; b < n / 32; b++) {
            uint16_t d = fp32_to_fp16(0.01f + 0.002f * (float)(b % 7));
            memcpy(data + 34 * b, &d, 2);
            for (int j = 0; j < 32; j++) data[34 * b + 2 + j] = (uint8_t)(int8_t)lrintf(127.0f * frand());
        }
    if (tensor_block_size(type) > 1 && type != TENSOR_Q8_0)
        random_blocks(type, data, n / tensor_block_size(type));
    *ref = malloc(n * sizeof(float));
    tensor_dequantize(type, data, *ref, n);
    return (Tensor){type, data, rows, cols, NULL};
}

/* f to BF16 and back, rounding to nearest even (finite f). */
static float bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7FFF + (u >> 16 & 1)) & 0xFFFF0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* A quantized case's tensor, reference weights and min terms; back to
 * the portable path. */
static void free_quant_case(Tensor *w, float *wref, float *mt) {
    kernels_use("portable");
    free(mt);
    free(wref);
    free((void *)w->data);
}

/* sum |x_i| (|w_i| + min term_i) over row r: a quantized row's magnitude,
 * for the bounds of the float steps on its integer sums. */
static double quant_mag(const float *x, const float *wref, const float *mt, int r, int cols) {
    double mag = 0.0;
    for (int i = 0; i < cols; i++)
        mag += fabs((double)x[i]) * (fabs(wref[(size_t)r * cols + i]) + mt[(size_t)r * cols + i]);
    return mag;
}

/* sum |x_i w_i| for the bound. */
static double abs_dot(const float *x, const float *w, int k) {
    double s = 0.0;
    for (int i = 0; i < k; i++) s += fabs((double)x[i] * w[i]);
    return s;
}

static double exact_dot(const float *x, const float *w, int k) {
    double s = 0.0;
    for (int i = 0; i < k; i++) s += (double)x[i] * w[i];
    return s;
}

START_TEST(paths_are_named) {
    ck_assert_int_eq(kernels_use("portable"), 0);
    ck_assert_str_eq(kernels_path_name(), "portable");
    ck_assert_int_eq(kernels_use("sse9"), -1);
    ck_assert_str_eq(kernels_path_name(), "portable");
}
END_TEST

/* dot_rows on odd shapes and strides, every path within the bound of the
 * exact (double) result, which implies the bound between paths.  Control:
 * nearly every output is outside the bound around the next row's exact
 * product (an output from the wrong row or stride fails). */
START_TEST(dot_rows_within_bound) {
    static const int NS[] = {1, 2, 3, 4, 5, 9}, MS[] = {1, 3, 16, 17, 37}, KS[] = {1, 7, 8, 16, 17, 48, 100, 288};
    static const TensorType TYPES[] = {TENSOR_F32, TENSOR_F16};
    for (int p = 0; p < n_paths; p++) {
        kernels_use(paths[p]);
        for (int ty = 0; ty < 2; ty++) {
            int controls = 0, outside = 0;
            for (int a = 0; a < 6; a++)
                for (int b = 0; b < 5; b++)
                    for (int c = 0; c < 8; c++) {
                        int n = NS[a], m = MS[b], k = KS[c], ldx = k + 3, ldw = k + 5, ldo = m + 2;
                        float *x = random_floats((size_t)n * ldx), *wref;
                        Tensor w = random_tensor(TYPES[ty], m, ldw, &wref);
                        float *out = calloc((size_t)n * ldo, sizeof(float));
                        dot_rows(out, (size_t)ldo, x, (size_t)ldx, TYPES[ty], w.data, (size_t)ldw, n, m, k);
                        for (int t = 0; t < n; t++)
                            for (int r = 0; r < m; r++) {
                                const float *xr = x + (size_t)t * ldx, *wr = wref + (size_t)r * ldw;
                                double got = out[(size_t)t * ldo + r];
                                double want = exact_dot(xr, wr, k), bound = k * U * abs_dot(xr, wr, k) + 1e-30;
                                ck_assert_msg(fabs(got - want) <= bound, "%s %s n=%d m=%d k=%d (t=%d r=%d): %g vs %g",
                                              paths[p], tensor_type_name(TYPES[ty]), n, m, k, t, r, got, want);
                                if (r + 1 < m) {
                                    const float *wn = wr + ldw;
                                    controls++;
                                    outside += fabs(got - exact_dot(xr, wn, k)) > k * U * abs_dot(xr, wn, k) + 1e-30;
                                }
                            }
                        free(x);
                        free(wref);
                        free((void *)w.data);
                        free(out);
                    }
            expect_control(outside, controls, 0.9, "dot_rows %s %s against the next row", paths[p],
                           tensor_type_name(TYPES[ty]));
        }
    }
    kernels_use("portable");
}
END_TEST

/* The rounding of an output is the same whether it is computed alone, in a
 * tile with others, or with other tokens: decode equals prefill.  Shapes:
 * k = 100 (a masked tail), and attention's short rows, k = 64 and 256 in
 * f32 and f16 (the KV cache's types); 37 rows by 1 token (decode's tiles
 * of 16 rows, a partial one; at k = 256 the streaming kernel), 10 and 11
 * tokens (tiles of 3 tokens and the taller ones for 1 or 2 left).  Control: the
 * portable path's tree is another, so its bits differ from a SIMD path's
 * in some outputs (the comparison can fail). */
START_TEST(dot_rows_independent_of_tiling) {
    static const struct { TensorType type; int k; } CASES[] = {
        {TENSOR_F32, 100}, {TENSOR_F32, 64}, {TENSOR_F16, 64}, {TENSOR_F32, 256}, {TENSOR_F16, 256}};
    int m = 37;
    for (size_t ci = 0; ci < 3 * sizeof CASES / sizeof CASES[0]; ci++) {
        int n = (int[]){1, 10, 11}[ci % 3];
        TensorType type = CASES[ci / 3].type;
        int k = CASES[ci / 3].k;
        size_t row = tensor_row_bytes(type, (size_t)k);
        float *x = random_floats((size_t)n * k), *wref;
        Tensor w = random_tensor(type, m, k, &wref);
        float *all = malloc((size_t)n * m * sizeof(float)), *portable = malloc((size_t)n * m * sizeof(float)), one[1];
        for (int p = 0; p < n_paths; p++) {
            kernels_use(paths[p]);
            dot_rows(all, (size_t)m, x, (size_t)k, type, w.data, (size_t)k, n, m, k);
            for (int t = 0; t < n; t++)
                for (int r = 0; r < m; r++) {
                    dot_rows(one, 1, x + (size_t)t * k, (size_t)k, type, (const char *)w.data + (size_t)r * row,
                             (size_t)k, 1, 1, k);
                    ck_assert_msg(memcmp(one, all + (size_t)t * m + r, sizeof(float)) == 0,
                                  "%s %s k=%d n=%d: t=%d r=%d differs alone (%.9g) and in a tile (%.9g)", paths[p],
                                  tensor_type_name(type), k, n, t, r, (double)one[0], (double)all[(size_t)t * m + r]);
                }
            if (p == 0) {
                memcpy(portable, all, (size_t)n * m * sizeof(float));
                continue;
            }
            int differ = 0;
            for (int o = 0; o < n * m; o++) differ += memcmp(&all[o], &portable[o], sizeof(float)) != 0;
            ck_assert_msg(differ > 0, "%s %s k=%d n=%d: control: no output differs from portable's bits", paths[p],
                          tensor_type_name(type), k, n);
        }
        free(x);
        free(wref);
        free((void *)w.data);
        free(all);
        free(portable);
    }
    kernels_use("portable");
}
END_TEST

static float *run_matmul(const Tensor *w, const float *x, int n, int threads) {
    MatmulScratch s;
    PosencError err;
    omp_set_num_threads(threads);
    ck_assert_msg(matmul_scratch_build(&s, w->cols, &err) == 0, "%s", err.msg);
    float *out = malloc((size_t)n * w->rows * sizeof(float));
    matmul(out, x, w, n, &s);
    matmul_scratch_free(&s);
    omp_set_num_threads(2);
    return out;
}

/* The bound of a decode with int8 activations against the exact product
 * x . w of row w (f32 reference weights wr, min terms mt): each x_i moves
 * by at most half its block's step max|x|/127 (blocks of 32, or of 256
 * for the K-quants' Q8_K), so the sum by at most that times sum |w_i|;
 * the float operations add at most k u times the magnitudes of both terms
 * a block's result is the difference of (weights and min terms, each
 * times x_i plus its rounding). */
static double q8_decode_bound(const float *xr, const float *wr, const float *mt, int cols, int qk) {
    double qbound = 0.0, mag = 0.0;
    for (int b0 = 0; b0 < cols; b0 += qk) {
        double amax = 0.0, wsum = 0.0;
        for (int i = b0; i < b0 + qk; i++) {
            amax = fmax(amax, fabs(xr[i]));
            wsum += fabs(wr[i]);
        }
        qbound += amax / 127.0 / 2.0 * wsum;
        for (int i = b0; i < b0 + qk; i++)
            mag += (fabs(xr[i]) + amax / 254.0) * (fabs(wr[i]) + (mt ? mt[i] : 0.0));
    }
    return qbound * (1 + 1e-3) + cols * U * mag;
}

/* The bound a result of activations x times row wr must lie within, and
 * in *want the exact product: with x quantized to int8 in blocks of qk
 * (q8_decode_bound; mt the row's min terms), or in f32 when qk is 0. */
static double row_bound(const float *x, const float *wr, const float *mt, int cols, int qk, double *want) {
    *want = exact_dot(x, wr, cols);
    return qk ? q8_decode_bound(x, wr, mt, cols, qk) : cols * U * abs_dot(x, wr, cols);
}

/* matmul on every path and type: within the bound of the exact product,
 * the same bits at 1 and 2 threads, and (but for the block-quantized
 * types, which decode with int8 activations) the same bits one token at a
 * time as in one call.  Shapes are large enough to go parallel and to span
 * several weight panels and token panels (the block-quantized types run
 * fewer tokens; on a path with int8 prefill their prefill is held to the
 * int8 bound with blocks of 32, else to the f32 one: the f32 GEMM on
 * panels their exact to_f32 fills; BF16 weights prefilled with BF16
 * activations (kernels_bf16_activations: on AMX here if the CPU has it)
 * are held to the f32 bound around the exact product with the activations
 * rounded to BF16, as the kernel takes them, and their decode, in f32, to
 * the f32 bound).  Controls: each prefill output and each decoded one
 * held to a bound is farther than that bound from the next row's exact
 * product (an output of the wrong row fails). */
START_TEST(matmul_paths_threads_and_chunks) {
    static const TensorType TYPES[] = {TENSOR_F32,  TENSOR_F16,  TENSOR_BF16, TENSOR_Q8_0, TENSOR_Q4_0,
                                       TENSOR_Q4_1, TENSOR_Q5_0, TENSOR_Q5_1, TENSOR_Q2_K, TENSOR_Q3_K,
                                       TENSOR_Q4_K, TENSOR_Q5_K, TENSOR_Q6_K, TENSOR_MXFP4};
    int rows = 300, max_cols = 4096 + 256;
    double *want_p = malloc(4 * rows * sizeof(double)), *bound_p = want_p + rows, *want_d = bound_p + rows,
           *bound_d = want_d + rows;
    float *xs = random_floats((size_t)150 * max_cols), *xb = malloc((size_t)150 * max_cols * sizeof(float));
    for (size_t i = 0; i < (size_t)150 * max_cols; i++) xb[i] = bf16_round(xs[i]);
    for (size_t ty = 0; ty < sizeof TYPES / sizeof TYPES[0]; ty++) {
        TensorType type = TYPES[ty];
        const char *tn = tensor_type_name(type);
        int qk = (int)tensor_block_size(type), blocked = qk > 1;
        int cols = qk == QK_K ? 4096 + 256 : 4096 + 64, n = ty < 4 ? 150 : 40;
        float *x = xs, *wref, *mt = NULL;
        Tensor w = random_tensor(type, rows, cols, &wref);
        if (blocked) {
            mt = malloc((size_t)rows * cols * sizeof(float));
            min_terms(type, w.data, mt, (size_t)rows * cols);
        }
        for (int p = 0; p < n_paths; p++) {
            kernels_use(paths[p]);
            float *a = run_matmul(&w, x, n, 1), *b = run_matmul(&w, x, n, 2);
            ck_assert_msg(memcmp(a, b, (size_t)n * rows * sizeof(float)) == 0, "%s %s: 1 vs 2 threads", paths[p], tn);
            /* the blocks of the int8 activations' bound (int8 prefill:
             * blocks of 32 whatever the type), or 0: the f32 bound */
            int qk_prefill = blocked && kernels_int8_prefill() ? QK : 0;
            int qk_decode = !blocked ? 0 : type == TENSOR_Q8_0 || qk == QK ? QK : QK_K;
            /* BF16 weights with BF16 activations: decode keeps f32 ones */
            int bh = type == TENSOR_BF16 && kernels_bf16_activations();
            int prefill_outside = 0, prefill_controls = 0, decode_outside = 0, decode_controls = 0;
            for (int t = 0; t < n; t += 7) {
                float *one1 = run_matmul(&w, x + (size_t)t * cols, 1, 1);
                float *one2 = run_matmul(&w, x + (size_t)t * cols, 1, 2);
                ck_assert_msg(memcmp(one1, one2, (size_t)rows * sizeof(float)) == 0, "%s %s: decode 1 vs 2 threads",
                              paths[p], tn);
                /* every row's exact products and bounds first: each is also
                 * the previous row's control */
                const float *xr = x + (size_t)t * cols, *xp = bh ? xb + (size_t)t * cols : xr;
                for (int r = 0; r < rows; r++) {
                    const float *wr = wref + (size_t)r * cols, *mr = blocked ? mt + (size_t)r * cols : NULL;
                    bound_p[r] = row_bound(xp, wr, mr, cols, qk_prefill, &want_p[r]);
                    if (xp == xr && qk_decode == qk_prefill)
                        bound_d[r] = bound_p[r], want_d[r] = want_p[r];
                    else
                        bound_d[r] = row_bound(xr, wr, mr, cols, qk_decode, &want_d[r]);
                }
                for (int r = 0; r < rows; r++) {
                    double got_p = a[(size_t)t * rows + r], got_d = one1[r];
                    ck_assert_msg(fabs(got_p - want_p[r]) <= bound_p[r], "%s %s prefill t=%d r=%d: %g vs %g (bound %g)",
                                  paths[p], tn, t, r, got_p, want_p[r], bound_p[r]);
                    if (r + 1 < rows) {
                        prefill_controls++;
                        prefill_outside += fabs(got_p - want_p[r + 1]) > bound_p[r + 1];
                    }
                    if (!blocked && !bh) {
                        ck_assert_msg(got_p == got_d, "%s %s t=%d r=%d: prefill %.9g, decode %.9g", paths[p], tn, t, r,
                                      got_p, got_d);
                        continue;
                    }
                    ck_assert_msg(fabs(got_d - want_d[r]) <= bound_d[r], "%s %s decode t=%d r=%d: %g vs %g (bound %g)",
                                  paths[p], tn, t, r, got_d, want_d[r], bound_d[r]);
                    if (r + 1 < rows) {
                        decode_controls++;
                        decode_outside += fabs(got_d - want_d[r + 1]) > bound_d[r + 1];
                    }
                }
                free(one1);
                free(one2);
            }
            /* the int8 bound allows for the worst rounding of every
             * activation, which sums seldom take: there more than half
             * (63% to 81% measured), else nearly all */
            expect_control(prefill_outside, prefill_controls, qk_prefill ? 0.5 : 0.9,
                           "%s %s prefill%s against the next row", paths[p], tn, bh ? " with bf16 activations" : "");
            if (blocked || bh)
                expect_control(decode_outside, decode_controls, blocked ? 0.5 : 0.9,
                               "%s %s decode against the next row", paths[p], tn);
            free(a);
            free(b);
        }
        free(mt);
        free(wref);
        free((void *)w.data);
    }
    kernels_use("portable");
    free(want_p);
    free(xs);
    free(xb);
}
END_TEST

/* matmul_many does several matrices of one width in one parallel region
 * (block-quantized and BF16 prefill; decode): each output is the bits of
 * that matrix alone, on every path, for decode and prefill (40 tokens),
 * at 2 and 3 threads, with row counts that leave partial units, blocks and
 * groups.  The last case mixes types, as Q4_K_M's q, k and v do, which
 * decode splits among the threads by bytes, not rows.  An output put in
 * another matrix's rows, or rows skipped, fails the comparison.
 * Control: for every token, each matrix's outputs differ from the next
 * matrix's in the rows both have (an output of the wrong matrix fails). */
START_TEST(matmul_many_equals_one_by_one) {
    static const TensorType CASES[][3] = {{TENSOR_F32, TENSOR_F32, TENSOR_F32},
                                          {TENSOR_F16, TENSOR_F16, TENSOR_F16},
                                          {TENSOR_BF16, TENSOR_BF16, TENSOR_BF16},
                                          {TENSOR_Q8_0, TENSOR_Q8_0, TENSOR_Q8_0},
                                          {TENSOR_Q4_K, TENSOR_Q4_K, TENSOR_Q4_K},
                                          {TENSOR_Q4_K, TENSOR_Q8_0, TENSOR_Q6_K}};
    static const int ROWS[3] = {45, 109, 64};
    int cols = 256, n = 40, threads_before = omp_get_max_threads();
    float *x = random_floats((size_t)n * cols);
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        char tn[64];
        snprintf(tn, sizeof tn, "%s+%s+%s", tensor_type_name(CASES[c][0]), tensor_type_name(CASES[c][1]),
                 tensor_type_name(CASES[c][2]));
        Tensor w[3];
        float *ref[3];
        for (int i = 0; i < 3; i++) w[i] = random_tensor(CASES[c][i], ROWS[i], cols, &ref[i]);
        for (int p = 0; p < n_paths; p++) {
            kernels_use(paths[p]);
            for (int threads = 2; threads <= 3; threads++)
            for (int tokens = 1; tokens <= n; tokens += n - 1) {
                MatmulScratch s;
                PosencError err;
                omp_set_num_threads(threads);
                ck_assert_msg(matmul_scratch_build(&s, cols, &err) == 0, "%s", err.msg);
                float *outs[3];
                const Tensor *ws[3] = {&w[0], &w[1], &w[2]};
                for (int i = 0; i < 3; i++) outs[i] = malloc((size_t)tokens * ROWS[i] * sizeof(float));
                matmul_many(outs, x, ws, 3, tokens, &s);
                omp_set_num_threads(threads_before);
                for (int i = 0; i < 3; i++) {
                    float *one = run_matmul(&w[i], x, tokens, 2);
                    ck_assert_msg(memcmp(one, outs[i], (size_t)tokens * ROWS[i] * sizeof(float)) == 0,
                                  "%s %s, %d tokens, %d threads: matrix %d differs", paths[p], tn, tokens,
                                  threads, i);
                    int next = (i + 1) % 3, both = ROWS[i] < ROWS[next] ? ROWS[i] : ROWS[next];
                    for (int t = 0; t < tokens; t++)
                        ck_assert_msg(memcmp(one + (size_t)t * ROWS[i], outs[next] + (size_t)t * ROWS[next],
                                             (size_t)both * sizeof(float)) != 0,
                                      "control, %s %s, %d tokens: matrix %d gives matrix %d's bits at token %d",
                                      paths[p], tn, tokens, i, next, t);
                    free(one);
                }
                for (int i = 0; i < 3; i++) free(outs[i]);
                matmul_scratch_free(&s);
            }
        }
        kernels_use("portable");
        for (int i = 0; i < 3; i++) {
            free(ref[i]);
            free((void *)w[i].data);
        }
    }
    free(x);
}
END_TEST

/* BF16 prefill with activations rounded to BF16, past one chunk of them
 * (512 tokens), on each kernel this CPU offers: AMX's tiles, and with AMX
 * refused, AVX512-BF16's pair products.  Each output is the same bits
 * whether its tokens come in one call or in two (split mid-group) and at
 * 1 or 2 threads, and within the f32 bound of the exact product with the
 * activations rounded to BF16.  109 rows are a whole block of the pairs'
 * 64 and a partial one (45 rows: a partial group of 16 and of 4 groups).
 * Controls: nearly every output lies outside the bound around the next
 * row's exact product; and where the CPU has both kernels, AMX's tiles,
 * which sum the pairs in another order, differ from the pair products in
 * the bits of some outputs: each kernel did run. */
START_TEST(bf16_prefill_chunks) {
    static const struct { int kernel, allow_amx; const char *name; } KERNELS[] = {
        {HAS_AMX_BF16, 1, "amx"}, {HAS_BF16_PAIRS, 0, "pairs"}};
    int rows = 109, cols = 256, n = 600, split = 517;
    float *wref, *x = random_floats((size_t)n * cols), *xb = malloc((size_t)cols * sizeof(float));
    Tensor w = random_tensor(TENSOR_BF16, rows, cols, &wref);
    float *on_amx = NULL; /* AMX's outputs, for the pairs' control */
    for (int k = 0; k < 2; k++) {
        if (!has[KERNELS[k].kernel]) continue;
        const char *name = KERNELS[k].name;
        kernels_use("avx512");
        kernels_allow_amx(KERNELS[k].allow_amx);
        int amx_in_use = strstr(kernels_amx_name(), "bf16") != NULL;
        ck_assert_msg(kernels_bf16_activations() && amx_in_use == KERNELS[k].allow_amx,
                      "%s: not the kernel in use (amx: %s)", name, kernels_amx_name());
        float *all = run_matmul(&w, x, n, 2), *one = run_matmul(&w, x, n, 1), *first = run_matmul(&w, x, split, 1),
              *rest = run_matmul(&w, x + (size_t)split * cols, n - split, 2);
        ck_assert_msg(memcmp(all, one, (size_t)n * rows * sizeof(float)) == 0, "%s: 1 vs 2 threads", name);
        ck_assert_msg(memcmp(all, first, (size_t)split * rows * sizeof(float)) == 0, "%s: split, first part", name);
        ck_assert_msg(memcmp(all + (size_t)split * rows, rest, (size_t)(n - split) * rows * sizeof(float)) == 0,
                      "%s: split, rest", name);
        int outputs = 0, beyond = 0;
        for (int t = 0; t < n; t += 13) {
            for (int i = 0; i < cols; i++) xb[i] = bf16_round(x[(size_t)t * cols + i]);
            for (int r = 0; r < rows; r++) {
                const float *wr = wref + (size_t)r * cols;
                double want = exact_dot(xb, wr, cols), got = all[(size_t)t * rows + r];
                ck_assert_msg(fabs(got - want) <= cols * U * abs_dot(xb, wr, cols), "%s t=%d r=%d: %.9g vs %.9g",
                              name, t, r, got, want);
                if (r + 1 < rows) {
                    const float *wn = wref + (size_t)(r + 1) * cols;
                    outputs++;
                    beyond += fabs(got - exact_dot(xb, wn, cols)) > cols * U * abs_dot(xb, wn, cols);
                }
            }
        }
        expect_control(beyond, outputs, 0.9, "bf16 prefill on %s against the next row", name);
        if (KERNELS[k].allow_amx) {
            on_amx = all;
            all = NULL;
        } else if (on_amx) {
            int differ = 0;
            for (size_t o = 0; o < (size_t)n * rows; o++) differ += memcmp(&on_amx[o], &all[o], sizeof(float)) != 0;
            printf("bf16 prefill: AMX's bits differ from the pairs' in %d of %d outputs\n", differ, n * rows);
            ck_assert_msg(differ > 0, "control: AMX's outputs are the pairs' bits (did AMX run?)");
        }
        free(all);
        free(one);
        free(first);
        free(rest);
    }
    kernels_allow_amx(1);
    kernels_use("portable");
    free(on_amx);
    free(xb);
    free(wref);
    free(x);
    free((void *)w.data);
}
END_TEST

/* Block-quantized decode: the SIMD paths quantize activations exactly as
 * the portable one (same blocks, same rounding; Q8_K is shared code), so
 * their integer block sums are the same and only the float operations on
 * them may differ: a bound far tighter than the one against the exact
 * product, which a quant unpacked one step off (a wrong centre, a swapped
 * sub-block scale) exceeds many times over.  Control: nearly every row's
 * result lies outside that bound around the portable result plus
 * sum_i x_i step_i, the row with every quant one step higher. */
START_TEST(quant_decode_matches_portable) {
    static const TensorType TYPES[] = {TENSOR_Q8_0, TENSOR_Q4_0, TENSOR_Q4_1, TENSOR_Q5_0, TENSOR_Q5_1,
                                       TENSOR_Q2_K, TENSOR_Q3_K, TENSOR_Q4_K, TENSOR_Q5_K, TENSOR_Q6_K,
                                       TENSOR_MXFP4};
    int rows = 45;
    float *x = random_floats(256 * 3);
    x[5] = 0.0f;
    for (int i = 64; i < 96; i++) x[i] = 0.0f; /* an all-zero block: scale 0 */
    for (size_t ty = 0; ty < sizeof TYPES / sizeof TYPES[0]; ty++) {
        const char *tn = tensor_type_name(TYPES[ty]);
        /* 3 super-blocks, or an odd number of blocks (kernels that take two at a time) */
        int cols = tensor_block_size(TYPES[ty]) == QK_K ? 256 * 3 : 32 * 23;
        float *wref, *mt = malloc((size_t)rows * cols * sizeof(float));
        float *steps = malloc((size_t)rows * cols * sizeof(float));
        Tensor w = random_tensor(TYPES[ty], rows, cols, &wref);
        min_terms(TYPES[ty], w.data, mt, (size_t)rows * cols);
        quant_steps(TYPES[ty], w.data, steps, (size_t)rows * cols);
        kernels_use("portable");
        float *want = run_matmul(&w, x, 1, 1);
        for (int p = 1; p < n_paths; p++) { /* paths[0] is the portable one */
            kernels_use(paths[p]);
            float *got = run_matmul(&w, x, 1, 2);
            int outside = 0;
            for (int r = 0; r < rows; r++) {
                double bound = 4 * cols * U * quant_mag(x, wref, mt, r, cols) * 1.02;
                ck_assert_msg(fabs(got[r] - want[r]) <= bound, "%s %s row %d: %.9g vs %.9g", paths[p], tn, r,
                              (double)got[r], (double)want[r]);
                outside += fabs(got[r] - (want[r] + exact_dot(x, steps + (size_t)r * cols, cols))) > bound;
            }
            /* sum_i x_i step_i is a sum of random signs, small in some
             * rows: more than 3/4 (Q8_0, whose steps are the smallest: 38 of 45) */
            expect_control(outside, rows, 0.75, "%s %s decode against every quant one step higher", paths[p], tn);
            free(got);
        }
        kernels_use("portable");
        free(want);
        free(steps);
        free(mt);
        free(wref);
        free((void *)w.data);
    }
    free(x);
}
END_TEST

/* Decode on packed rows (kernels_impl.h: Q8_0, Q4_0, MXFP4, Q4_K, Q5_K, Q6_K copied into
 * groups of 16 interleaved rows at load time): on every path that packs
 * the type, the same integer sums as the portable path on the rows as the
 * file has them, so within the float-rounding bound of
 * quant_decode_matches_portable; the same bits at 1 and 2 threads (the
 * threads split at group boundaries); 45 rows leave a partial group.
 * Prefill, whose units are then filled from the packed copy, gives the
 * same bits as from the file's rows.
 * On AVX-512, packed Q5_K and Q6_K give the row-wise kernels' bits, so
 * their packing moved no file's logits.
 * Control: each row's result is outside the bound around the next row's
 * (a quant or scale packed into the wrong row or lane fails); Q4_K's
 * packed rows, whose min term is fused, differ from its row-wise bits. */
START_TEST(packed_decode_matches_rows) {
    static const TensorType TYPES[] = {TENSOR_Q8_0, TENSOR_Q4_0, TENSOR_MXFP4, TENSOR_Q4_K, TENSOR_Q5_K,
                                       TENSOR_Q6_K};
    int rows = 45;
    float *x = random_floats(256 * 3), *x3 = random_floats(256 * 3 * 3);
    for (int i = 64; i < 96; i++) x[i] = 0.0f; /* an all-zero block: scale 0 */
    for (size_t ty = 0; ty < sizeof TYPES / sizeof TYPES[0]; ty++) {
        TensorType type = TYPES[ty];
        int cols = tensor_block_size(type) == QK_K ? 256 * 3 : 32 * 23;
        float *wref, *mt = malloc((size_t)rows * cols * sizeof(float));
        Tensor w = random_tensor(type, rows, cols, &wref);
        min_terms(type, w.data, mt, (size_t)rows * cols);
        kernels_use("portable");
        float *want = run_matmul(&w, x, 1, 1);
        int packs = 0, controls = 0, control_fails = 0;
        for (int p = 0; p < n_paths; p++) {
            kernels_use(paths[p]);
            if (!kernels_packed_bytes(&w)) continue;
            packs++;
            size_t bytes = kernels_packed_bytes(&w);
            ck_assert_uint_eq(bytes, (size_t)(rows + 15) / 16 * 16 * tensor_row_bytes(type, (size_t)cols) +
                                         (type == TENSOR_Q4_K || type == TENSOR_Q5_K ? (size_t)3 * (cols / 256) * 64 : 0));
            void *packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
            kernels_pack(packed, &w);
            Tensor wp = w;
            wp.packed = packed;
            float *got = run_matmul(&wp, x, 1, 1), *got2 = run_matmul(&wp, x, 1, 2);
            ck_assert_msg(memcmp(got, got2, (size_t)rows * sizeof(float)) == 0, "%s %s: 1 vs 2 threads", paths[p],
                          tensor_type_name(type));
            /* on AVX-512, packed Q5_K and Q6_K take the row-wise kernels' float
             * steps: their bits (control: Q4_K's fused min term differs) */
            if (!strcmp(paths[p], "avx512") && (type == TENSOR_Q4_K || type == TENSOR_Q5_K || type == TENSOR_Q6_K)) {
                float *rowwise = run_matmul(&w, x, 1, 1);
                int same = memcmp(got, rowwise, (size_t)rows * sizeof(float)) == 0;
                ck_assert_msg(same == (type != TENSOR_Q4_K), "avx512 %s: packed and row-wise decode %s",
                              tensor_type_name(type), same ? "agree in every bit (control)" : "differ in their bits");
                free(rowwise);
            }
            for (int r = 0; r < rows; r++) {
                double mag = quant_mag(x, wref, mt, r, cols), mag_next = r + 1 < rows ? quant_mag(x, wref, mt, r + 1, cols) : 0.0;
                ck_assert_msg(fabs(got[r] - want[r]) <= 4 * cols * U * mag * 1.02, "%s %s row %d: %.9g vs %.9g",
                              paths[p], tensor_type_name(type), r, (double)got[r], (double)want[r]);
                if (r + 1 < rows) {
                    controls++;
                    control_fails += fabs(got[r] - want[r + 1]) > 4 * cols * U * mag_next * 1.02;
                }
            }
            if (kernels_int8_prefill()) { /* prefill's units filled from the packed copy: the same bits */
                float *pre = run_matmul(&w, x3, 3, 2), *pre_packed = run_matmul(&wp, x3, 3, 2);
                ck_assert_msg(memcmp(pre, pre_packed, (size_t)3 * rows * sizeof(float)) == 0,
                              "%s %s: prefill from the packed copy differs", paths[p], tensor_type_name(type));
                free(pre);
                free(pre_packed);
            }
            free(got);
            free(got2);
            free(packed);
        }
        ck_assert_msg(packs >= 1, "%s: no path packs it", tensor_type_name(type));
        expect_control(control_fails, controls, 0.9, "packed %s against the next row", tensor_type_name(type));
        free(want);
        free_quant_case(&w, wref, mt);
    }
    free(x);
    free(x3);
}
END_TEST

/* A mixture's expert is a view of its rows in the stacked tensor
 * (kernels_rows): from a row that starts a packed group it reads the
 * packed copy, and gives the bits of the whole matrix's rows there, in
 * decode and in prefill (3 tokens), on every path that packs the type.
 * From a row inside a group it reads the file's rows.  Control: expert e's
 * view differs from expert e + 1's rows (a view at the wrong group fails). */
START_TEST(packed_rows_views) {
    static const TensorType TYPES[] = {TENSOR_F32, TENSOR_Q4_K, TENSOR_MXFP4};
    int rows = 3 * KERNELS_PACK_ROWS, cols = 256;
    float *x = random_floats((size_t)3 * cols);
    for (size_t ty = 0; ty < sizeof TYPES / sizeof TYPES[0]; ty++) {
        const char *tn = tensor_type_name(TYPES[ty]);
        float *wref;
        Tensor w = random_tensor(TYPES[ty], rows, cols, &wref);
        for (int p = 0; p < n_paths; p++) {
            kernels_use(paths[p]);
            size_t bytes = kernels_packed_bytes(&w);
            if (!bytes) continue;
            void *packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
            kernels_pack(packed, &w);
            Tensor wp = w;
            wp.packed = packed;
            for (int tokens = 1; tokens <= 3; tokens += 2) {
                float *whole = run_matmul(&wp, x, tokens, 2);
                for (int e = 0; e < 3; e++) {
                    Tensor view = kernels_rows(&wp, e * KERNELS_PACK_ROWS, KERNELS_PACK_ROWS);
                    ck_assert_ptr_nonnull(view.packed);
                    float *got = run_matmul(&view, x, tokens, 2);
                    for (int t = 0; t < tokens; t++) {
                        const float *want = whole + (size_t)t * rows + e * KERNELS_PACK_ROWS;
                        ck_assert_msg(memcmp(got + t * KERNELS_PACK_ROWS, want, KERNELS_PACK_ROWS * sizeof(float)) == 0,
                                      "%s %s, %d tokens: expert %d's view differs from its rows", paths[p], tn,
                                      tokens, e);
                        if (e < 2)
                            ck_assert_msg(memcmp(got + t * KERNELS_PACK_ROWS, want + KERNELS_PACK_ROWS,
                                                 KERNELS_PACK_ROWS * sizeof(float)) != 0,
                                          "control, %s %s: expert %d's view gives expert %d's bits", paths[p], tn,
                                          e, e + 1);
                    }
                    free(got);
                }
                free(whole);
            }
            ck_assert_ptr_null(kernels_rows(&wp, KERNELS_PACK_ROWS / 2, KERNELS_PACK_ROWS).packed);
            free(packed);
        }
        kernels_use("portable");
        free(wref);
        free((void *)w.data);
    }
    free(x);
}
END_TEST

/* Packed F32 and F16 rows (kernels_impl.h: groups of 16 rows, a column
 * of the 16 per vector): on every path that packs them, each output is one
 * chain of multiply-adds in column order (F16 converted exactly), so
 * decode and prefill give the same bits, at 1 and 2 threads and however
 * the tokens are split, and each is within the f32 bound of the exact
 * product.  Only the AVX-512 path packs them (the test runs where it is
 * present).  Shapes leave a partial group (45, 60 and 300 rows: 60 puts it
 * in decode's run of four groups and in a full prefill tile of four),
 * partial tiles of groups and of 6 tokens, and several panels of rows and
 * tokens (100 tokens).  Controls: each decoded row is outside the bound
 * around the next row's exact product; and the rows read unpacked (the
 * lane-tree kernels) differ in their bits from the packed chains, which
 * the bit-for-bit checks would catch were prefill to read them. */
START_TEST(packed_float_decode_equals_prefill) {
    static const int SHAPES[][2] = {{45, 300}, {60, 300}, {300, 1100}};
    int n = 100, split = 37;
    float *x = random_floats((size_t)n * 1100);
    for (int i = 0; i < 6; i++) {
        TensorType type = i < 3 ? TENSOR_F32 : TENSOR_F16;
        int rows = SHAPES[i % 3][0], cols = SHAPES[i % 3][1];
        const char *tn = tensor_type_name(type);
        float *wref;
        Tensor w = random_tensor(type, rows, cols, &wref);
        int packs = 0, controls = 0, control_fails = 0, outputs = 0, tree_differs = 0;
        for (int p = 0; p < n_paths; p++) {
            kernels_use(paths[p]);
            if (!kernels_packed_bytes(&w)) continue;
            packs++;
            size_t bytes = kernels_packed_bytes(&w);
            ck_assert_uint_eq(bytes, (size_t)(rows + 15) / 16 * 16 * tensor_row_bytes(type, (size_t)cols));
            void *packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
            kernels_pack(packed, &w);
            Tensor wp = w;
            wp.packed = packed;
            float *pre = run_matmul(&wp, x, n, 2), *pre1 = run_matmul(&wp, x, n, 1);
            float *rest = run_matmul(&wp, x + (size_t)split * cols, n - split, 2), *tree = run_matmul(&w, x, n, 2);
            ck_assert_msg(memcmp(pre, pre1, (size_t)n * rows * sizeof(float)) == 0, "%s %s %dx%d: prefill 1 vs 2 threads",
                          paths[p], tn, rows, cols);
            ck_assert_msg(memcmp(pre + (size_t)split * rows, rest, (size_t)(n - split) * rows * sizeof(float)) == 0,
                          "%s %s %dx%d: prefill split at token %d differs", paths[p], tn, rows, cols, split);
            for (int t = 0; t < n; t += 7) {
                const float *xt = x + (size_t)t * cols;
                float *dec = run_matmul(&wp, xt, 1, 1), *dec2 = run_matmul(&wp, xt, 1, 2);
                ck_assert_msg(memcmp(dec, dec2, (size_t)rows * sizeof(float)) == 0, "%s %s %dx%d: decode 1 vs 2 threads",
                              paths[p], tn, rows, cols);
                for (int r = 0; r < rows; r++) {
                    const float *wr = wref + (size_t)r * cols;
                    double bound = cols * U * abs_dot(xt, wr, cols);
                    ck_assert_msg(dec[r] == pre[(size_t)t * rows + r], "%s %s %dx%d t=%d r=%d: decode %.9g, prefill %.9g",
                                  paths[p], tn, rows, cols, t, r, (double)dec[r], (double)pre[(size_t)t * rows + r]);
                    ck_assert_msg(fabs(dec[r] - exact_dot(xt, wr, cols)) <= bound, "%s %s %dx%d t=%d r=%d: %.9g vs %.9g",
                                  paths[p], tn, rows, cols, t, r, (double)dec[r], exact_dot(xt, wr, cols));
                    outputs++;
                    tree_differs += tree[(size_t)t * rows + r] != dec[r];
                    if (r + 1 < rows) {
                        controls++;
                        control_fails += fabs(dec[r] - exact_dot(xt, wr + cols, cols)) >
                                         cols * U * abs_dot(xt, wr + cols, cols);
                    }
                }
                free(dec);
                free(dec2);
            }
            free(pre);
            free(pre1);
            free(rest);
            free(tree);
            free(packed);
        }
        ck_assert_msg(packs >= 1, "%s: the AVX-512 path does not pack it", tn);
        expect_control(control_fails, controls, 0.9, "packed %s %dx%d decode against the next row", tn, rows, cols);
        printf("packed %s %dx%d: %d of %d outputs of the unpacked rows differ in their bits\n", tn, rows, cols,
               tree_differs, outputs);
        ck_assert_msg(tree_differs > outputs / 4, "%s %dx%d: the unpacked rows give the packed bits (%d differ)", tn,
                      rows, cols, tree_differs);
        kernels_use("portable");
        free(wref);
        free((void *)w.data);
    }
    free(x);
}
END_TEST

/* Block-quantized prefill (int8 units, kernels_impl.h): on every path that
 * has it, the integer sums are exact, so the paths differ only in the f32
 * scaling of each half block, bounded as in quant_decode_matches_portable;
 * and each output is the same bits whether its tokens come in one call or
 * in several (more tokens than one QuantActs holds; a split mid-tile).
 * The 32-block types quantize activations for prefill exactly as for
 * decode, so there the two agree within the same bound.  Shapes leave a
 * partial unit (45 rows) and a partial tile of tokens.  Controls: each
 * row's result is outside the bound around the next row's portable
 * prefill, and around its decode. */
START_TEST(quant_prefill_matches_portable) {
    static const TensorType TYPES[] = {TENSOR_Q8_0, TENSOR_Q4_0, TENSOR_Q4_1, TENSOR_Q5_0, TENSOR_Q5_1,
                                       TENSOR_Q2_K, TENSOR_Q3_K, TENSOR_Q4_K, TENSOR_Q5_K, TENSOR_Q6_K,
                                       TENSOR_MXFP4};
    int rows = 45, n = 7, cols = 256 * 3, long_n = 600, split = 517;
    float *x = random_floats((size_t)long_n * cols);
    for (int i = 64; i < 96; i++) x[cols + i] = 0.0f; /* an all-zero block: scale 0 */
    for (size_t ty = 0; ty < sizeof TYPES / sizeof TYPES[0]; ty++) {
        TensorType type = TYPES[ty];
        const char *tn = tensor_type_name(type);
        float *wref, *mt = malloc((size_t)rows * cols * sizeof(float));
        Tensor w = random_tensor(type, rows, cols, &wref);
        min_terms(type, w.data, mt, (size_t)rows * cols);
        kernels_use("portable");
        ck_assert(kernels_int8_prefill());
        float *want = run_matmul(&w, x, n, 1);
        int controls = 0, control_fails = 0, decode_controls = 0, decode_fails = 0;
        for (int p = 0; p < n_paths; p++) {
            kernels_use(paths[p]);
            if (!kernels_int8_prefill()) continue;
            float *got = run_matmul(&w, x, n, 2);
            for (int t = 0; t < n; t++) {
                const float *xt = x + (size_t)t * cols;
                float *dec = tensor_block_size(type) == QK ? run_matmul(&w, xt, 1, 1) : NULL;
                for (int r = 0; r < rows; r++) {
                    double mag = quant_mag(xt, wref, mt, r, cols),
                           mag_next = r + 1 < rows ? quant_mag(xt, wref, mt, r + 1, cols) : 0.0;
                    double bound = 4 * cols * U * mag * 1.02, bound_next = 4 * cols * U * mag_next * 1.02;
                    double g = got[(size_t)t * rows + r];
                    ck_assert_msg(fabs(g - want[(size_t)t * rows + r]) <= bound, "%s %s t=%d row %d: %.9g vs %.9g",
                                  paths[p], tn, t, r, g, (double)want[(size_t)t * rows + r]);
                    if (dec)
                        ck_assert_msg(fabs(g - dec[r]) <= bound, "%s %s t=%d row %d: prefill %.9g, decode %.9g",
                                      paths[p], tn, t, r, g, (double)dec[r]);
                    if (r + 1 < rows) {
                        controls++;
                        control_fails += fabs(g - want[(size_t)t * rows + r + 1]) > bound_next;
                        if (dec) {
                            decode_controls++;
                            decode_fails += fabs(g - dec[r + 1]) > bound_next;
                        }
                    }
                }
                free(dec);
            }
            free(got);
            float *all = run_matmul(&w, x, long_n, 2), *first = run_matmul(&w, x, split, 1),
                  *rest = run_matmul(&w, x + (size_t)split * cols, long_n - split, 2);
            ck_assert_msg(memcmp(all, first, (size_t)split * rows * sizeof(float)) == 0 &&
                              memcmp(all + (size_t)split * rows, rest, (size_t)(long_n - split) * rows * sizeof(float)) == 0,
                          "%s %s: %d tokens in one call differ from %d + %d", paths[p], tn, long_n, split,
                          long_n - split);
            free(all);
            free(first);
            free(rest);
        }
        expect_control(control_fails, controls, 0.9, "prefill %s against the next row's", tn);
        if (tensor_block_size(type) == QK)
            expect_control(decode_fails, decode_controls, 0.9, "prefill %s against the next row's decode", tn);
        free(want);
        free_quant_case(&w, wref, mt);
    }
    free(x);
}
END_TEST

/* Block-quantized prefill on AMX (kernels_amx.c) sums the same exact
 * integers as VNNI and scales them in the same order: the same bits, with
 * fewer than 16 tokens (the A tile reads zeros past the end), a last tile
 * of 16 moved back over tokens already done (20, 600 tokens: 600 is one
 * chunk of 512 and 88 more), and a partial unit (45 rows: 13 in the
 * second unit's first group, none in its second).  The types with one
 * scale per block and no min go to AMX (its unit count rises), the others
 * stay on VNNI even with AMX allowed (it does not).  Control: the portable
 * path, whose sums round without FMA, differs in the bits of some outputs,
 * so the comparison can fail.  It runs where the CPU has AMX-INT8. */
START_TEST(amx_int8_prefill_equals_vnni) {
    static const TensorType TYPES[] = {TENSOR_Q8_0, TENSOR_Q4_0, TENSOR_Q4_1, TENSOR_Q5_0, TENSOR_Q5_1,
                                       TENSOR_Q2_K, TENSOR_Q3_K, TENSOR_Q4_K, TENSOR_Q5_K, TENSOR_Q6_K,
                                       TENSOR_MXFP4};
    static const int TOKENS[] = {7, 20, 600};
    int rows = 45, cols = 256 * 3, differ = 0, outputs = 0;
    float *x = random_floats((size_t)600 * cols);
    for (size_t ty = 0; ty < sizeof TYPES / sizeof TYPES[0]; ty++) {
        TensorType type = TYPES[ty];
        int on_amx = type == TENSOR_Q8_0 || type == TENSOR_Q4_0 || type == TENSOR_Q5_0 || type == TENSOR_MXFP4;
        float *wref;
        Tensor w = random_tensor(type, rows, cols, &wref);
        for (size_t i = 0; i < sizeof TOKENS / sizeof TOKENS[0]; i++) {
            int n = TOKENS[i];
            size_t bytes = (size_t)n * rows * sizeof(float), units = kernels_amx_units();
            kernels_use("avx512");
            ck_assert(kernels_int8_amx());
            float *amx = run_matmul(&w, x, n, 2);
            ck_assert_msg((kernels_amx_units() > units) == on_amx, "%s, %d tokens: %zu units on AMX",
                          tensor_type_name(type), n, kernels_amx_units() - units);
            kernels_allow_amx(0);
            units = kernels_amx_units();
            float *vnni = run_matmul(&w, x, n, 2);
            ck_assert(kernels_amx_units() == units);
            kernels_allow_amx(1);
            ck_assert_msg(memcmp(amx, vnni, bytes) == 0, "%s, %d tokens: AMX and VNNI differ", tensor_type_name(type),
                          n);
            kernels_use("portable");
            float *portable = run_matmul(&w, x, n, 1);
            int d = 0;
            for (size_t o = 0; o < (size_t)n * rows; o++) d += memcmp(&amx[o], &portable[o], sizeof(float)) != 0;
            ck_assert_msg(d > 0, "%s, %d tokens: the control found no output whose bits differ",
                          tensor_type_name(type), n);
            differ += d, outputs += n * rows;
            free(amx);
            free(vnni);
            free(portable);
        }
        free(wref);
        free((void *)w.data);
    }
    printf("amx int8 = vnni: portable's bits differ in %d of %d outputs\n", differ, outputs);
    kernels_use("avx512");
    free(x);
}
END_TEST

/* The exact sum_c p[c] v[c * ldv + i] over `cells` and, in *mag, the sum of
 * its terms' magnitudes. */
static double exact_mix(const float *p, const float *v, size_t ldv, int cells, int i, double *mag) {
    double sum = 0.0;
    *mag = 0.0;
    for (int c = 0; c < cells; c++) {
        double term = (double)p[c] * v[(size_t)c * ldv + i];
        sum += term;
        *mag += fabs(term);
    }
    return sum;
}

/* mix_rows: the weighted sum of values, within the bound of the exact sum.
 * Control: nearly every output is outside the bound around the next
 * element's exact sum (an output from the wrong column fails). */
START_TEST(mix_rows_within_bound) {
    static const int HS[] = {8, 16, 32, 48, 64, 72, 128}, CELLS[] = {1, 5, 33};
    static const TensorType TYPES[] = {TENSOR_F32, TENSOR_F16};
    for (int p = 0; p < n_paths; p++) {
        kernels_use(paths[p]);
        for (int ty = 0; ty < 2; ty++) {
            int controls = 0, outside = 0;
            for (int h = 0; h < 7; h++)
                for (int c = 0; c < 3; c++)
                    for (int n = 1; n <= 6; n++) {
                        int hs = HS[h], cells = CELLS[c], ldv = hs * 3, ldp = cells + 1, ldo = hs + 4;
                        float *pr = random_floats((size_t)n * ldp), *vref;
                        Tensor v = random_tensor(TYPES[ty], cells, ldv, &vref);
                        float *out = malloc((size_t)n * ldo * sizeof(float));
                        for (size_t i = 0; i < (size_t)n * ldo; i++) out[i] = 7.0f;
                        mix_rows(out, (size_t)ldo, pr, (size_t)ldp, TYPES[ty], v.data, (size_t)ldv, n, cells, hs);
                        for (int t = 0; t < n; t++) {
                            const float *pt = pr + (size_t)t * ldp;
                            for (int i = 0; i < hs; i++) {
                                double mag, want = exact_mix(pt, vref, (size_t)ldv, cells, i, &mag);
                                double got = out[(size_t)t * ldo + i];
                                ck_assert_msg(fabs(got - want) <= cells * U * mag + 1e-30, "%s %s hs=%d cells=%d n=%d",
                                              paths[p], tensor_type_name(TYPES[ty]), hs, cells, n);
                                if (i + 1 < hs) {
                                    double want_next = exact_mix(pt, vref, (size_t)ldv, cells, i + 1, &mag);
                                    controls++;
                                    outside += fabs(got - want_next) > cells * U * mag + 1e-30;
                                }
                            }
                            for (int i = hs; i < ldo; i++) /* nothing written past the head */
                                ck_assert(out[(size_t)t * ldo + i] == 7.0f);
                        }
                        free(pr);
                        free(vref);
                        free((void *)v.data);
                        free(out);
                    }
            expect_control(outside, controls, 0.9, "mix_rows %s %s against the next element", paths[p],
                           tensor_type_name(TYPES[ty]));
        }
    }
    kernels_use("portable");
}
END_TEST

/* Conversions are exact on every path, including f16 subnormals,
 * infinities and overflow.  Control: every output is filled with 0xAB
 * bytes first, which no conversion of these inputs gives, so an element
 * left unwritten fails the comparison (and one written past n, the check
 * of the byte after it). */
START_TEST(conversions_exact) {
    enum { N = 1000 };
    float src[N];
    for (int i = 0; i < N; i++) src[i] = frand() * powf(2.0f, (float)(i % 40) - 30.0f);
    src[0] = 0.0f, src[1] = -0.0f, src[2] = 70000.0f, src[3] = -1e-7f, src[4] = INFINITY, src[5] = 65519.0f;
    uint16_t want_h[N], got_h[N];
    for (int i = 0; i < N; i++) want_h[i] = fp32_to_fp16(src[i]);
    float *qref;
    Tensor q = random_tensor(TENSOR_Q8_0, 1, 320, &qref);
    for (int p = 0; p < n_paths; p++) {
        kernels_use(paths[p]);
        for (int n = N - 17; n <= N; n++) { /* every tail length */
            memset(got_h, 0xAB, sizeof got_h);
            convert_to_f16(got_h, src, (size_t)n);
            ck_assert_msg(memcmp(got_h, want_h, (size_t)n * 2) == 0, "%s to f16 n=%d", paths[p], n);
            if (n < N) ck_assert_uint_eq(got_h[n], 0xABAB);
            float back[N], want[N];
            memset(back, 0xAB, sizeof back);
            convert_to_f32(back, want_h, TENSOR_F16, (size_t)n);
            tensor_dequantize(TENSOR_F16, want_h, want, (size_t)n);
            ck_assert_msg(memcmp(back, want, (size_t)n * 4) == 0, "%s f16 to f32", paths[p]);
            memset(back, 0xAB, sizeof back);
            convert_to_f32(back, want_h, TENSOR_BF16, (size_t)n);
            tensor_dequantize(TENSOR_BF16, want_h, want, (size_t)n);
            ck_assert_msg(memcmp(back, want, (size_t)n * 4) == 0, "%s bf16 to f32", paths[p]);
        }
        float got_q[320];
        memset(got_q, 0xAB, sizeof got_q);
        convert_to_f32(got_q, q.data, TENSOR_Q8_0, 320);
        ck_assert_msg(memcmp(got_q, qref, sizeof got_q) == 0, "%s q8_0 to f32", paths[p]);
    }
    kernels_use("portable");
    free(qref);
    free((void *)q.data);
}
END_TEST

/* Q8_K activations (the K-quants' decode): every path gives the portable
 * path's bits, since the maximum is exact in any order and each quant is
 * one product rounded to nearest even.  The input has an all-zero
 * super-block (scale 0), one whose largest |x| is 127 (scale 1: its x.5
 * values are ties, which go to the even integer) and one of large values.
 * Control: the same input with one element moved up a quantization step
 * gives other bytes (a quant off by one step fails). */
START_TEST(q8k_activations_match_portable) {
    enum { K = 256 * 4 };
    float *x = random_floats(K);
    for (int i = 0; i < 256; i++) x[256 + i] = 0.0f;
    for (int i = 0; i < 256; i++) x[512 + i] = (float)(i % 64) * 0.5f - 16.0f;
    x[512 + 7] = 127.0f;
    for (int i = 0; i < 256; i++) x[768 + i] *= 3e4f;
    int8_t want_q[K], got_q[K], moved_q[K];
    float want_d[K / 256], got_d[K / 256], moved_d[K / 256];
    int16_t want_s[K / 16], got_s[K / 16], moved_s[K / 16];
    kernels_use("portable");
    quantize_q8k(want_q, want_d, want_s, x, K);
    float step = want_d[0];
    x[3] += step;
    quantize_q8k(moved_q, moved_d, moved_s, x, K);
    x[3] -= step;
    ck_assert_msg(memcmp(moved_q, want_q, K) != 0 || memcmp(moved_s, want_s, sizeof want_s) != 0,
                  "control: an element one step up gives the same quants");
    for (int p = 1; p < n_paths; p++) { /* paths[0] is the portable one */
        kernels_use(paths[p]);
        quantize_q8k(got_q, got_d, got_s, x, K);
        ck_assert_msg(memcmp(got_q, want_q, K) == 0, "%s Q8_K quants differ from the portable path's", paths[p]);
        ck_assert_msg(memcmp(got_d, want_d, sizeof want_d) == 0, "%s Q8_K scales differ", paths[p]);
        ck_assert_msg(memcmp(got_s, want_s, sizeof want_s) == 0, "%s Q8_K sums differ", paths[p]);
    }
    kernels_use("portable");
    free(x);
}
END_TEST

/* Activations: SIMD exp is within a few ulp of libm's, so the results are
 * within a small relative bound of the portable path's.  Softmax runs on
 * the whole row, whose logits of 95 and -100 take exp to its range's ends
 * (the other weights fall below 1e-36, or to 0), and on the row after its
 * first 4 logits, within 24 of each other, whose weights are all normal
 * floats.  Control: nearly every result is outside the bound around the
 * next element's portable result (an element computed from the wrong
 * input fails); for softmax on the second row. */
START_TEST(activations_match_portable) {
    enum { N = 203, EXTREMES = 4 };
    float in[N], g[N];
    for (int i = 0; i < N; i++) {
        in[i] = 12.0f * frand();
        g[i] = frand();
    }
    in[0] = -100.0f, in[1] = 95.0f, in[2] = 0.0f, in[3] = -30.0f;
    float want_w[N], want_g[N];
    kernels_use("portable");
    memcpy(want_w, in, sizeof in);
    swiglu(want_w, g, N);
    memcpy(want_g, in, sizeof in);
    gelu(want_g, N);
    for (int p = 1; p < n_paths; p++) { /* paths[0] is the portable one */
        int controls = 0, softmax_controls = 0, softmax_outside = 0, swiglu_outside = 0, gelu_outside = 0;
        for (int n = N - 16; n <= N; n++) {
            int m = n - EXTREMES;
            float s[N], mid[N], w[N], ge[N], ref_s[N], ref_mid[N];
            kernels_use(paths[p]);
            memcpy(s, in, sizeof in);
            softmax(s, n);
            memcpy(mid, in + EXTREMES, (size_t)m * sizeof(float));
            softmax(mid, m);
            memcpy(w, in, sizeof in);
            swiglu(w, g, n);
            memcpy(ge, in, sizeof in);
            gelu(ge, n);
            kernels_use("portable");
            memcpy(ref_s, in, sizeof in);
            softmax(ref_s, n);
            memcpy(ref_mid, in + EXTREMES, (size_t)m * sizeof(float));
            softmax(ref_mid, m);
            /* each result's bound around the portable one */
#define SOFTMAX_BOUND(ref) (1e-6f * (ref) + 1e-37f)
#define SWIGLU_BOUND(i) (1e-6f * fabsf(want_w[i]) + 1e-30f)
            /* tanh through exp: absolute error ~u near 0, relative elsewhere */
#define GELU_BOUND(i) (1e-6f * fabsf(want_g[i]) + 1e-7f * fabsf(in[i]))
            for (int i = 0; i < n; i++) {
                ck_assert_msg(fabsf(s[i] - ref_s[i]) <= SOFTMAX_BOUND(ref_s[i]), "%s softmax[%d] n=%d: %g vs %g",
                              paths[p], i, n, (double)s[i], (double)ref_s[i]);
                ck_assert_msg(fabsf(w[i] - want_w[i]) <= SWIGLU_BOUND(i), "%s swiglu[%d]: %g vs %g", paths[p], i,
                              (double)w[i], (double)want_w[i]);
                ck_assert_msg(fabsf(ge[i] - want_g[i]) <= GELU_BOUND(i), "%s gelu[%d] (x=%g): %g vs %g", paths[p], i,
                              (double)in[i], (double)ge[i], (double)want_g[i]);
                if (i + 1 < n) {
                    controls++;
                    swiglu_outside += fabsf(w[i] - want_w[i + 1]) > SWIGLU_BOUND(i + 1);
                    gelu_outside += fabsf(ge[i] - want_g[i + 1]) > GELU_BOUND(i + 1);
                }
            }
            for (int i = 0; i < m; i++) {
                ck_assert_msg(fabsf(mid[i] - ref_mid[i]) <= SOFTMAX_BOUND(ref_mid[i]),
                              "%s softmax of the second row [%d] n=%d: %g vs %g", paths[p], i, m, (double)mid[i],
                              (double)ref_mid[i]);
                if (i + 1 < m) {
                    softmax_controls++;
                    softmax_outside += fabsf(mid[i] - ref_mid[i + 1]) > SOFTMAX_BOUND(ref_mid[i + 1]);
                }
            }
#undef SOFTMAX_BOUND
#undef SWIGLU_BOUND
#undef GELU_BOUND
        }
        expect_control(softmax_outside, softmax_controls, 0.9, "%s softmax against the next element", paths[p]);
        expect_control(swiglu_outside, controls, 0.9, "%s swiglu against the next element", paths[p]);
        /* gelu of logits below about -4 is within 1e-6 of 0, and of its
         * neighbour's when that is as low: more than 3/4 (91% measured) */
        expect_control(gelu_outside, controls, 0.75, "%s gelu against the next element", paths[p]);
    }
    kernels_use("portable");
}
END_TEST

/* sum_exp against double, on every path: the float sum of n terms each
 * within a few ulp is within ~(n u + 4u) relative of the exact sum; the max
 * is exact.  Logits of magnitude 1000 must neither overflow nor lose the
 * sum's precision (it is taken relative to the max).  Controls: the exact
 * sum taken relative to a maximum off by 1e-2, which scales it by
 * e^-0.01 (1% off, while the bound is at most (29524 + 8) u = 0.18%), is
 * outside the bound; and with one of the two logits of 1000 masked the
 * sum (1) is outside the bound around 2. */
START_TEST(sum_exp_within_bound) {
    enum { N = 32000 };
    float *x = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) x[i] = 8.0f * frand();
    x[17] = -INFINITY;
    for (int p = 0; p < n_paths; p++) {
        kernels_use(paths[p]);
        for (int n = 1; n <= N; n = n * 3 + 1) {
            float m = -INFINITY, got_m;
            double s = 0.0, s_off = 0.0;
            /* x holds no NaN, and a NaN maximum from the kernel fails == */
            for (int i = 0; i < n; i++) m = fmaxf(m, x[i]);
            for (int i = 0; i < n; i++) {
                s += exp((double)x[i] - m);
                s_off += exp((double)x[i] - (m + 1e-2));
            }
            double got = sum_exp(x, n, &got_m);
            ck_assert_msg(got_m == m, "%s n=%d: max %.9g vs %.9g", paths[p], n, got_m, m);
            ck_assert_msg(fabs(got - s) <= (n + 8) * U * s, "%s n=%d: %.9g vs %.9g", paths[p], n, got, s);
            ck_assert_msg(fabs(got - s_off) > (n + 8) * U * s_off,
                          "control, %s n=%d: %.9g within the bound of the sum with the maximum off by 1e-2 (%.9g)",
                          paths[p], n, got, s_off);
        }
        float big[3] = {1000.0f, 1000.0f, -INFINITY}, m;
        ck_assert_msg(fabs(sum_exp(big, 3, &m) - 2.0) <= 8 * U && m == 1000.0f, "%s: no overflow", paths[p]);
        big[1] = -INFINITY;
        ck_assert_msg(fabs(sum_exp(big, 3, &m) - 2.0) > 8 * U, "control, %s: one logit masked, still 2", paths[p]);
        float none[2] = {-INFINITY, -INFINITY};
        ck_assert_msg(sum_exp(none, 2, &m) == 0.0f && m == -INFINITY, "%s: all masked", paths[p]);
    }
    kernels_use("portable");
    free(x);
}
END_TEST

/* exp_sum, one block of attention's online softmax: each e^(x - m) within
 * a few ulp of the exact exponential of the float x - m (the paths' exp:
 * 2 ulp), the sum within the float sum's bound
 * of the exact one, -inf exactly 0, and masked cells appended change
 * neither the values nor the sum's bits (decode = prefill).  Control: a
 * maximum off by 1e-3 puts the sum outside its bound and nearly every
 * value outside its own (e^-0.001: 1e-3 off, the bound 4 u = 2.4e-7). */
START_TEST(exp_sum_within_bound) {
    enum { N = 700 };
    float x[N + 40], y[N + 40];
    for (int i = 0; i < N; i++) x[i] = 8.0f * frand();
    x[5] = -INFINITY;
    for (int p = 0; p < n_paths; p++) {
        kernels_use(paths[p]);
        int values = 0, values_outside = 0;
        for (int n = 1; n <= N; n = n * 2 + 3) {
            float m = 9.0f; /* a running maximum above the block's */
            double want = 0.0;
            /* of the float difference, as the kernels take it */
            for (int i = 0; i < n; i++) want += exp((double)(float)(x[i] - m));
            memcpy(y, x, (size_t)n * sizeof(float));
            double got = exp_sum(y, n, m);
            for (int i = 0; i < n; i++) {
                double e = exp((double)(float)(x[i] - m));
                ck_assert_msg(fabs(y[i] - e) <= 4 * U * e, "%s n=%d i=%d: %.9g vs %.9g", paths[p], n, i, y[i], e);
            }
            ck_assert_msg(fabs(got - want) <= (n + 8) * U * want, "%s n=%d: %.9g vs %.9g", paths[p], n, got, want);
            float z[N + 40];
            memcpy(z, x, (size_t)n * sizeof(float));
            for (int i = n; i < n + 37; i++) z[i] = -INFINITY;
            float sum_masked = exp_sum(z, n + 37, m);
            ck_assert_msg(sum_masked == (float)got && memcmp(z, y, (size_t)n * sizeof(float)) == 0,
                          "%s n=%d: masked cells changed the block", paths[p], n);
            for (int i = n; i < n + 37; i++) ck_assert(z[i] == 0.0f);
            memcpy(y, x, (size_t)n * sizeof(float));
            double off = exp_sum(y, n, m + 1e-3f); /* control: a maximum off by 1e-3 */
            ck_assert_msg(fabs(off - want) > (n + 8) * U * want, "%s n=%d: control within the bound", paths[p], n);
            for (int i = 0; i < n; i++) {
                double e = exp((double)(float)(x[i] - m));
                values++;
                values_outside += fabs(y[i] - e) > 4 * U * e;
            }
        }
        expect_control(values_outside, values, 0.9, "%s exp_sum's values with the maximum off by 1e-3", paths[p]);
    }
    kernels_use("portable");
}
END_TEST

/* Attention masks cells with -inf: they must weigh exactly 0, and a row
 * with masked cells appended must give the same bits as the row alone.
 * Control: one cell appended unmasked, with the row's first logit (the
 * logits lie within 10 of each other, so its weight is at least
 * e^-10 / (n + 1) of the sum, far above a float's rounding), weighs more
 * than 0 and changes the row's bits. */
START_TEST(softmax_masked_cells_exact) {
    for (int p = 0; p < n_paths; p++) {
        kernels_use(paths[p]);
        for (int n = 1; n < 40; n++) {
            float a[64], b[64], c[64];
            for (int i = 0; i < n; i++) a[i] = b[i] = c[i] = 5.0f * frand();
            for (int i = n; i < 64; i++) b[i] = c[i] = -INFINITY;
            c[n] = c[0];
            softmax(a, n);
            softmax(b, n + 19);
            softmax(c, n + 19);
            ck_assert_msg(memcmp(a, b, (size_t)n * sizeof(float)) == 0, "%s n=%d", paths[p], n);
            for (int i = n; i < n + 19; i++) ck_assert_msg(b[i] == 0.0f, "%s masked cell %d = %g", paths[p], i, (double)b[i]);
            ck_assert_msg(memcmp(a, c, (size_t)n * sizeof(float)) != 0 && c[n] > 0.0f,
                          "control, %s n=%d: a cell appended unmasked changed nothing", paths[p], n);
        }
    }
    kernels_use("portable");
}
END_TEST

/* ---- dispatch tables ----------------------------------------------------------- */

/* Every type the GGUF reader accepts (tensor_type_supported; llama2.c files
 * are f32) has on every path the kernels a matmul needs, and every type a
 * KV cache can be built with has those attention needs: a loader and a
 * table that drift apart fail here, not as a call through NULL.  Controls:
 * a type with no entry (q8_1, which nothing loads), a use a type has
 * no kernel for (bf16 as the cache: no weighted sum) and an id past the
 * table are each reported by name. */
START_TEST(dispatch_covers_every_loaded_type) {
    PosencError err;
    int weights = 0, caches = 0;
    for (uint32_t id = 0; id < 256; id++) {
        if (!tensor_type_supported(id)) continue;
        weights++;
        ck_assert_msg(kernels_check_type((TensorType)id, KERNEL_USE_WEIGHTS, &err) == 0, "%s", err.msg);
    }
    for (int id = 0; id < TENSOR_TYPE_COUNT; id++) {
        KVCache kv;
        if (kv_cache_build(&kv, 1, 8, 4, 4, (TensorType)id, &err)) continue;
        kv_cache_free(&kv);
        caches++;
        ck_assert_msg(kernels_check_type((TensorType)id, KERNEL_USE_KV_CACHE, &err) == 0, "%s", err.msg);
    }
    ck_assert_int_eq(weights, 14); /* f32, f16, bf16, q8_0, q4_0 ... q6_k, mxfp4: the loop saw them */
    ck_assert_int_eq(caches, 2);  /* f32, f16 */

    ck_assert_int_eq(kernels_check_type((TensorType)9, KERNEL_USE_WEIGHTS, &err), -1);
    ck_assert_str_eq(err.msg, "q8_1 weights: the portable kernels have no dot, dot_q8 or dot_q8k");
    ck_assert_int_eq(kernels_check_type(TENSOR_BF16, KERNEL_USE_KV_CACHE, &err), -1);
    ck_assert_str_eq(err.msg, "bf16 KV cache: the portable kernels have no mix");
    ck_assert_int_eq(kernels_check_type((TensorType)TENSOR_TYPE_COUNT, KERNEL_USE_WEIGHTS, &err), -1);
    ck_assert_msg(strstr(err.msg, "the portable kernels have no row"), "%s", err.msg);
}
END_TEST

/* ---- KV cache bookkeeping -------------------------------------------------------- */

/* kv_cache_append puts a chunk's tokens and positions in the next cells,
 * once; kv_cache_store puts one layer's f32 rows in them, rounded to the
 * cache's type, and kv_cache_load_keys reads keys back.  The reference is
 * base's scalar f16 rounding (fp32_to_fp16), not the kernels', on every
 * path; an f32 cache keeps the bits.  Controls: the f16 rows do differ
 * from the f32 ones (the rounding happened), and the two layers' cells
 * differ (the comparison sees where rows went). */
START_TEST(kv_cache_append_store_load) {
    enum { LAYERS = 2, DIM = 40, HEAD = 20, CELLS = 9, USED = 5 }; /* 20: both SIMD widths leave a tail */
    for (int p = 0; p < n_paths; p++) {
        kernels_use(paths[p]);
        for (int f16 = 0; f16 < 2; f16++) {
            const char *type = f16 ? "f16" : "f32";
            KVCache kv;
            PosencError err;
            ck_assert_int_eq(kv_cache_build(&kv, LAYERS, DIM, HEAD, CELLS, f16 ? TENSOR_F16 : TENSOR_F32, &err), 0);
            int a[] = {5, 6, 7}, b[] = {9, 10};
            ck_assert_int_eq(kv_cache_append(&kv, a, 3, 100), 0);
            ck_assert_int_eq(kv_cache_append(&kv, b, 2, 7), 3);
            ck_assert_int_eq(kv.n_used, USED);
            static const int POS[USED] = {100, 101, 102, 7, 8}, TOK[USED] = {5, 6, 7, 9, 10};
            for (int c = 0; c < USED; c++) {
                ck_assert_int_eq(kv.pos[c], POS[c]);
                ck_assert_int_eq(kv.token[c], TOK[c]);
            }

            float *k[LAYERS], *v[LAYERS], got[USED * DIM], want[USED * DIM];
            for (int l = 0; l < LAYERS; l++) {
                k[l] = random_floats(USED * DIM);
                v[l] = random_floats(USED * DIM);
                kv_cache_store(&kv, l, 0, 3, k[l], v[l]); /* chunk by chunk, as the forward pass */
                kv_cache_store(&kv, l, 3, 2, k[l] + 3 * DIM, v[l] + 3 * DIM);
            }
            int rounded = 0;
            for (int l = 0; l < LAYERS; l++) {
                for (int i = 0; i < USED * DIM; i++)
                    want[i] = f16 ? fp16_to_fp32(fp32_to_fp16(k[l][i])) : k[l][i];
                kv_cache_load_keys(&kv, l, 0, USED, got);
                ck_assert_msg(memcmp(got, want, sizeof got) == 0, "%s %s layer %d keys", paths[p], type, l);
                for (int i = 0; i < USED * DIM; i++) {
                    want[i] = f16 ? fp16_to_fp32(fp32_to_fp16(v[l][i])) : v[l][i];
                    rounded += want[i] != v[l][i];
                }
                kv_cache_load_values(&kv, l, 0, USED, got);
                ck_assert_msg(memcmp(got, want, sizeof got) == 0, "%s %s layer %d values", paths[p], type, l);
            }
            ck_assert_msg(f16 ? rounded > 0 : rounded == 0, "%s: %d values rounded", type, rounded);
            kv_cache_load_keys(&kv, 0, 0, USED, got);
            kv_cache_load_keys(&kv, 1, 0, USED, want);
            ck_assert_msg(memcmp(got, want, sizeof got) != 0, "control: the layers' keys are the same");

            /* each head's part of a row lies in that head's cells, which
             * attention reads as (cells, HEAD) */
            for (int h = 0; h < DIM / HEAD; h++) {
                float cell[HEAD];
                const char *heads = kv_cache_head_keys(&kv, 1, h);
                tensor_dequantize(kv.type, heads + tensor_row_bytes(kv.type, HEAD) * 3, cell, HEAD);
                for (int i = 0; i < HEAD; i++)
                    ck_assert_msg(cell[i] == (f16 ? fp16_to_fp32(fp32_to_fp16(k[1][3 * DIM + h * HEAD + i]))
                                                  : k[1][3 * DIM + h * HEAD + i]),
                                  "%s: head %d of cell 3, element %d", type, h, i);
            }

            /* keys only (v NULL) leaves the values */
            float *k2 = random_floats(DIM);
            kv_cache_load_values(&kv, 1, 4, 1, want);
            kv_cache_store(&kv, 1, 4, 1, k2, NULL);
            kv_cache_load_values(&kv, 1, 4, 1, got);
            ck_assert_msg(memcmp(got, want, DIM * sizeof(float)) == 0, "%s: a keys-only store moved values",
                          type);
            kv_cache_load_keys(&kv, 1, 4, 1, got);
            for (int i = 0; i < DIM; i++)
                ck_assert(got[i] == (f16 ? fp16_to_fp32(fp32_to_fp16(k2[i])) : k2[i]));
            free(k2);
            for (int l = 0; l < LAYERS; l++) {
                free(k[l]);
                free(v[l]);
            }
            kv_cache_free(&kv);
        }
    }
    kernels_use("portable");
}
END_TEST

/* ---- the f16 KV cache, on stories260K ---------------------------------------
 * Keys and values rounded to f16 (relative error <= 2^-11 = 4.9e-4 each)
 * move every attention score by ~4.9e-4 of sum|q_i k_i|, which the softmax
 * turns into weight changes of that order times the score range; through 5
 * layers of width 64 the logits move by 0.006 (sinusoidal) .. 0.037 (alibi)
 * over the sequence below (printed).  KV_F16_TOL = 0.15 is 4x the largest,
 * while stale keys after a shift move the logits by 1.4 and a wrong
 * position by 4.7 (test_cache_offsets).  KV_F16_MIN = 1e-3, a sixth of the
 * smallest, is the least they must move for attention to have read the
 * rounded rows (a cache that kept f32 rows moves them by 0). */
#define KV_F16_TOL 0.15f
#define KV_F16_MIN 1e-3f

static const int SEQ[] = {1, 403, 407, 261, 378, 442, 280, 283, 261, 301, 299, 350, 265, 319, 315,
                          276, 288, 404, 266, 300, 270, 391, 347, 263};
#define SEQ_N ((int)(sizeof SEQ / sizeof SEQ[0]))
static Model stories;
static int have_stories;

static void stories_setup(void) {
    const char *dir = tests_models_dir("f16 KV cache tests on stories260K");
    if (!dir) return;
    PosencError err;
    ck_assert_msg(model_load(&stories, tests_model_path(dir, "stories260K/stories260K.bin"), &err) == 0,
                  "%s", err.msg);
    have_stories = 1;
}

static void stories_teardown(void) {
    if (have_stories) model_free(&stories);
    have_stories = 0;
}

/* Logits of every position of SEQ, as one prefill or token by token. */
static float *seq_logits(TensorType kv, PeKind kind, int one_by_one) {
    Context ctx;
    PosencError err;
    PeParams p = stories.pe;
    p.kind = kind;
    ck_assert_msg(context_build_kv(&ctx, &stories, &p, 64, 64, kv, &err) == 0, "%s", err.msg);
    float *out = malloc((size_t)SEQ_N * 512 * sizeof(float));
    if (one_by_one)
        for (int t = 0; t < SEQ_N; t++)
            memcpy(out + (size_t)t * 512, context_forward(&ctx, SEQ + t, 1, t, 0), 512 * sizeof(float));
    else
        memcpy(out, context_forward(&ctx, SEQ, SEQ_N, 0, 1), (size_t)SEQ_N * 512 * sizeof(float));
    context_free(&ctx);
    return out;
}

/* The logits with the f16 cache are within KV_F16_TOL of the f32 cache's
 * and at least KV_F16_MIN from them, for each positional scheme, and the
 * same bits decoded token by token as prefilled.  Control: the f16 logits
 * of the next position are outside KV_F16_TOL of the f32 ones (a logit of
 * the wrong position fails). */
START_TEST(kv_f16_close_to_f32) {
    if (!have_stories) return;
    static const PeKind KINDS[] = {PE_ROPE, PE_ALIBI, PE_SINUSOIDAL, PE_NONE};
    for (int i = 0; i < 4; i++) {
        const char *kind = pe_kind_name(KINDS[i]);
        float *a = seq_logits(TENSOR_F32, KINDS[i], 0), *b = seq_logits(TENSOR_F16, KINDS[i], 0);
        float *c = seq_logits(TENSOR_F16, KINDS[i], 1);
        float d = tests_max_abs_diff(a, b, (size_t)SEQ_N * 512);
        float next = tests_max_abs_diff(a, b + 512, (size_t)(SEQ_N - 1) * 512);
        fprintf(stderr, "kv f16 vs f32, %s: max |logit diff| %g, against the next position %g\n", kind, (double)d,
                (double)next);
        ck_assert_msg(d <= KV_F16_TOL, "%s: %g", kind, (double)d);
        ck_assert_msg(d >= KV_F16_MIN, "%s: the f16 cache moved the logits by only %g: is it used?", kind, (double)d);
        ck_assert_msg(next > KV_F16_TOL, "control, %s: the next position's logits within %g", kind, (double)next);
        /* decode equals prefill with the f16 cache too */
        ck_assert_msg(memcmp(b, c, (size_t)SEQ_N * 512 * sizeof(float)) == 0, "%s: f16 decode != prefill", kind);
        free(a);
        free(b);
        free(c);
    }
}
END_TEST

/* A context shift re-rotates cached rope keys: after it, decoding the next
 * token must match a fresh computation of the kept tokens at their new
 * positions, for both cache types (f16 within KV_F16_TOL: its keys are
 * rounded once more by the re-rotation), and differ from it by far more
 * without the re-rotation. */
START_TEST(kv_shift_rerotates_both_types) {
    if (!have_stories) return;
    enum { KEEP = 2, DISCARD = 9 };
    /* Past the first layer, kept tokens' keys depend on the discarded
     * ones, so only one layer can equal a fresh computation. */
    Model one_layer = stories;
    one_layer.config.n_layers = 1;
    for (int f16 = 0; f16 < 2; f16++) {
        TensorType kv = f16 ? TENSOR_F16 : TENSOR_F32;
        float got[2][512];
        for (int mode = 0; mode < 2; mode++) {
            Context ctx;
            PosencError err;
            ck_assert_int_eq(context_build_kv(&ctx, &one_layer, &stories.pe, SEQ_N, SEQ_N, kv, &err), 0);
            context_forward(&ctx, SEQ, SEQ_N, 0, 0);
            ck_assert_int_eq(context_shift(&ctx, KEEP, DISCARD, mode ? CONTEXT_SHIFT_NO_REROTATE : CONTEXT_SHIFT_ON,
                                           &err), 0);
            int tok = 300;
            memcpy(got[mode], context_forward(&ctx, &tok, 1, SEQ_N - DISCARD, 0), sizeof got[mode]);
            context_free(&ctx);
        }
        int kept[SEQ_N];
        int n = 0;
        for (int i = 0; i < SEQ_N; i++)
            if (i < KEEP || i >= KEEP + DISCARD) kept[n++] = SEQ[i];
        kept[n++] = 300;
        Context ctx;
        PosencError err;
        ck_assert_int_eq(context_build_kv(&ctx, &one_layer, &stories.pe, SEQ_N, SEQ_N, TENSOR_F32, &err), 0);
        const float *fresh = context_forward(&ctx, kept, n, 0, 0);
        float d = tests_max_abs_diff(got[0], fresh, 512), stale = tests_max_abs_diff(got[1], fresh, 512);
        fprintf(stderr, "shift, %s cache: re-rotated %g, stale keys %g\n", f16 ? "f16" : "f32", (double)d, (double)stale);
        ck_assert_msg(d <= (f16 ? KV_F16_TOL : 1e-4f), "%s cache: %g after shift", f16 ? "f16" : "f32", (double)d);
        ck_assert_msg(stale > 5 * KV_F16_TOL, "control: stale keys moved logits by only %g", (double)stale);
        context_free(&ctx);
    }
}
END_TEST

/* Adds `test` to tc where this build and CPU have one of the kernels in
 * `needs` (bits 1 << HAS_*), the ones it is there to check; else appends
 * its name to not_run for the summary line. */
static void add_test_needing(TCase *tc, const TTest *test, unsigned needs, char *not_run, size_t size) {
    for (int i = 0; i < N_KERNELS; i++)
        if ((needs >> i & 1) && has[i]) {
            tcase_add_test(tc, test);
            return;
        }
    size_t len = strlen(not_run);
    snprintf(not_run + len, size - len, " %s", test->name);
}

int main(void) {
    find_kernels();
    char present[128] = "", absent[sizeof present] = "", not_run[256] = "";
    for (int i = 0; i < N_KERNELS; i++) {
        char *list = has[i] ? present : absent;
        size_t len = strlen(list);
        snprintf(list + len, sizeof present - len, " %s", KERNEL_NAMES[i]);
    }
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("paths");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, paths_are_named);
    tcase_add_test(tc, dot_rows_within_bound);
    tcase_add_test(tc, dot_rows_independent_of_tiling);
    tcase_add_test(tc, matmul_paths_threads_and_chunks);
    add_test_needing(tc, quant_decode_matches_portable, 1u << HAS_AVX2 | 1u << HAS_AVX512, not_run, sizeof not_run);
    tcase_add_test(tc, packed_decode_matches_rows);
    tcase_add_test(tc, packed_rows_views);
    add_test_needing(tc, packed_float_decode_equals_prefill, 1u << HAS_AVX512, not_run, sizeof not_run);
    add_test_needing(tc, bf16_prefill_chunks, 1u << HAS_BF16_PAIRS | 1u << HAS_AMX_BF16, not_run, sizeof not_run);
    tcase_add_test(tc, matmul_many_equals_one_by_one);
    tcase_add_test(tc, quant_prefill_matches_portable);
    add_test_needing(tc, amx_int8_prefill_equals_vnni, 1u << HAS_AMX_INT8, not_run, sizeof not_run);
    tcase_add_test(tc, mix_rows_within_bound);
    tcase_add_test(tc, conversions_exact);
    tcase_add_test(tc, q8k_activations_match_portable);
    add_test_needing(tc, activations_match_portable, 1u << HAS_AVX2 | 1u << HAS_AVX512, not_run, sizeof not_run);
    tcase_add_test(tc, softmax_masked_cells_exact);
    tcase_add_test(tc, sum_exp_within_bound);
    tcase_add_test(tc, exp_sum_within_bound);
    tcase_add_test(tc, dispatch_covers_every_loaded_type);
    tcase_add_test(tc, kv_cache_append_store_load);
    suite_add_tcase(s, tc);
    TCase *kv = tcase_create("kv_cache");
    tcase_set_timeout(kv, 600); /* the portable path on a busy machine takes seconds */
    tcase_add_unchecked_fixture(kv, stories_setup, stories_teardown);
    tcase_add_test(kv, kv_f16_close_to_f32);
    tcase_add_test(kv, kv_shift_rerotates_both_types);
    suite_add_tcase(s, kv);
    /* once, before the tests fork (a buffered line would be printed again
     * by every child) */
    printf("test_kernels paths:%s (absent:%s%s%s)\n", present, *absent ? absent : " none",
           *not_run ? "; not run:" : "", not_run);
    fflush(stdout);
    return tests_run_suite(s);
}
