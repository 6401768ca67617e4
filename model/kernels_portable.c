/* Portable C path: the reference the SIMD paths are tested against, and
 * what `make PORTABLE=1` runs.  Dot products keep 8 lane-strided partial
 * sums (element i goes to lane i % 8, which lets compilers vectorize
 * without reassociating) and reduce them with the AVX2 path's tree. */
#include <math.h>
#include <string.h>

#include "model/kernels_impl.h"
#include "base/util.h"

#define LANES 8

static float reduce_lanes(const float *s) {
    float a0 = (s[0] + s[4]) + (s[2] + s[6]), a1 = (s[1] + s[5]) + (s[3] + s[7]);
    return a0 + a1;
}

static inline float weight(const void *w, size_t i, TensorType type) {
    if (type == TENSOR_F16) return fp16_to_fp32(((const uint16_t *)w)[i]);
    if (type == TENSOR_BF16) return bf16_to_fp32(((const uint16_t *)w)[i]);
    return ((const float *)w)[i];
}

static float dot(const float *x, const void *w, int k, TensorType type) {
    float s[LANES] = {0};
    int i = 0;
    for (; i + LANES <= k; i += LANES)
        for (int l = 0; l < LANES; l++) s[l] += x[i + l] * weight(w, (size_t)(i + l), type);
    for (int l = 0; i + l < k; l++) s[l] += x[i + l] * weight(w, (size_t)(i + l), type);
    return reduce_lanes(s);
}

static void dot_any(float *out, size_t ldo, const float *x, size_t ldx, const void *w, size_t ldw,
                    int n, int m, int k, TensorType type) {
    size_t wrow = tensor_row_bytes(type, ldw);
    for (int r = 0; r < m; r++)
        for (int t = 0; t < n; t++)
            out[(size_t)t * ldo + r] = dot(x + (size_t)t * ldx, (const char *)w + r * wrow, k, type);
}

static void mix_any(float *out, size_t ldo, const float *p, size_t ldp, const void *v, size_t ldv,
                    int n, int cells, int hs, TensorType type) {
    size_t vrow = tensor_row_bytes(type, ldv);
    for (int t = 0; t < n; t++) {
        float *o = out + (size_t)t * ldo;
        memset(o, 0, (size_t)hs * sizeof(float));
        for (int c = 0; c < cells; c++) {
            float a = p[(size_t)t * ldp + c];
            const char *vc = (const char *)v + c * vrow;
            for (int i = 0; i < hs; i++) o[i] += a * weight(vc, (size_t)i, type);
        }
    }
}

/* The table's row functions (kernels_impl.h). */
KERNEL_DOT_ROWS(dot_f32, TENSOR_F32)
KERNEL_DOT_ROWS(dot_f16, TENSOR_F16)
KERNEL_DOT_ROWS(dot_bf16, TENSOR_BF16)
KERNEL_MIX_ROWS(mix_f32, TENSOR_F32)
KERNEL_MIX_ROWS(mix_f16, TENSOR_F16)

static void quantize_q8(int8_t *q, float *d, const float *x, int k) {
    for (int b = 0; b < k / 32; b++, x += 32, q += 32) {
        float m = 0.0f;
        for (int i = 0; i < 32; i++) m = fmaxf(m, fabsf(x[i]));
        d[b] = m / 127.0f;
        float id = m > 0.0f ? 127.0f / m : 0.0f;
        for (int i = 0; i < 32; i++) q[i] = (int8_t)lrintf(x[i] * id);
    }
}

static void dot_q8_0(float *out, const int8_t *xq, const float *xd, const void *w, size_t row_bytes,
                     int m, int k) {
    for (int r = 0; r < m; r++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)r * row_bytes;
        stream_prefetch(blk, row_bytes);
        float s = 0.0f;
        for (int b = 0; b < k / 32; b++, blk += 34) {
            uint16_t h;
            memcpy(&h, blk, 2);
            /* The block's integer dot product, summed in float: every partial
             * sum is an integer below 2^24, so this is exact.  (An int32 sum
             * of int8 products is miscompiled by GCC 12 at -O3 with AVX-512
             * VNNI, which vectorizes it as an unsigned-by-signed product.) */
            float acc = 0.0f;
            for (int i = 0; i < 32; i++) acc += (float)(int8_t)blk[2 + i] * (float)xq[32 * b + i];
            s += acc * (fp16_to_fp32(h) * xd[b]);
        }
        out[r] = s;
    }
}

/* The block-quantized types (kernels_quant.h): integer dot products of
 * sub-blocks, summed in float as dot_q8_0 does (exact, for GCC 12's sake),
 * then scaled in int32. */
static inline int32_t quant_idot(const int8_t *q, const int8_t *x, const int32_t *scale, int n_sub,
                                 int sub) {
    int32_t dot = 0;
    for (int s = 0; s < n_sub; s++, q += sub, x += sub) {
        float acc = 0.0f;
        for (int i = 0; i < sub; i++) acc += (float)q[i] * (float)x[i];
        dot += scale[s] * (int32_t)acc;
    }
    return dot;
}
#define QUANT_PACKED_Q4_0 pack_dot_q4_0 /* the reference kernels (kernels_pack.c) */
#define QUANT_PACKED_MXFP4 pack_dot_mxfp4
#define QUANT_PACKED_Q4_K pack_dot_q4_k
#define QUANT_PACKED_Q5_K pack_dot_q5_k
#define QUANT_PACKED_Q6_K pack_dot_q6_k
#include "model/kernels_quant.h"

