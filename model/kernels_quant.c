/* Decode's dot products on ggml's block-quantized weights (base/quant.h),
 * in integers, without dequantizing rows: the 32-weight block types
 * against Q8 blocks of 32 activations (the path's quantize_q8), the
 * K-quants against Q8_K super-blocks (quantize_q8k below: 256 int8 with
 * one f32 scale and int16 sums of each 16).  Every path's table holds
 * these functions; within a block or sub-block they sum exact integers
 * (float sums of integers below 2^24 are exact too), so a path differs
 * from another only in the few float operations per block.
 *
 * A row's result is sum over blocks of d_w * d_x * (integer dot)
 * [- dmin_w * d_x * (integer sum of mins times activation sums)].
 * Integer dots of int8 products are summed in float, as the Q8_0 kernel
 * does: an int32 sum of them is miscompiled by GCC 12 at -O3 with
 * AVX-512 VNNI. */
#include <math.h>
#include <string.h>

#include "model/kernels_impl.h"

void quantize_q8k(int8_t *q, float *d, int16_t *sum, const float *x, int k) {
    for (int b = 0; b < k / QK_K; b++, x += QK_K, q += QK_K) {
        float m = 0.0f;
        for (int i = 0; i < QK_K; i++) m = fmaxf(m, fabsf(x[i]));
        d[b] = m / 127.0f;
        float id = m > 0.0f ? 127.0f / m : 0.0f;
        for (int i = 0; i < QK_K; i++) q[i] = (int8_t)lrintf(x[i] * id);
        for (int s = 0; s < QK_K / 16; s++) {
            int acc = 0;
            for (int i = 0; i < 16; i++) acc += q[16 * s + i];
            sum[b * (QK_K / 16) + s] = (int16_t)acc;
        }
    }
}

/* ---- blocks of 32 ------------------------------------------------------------- */

/* One block: d * xd * (q . x), plus m * xd * sum x for the _1 types. */
static inline float block_dot(const QuantBlock *u, const int8_t *xq, float xd) {
    float dot = 0.0f, xsum = 0.0f;
    for (int j = 0; j < QK; j++) {
        dot += (float)u->q[j] * (float)xq[j];
        xsum += (float)xq[j];
    }
    return dot * (u->d * xd) + xsum * (u->m * xd);
}

static inline void dot_q8_blocks(float *out, const int8_t *xq, const float *xd, const void *w,
                                 size_t row_bytes, int m, int k, size_t block_bytes,
                                 void (*unpack)(const void *, QuantBlock *)) {
    QuantBlock u;
    for (int r = 0; r < m; r++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)r * row_bytes;
        float s = 0.0f;
        for (int b = 0; b < k / QK; b++, blk += block_bytes) {
            unpack(blk, &u);
            s += block_dot(&u, xq + QK * b, xd[b]);
        }
        out[r] = s;
    }
}

#define DOT_Q8(type, BLOCK)                                                                       \
    void quant_dot_##type(float *out, const int8_t *xq, const float *xd, const void *w,          \
                          size_t row_bytes, int m, int k) {                                      \
        dot_q8_blocks(out, xq, xd, w, row_bytes, m, k, sizeof(BLOCK), quant_unpack_##type);       \
    }
DOT_Q8(q4_0, BlockQ4_0)
DOT_Q8(q4_1, BlockQ4_1)
DOT_Q8(q5_0, BlockQ5_0)
DOT_Q8(q5_1, BlockQ5_1)

/* ---- K-quants --------------------------------------------------------------------- */

/* One super-block: d * xd * sum_s sc_s (q_s . x_s) - dmin * xd * sum_s mn_s sum x_s,
 * the sums over sub-blocks in int32 (at most 63 * 31 * 127 * 256 in magnitude). */
static float superblock_dot(const QuantSuperBlock *u, const int8_t *xq, const int16_t *xsum, float xd) {
    int32_t dot = 0, mins = 0;
    for (int s = 0; s < QK_K / u->sub; s++) {
        float acc = 0.0f;
        for (int i = 0; i < u->sub; i++) acc += (float)u->q[u->sub * s + i] * (float)xq[u->sub * s + i];
        dot += u->sc[s] * (int32_t)acc;
        int32_t xs = 0;
        for (int i = 0; i < u->sub / 16; i++) xs += xsum[s * (u->sub / 16) + i];
        mins += u->mn[s] * xs;
    }
    return u->d * xd * (float)dot - u->dmin * xd * (float)mins;
}

static inline void dot_q8k_blocks(float *out, const int8_t *xq, const float *xd, const int16_t *xsum,
                                  const void *w, size_t row_bytes, int m, int k, size_t block_bytes,
                                  void (*unpack)(const void *, QuantSuperBlock *)) {
    QuantSuperBlock u;
    for (int r = 0; r < m; r++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)r * row_bytes;
        float s = 0.0f;
        for (int b = 0; b < k / QK_K; b++, blk += block_bytes) {
            unpack(blk, &u);
            s += superblock_dot(&u, xq + QK_K * b, xsum + (QK_K / 16) * b, xd[b]);
        }
        out[r] = s;
    }
}

#define DOT_Q8K(type, BLOCK)                                                                      \
    void quant_dot_##type(float *out, const int8_t *xq, const float *xd, const int16_t *xsum,    \
                          const void *w, size_t row_bytes, int m, int k) {                       \
        dot_q8k_blocks(out, xq, xd, xsum, w, row_bytes, m, k, sizeof(BLOCK), quant_unpack_##type); \
    }
DOT_Q8K(q2_k, BlockQ2_K)
DOT_Q8K(q3_k, BlockQ3_K)
DOT_Q8K(q4_k, BlockQ4_K)
DOT_Q8K(q5_k, BlockQ5_K)
DOT_Q8K(q6_k, BlockQ6_K)

/* ---- conversions for prefill's panels: base's reference dequantizers ---------------- */

#define TO_F32(type) \
    void quant_##type##_to_f32(float *dst, const void *src, size_t n) { dequantize_row_##type(src, dst, n); }
TO_F32(q4_0)
TO_F32(q4_1)
TO_F32(q5_0)
TO_F32(q5_1)
TO_F32(q2_k)
TO_F32(q3_k)
TO_F32(q4_k)
TO_F32(q5_k)
TO_F32(q6_k)