/* Prefill's integer product (kernels_impl.h), one output at a time: each
 * half block's sum of u * x in float (exact, as dot_q8_0), less off times
 * the activations' sum, scaled and added block by block. */
static void gemm_q8(float *out, size_t ldo, const QuantUnit *w, int rows, const QuantActs *x, int t0,
                    int t1) {
    int k = x->k, halves = w->split ? 2 : 1;
    for (int t = t0; t < t1; t++) {
        const int8_t *xq = x->q + (size_t)t * k;
        const float *xd = x->d + (size_t)t * (k / 32);
        const int32_t *xs = x->sum + (size_t)t * (k / 16);
        for (int r = 0; r < rows; r++) {
            int g = r / 16, lane = r % 16;
            float acc = 0.0f;
            for (int b = 0; b < w->nb; b++) {
                const uint8_t *wq = w->q + (size_t)(b * 2 + g) * 512 + lane * 4;
                float half[2] = {0.0f, 0.0f};
                for (int s = 0; s < 8; s++)
                    for (int j = 0; j < 4; j++) half[s / 4] += (float)wq[64 * s + j] * (float)xq[32 * b + 4 * s + j];
                for (int h = 0; h < halves; h++) {
                    int32_t sum = w->split ? xs[2 * b + h] : xs[2 * b] + xs[2 * b + 1];
                    int32_t dot = (int32_t)(w->split ? half[h] : half[0] + half[1]) - w->off * sum;
                    size_t at = ((size_t)(b * 2 + g) * 2 + h) * 16 + lane;
                    acc += (float)dot * (w->d[at] * xd[b]);
                    if (w->has_min) acc += w->m[at] * (xd[b] * (float)sum);
                }
            }
            out[(size_t)t * ldo + r] = acc;
        }
    }
}

/* Conversions are base's reference ones. */
static void to_f32_any(float *dst, const void *src, size_t n, TensorType type) {
    tensor_dequantize(type, src, dst, n);
}
KERNEL_TO_F32(f16_to_f32, TENSOR_F16)
KERNEL_TO_F32(bf16_to_f32, TENSOR_BF16)
KERNEL_TO_F32(q8_0_to_f32, TENSOR_Q8_0)

static void to_f16(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = fp32_to_fp16(src[i]);
}

static float max_of(const float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static float exp_sum(float *x, int n, float max) {
    float s[LANES] = {0};
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        s[i % LANES] += x[i];
    }
    return reduce_lanes(s);
}

static void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    float sum = exp_sum(x, n, max);
    for (int i = 0; i < n; i++) x[i] /= sum;
}

static float sum_exp(const float *x, int n, float *max) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    *max = m;
    if (m == INFINITY || m == -INFINITY) return m == INFINITY ? 1.0f : 0.0f;
    float s[LANES] = {0};
    for (int i = 0; i < n; i++) s[i % LANES] += expf(x[i] - m);
    return reduce_lanes(s);
}

static void swiglu(float *h, const float *g, int n) {
    for (int i = 0; i < n; i++) {
        float v = h[i];
        v *= 1.0f / (1.0f + expf(-v));
        h[i] = v * g[i];
    }
}

static void gelu(float *h, int n) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int i = 0; i < n; i++) {
        float v = h[i];
        h[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
    }
}

/* ---- the FMA peak (KernelPath.fma_peak) ------------------------------------ */

/* Scalar multiply-adds on 8 independent chains: this path's own peak. */
static double fma_peak(long rounds) {
    float a[8];
    for (int i = 0; i < 8; i++) a[i] = 1.0f + (float)i;
    for (long r = 0; r < rounds; r++)
        for (int i = 0; i < 8; i++) a[i] = fmaf(a[i], 0.999999f, 1e-7f);
    volatile float sink = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
    (void)sink;
    return 2.0 * 8 * (double)rounds;
}

const KernelPath kernels_portable = {
    .name = "portable",
    .type = {
        [TENSOR_F32] = {.dot = dot_f32, .mix = mix_f32, .to_f32 = kernel_copy_f32},
        [TENSOR_F16] = {.dot = dot_f16, .mix = mix_f16, .to_f32 = f16_to_f32},
        [TENSOR_BF16] = {.dot = dot_bf16, .to_f32 = bf16_to_f32},
        [TENSOR_Q8_0] = {.dot_q8 = dot_q8_0, .dot_packed = pack_dot_q8_0, .to_f32 = q8_0_to_f32},
        KERNEL_QUANT_TYPES,
    },
    .gemm_q8 = gemm_q8, .quantize_q8 = quantize_q8, .quantize_q8k = quant_quantize_q8k, .to_f16 = to_f16, .softmax = softmax,
    .sum_exp = sum_exp, .exp_sum = exp_sum, .max_of = max_of, .swiglu = swiglu, .gelu = gelu, .fma_peak = fma_peak,
};
