/* What the paths share for the block-quantized types: activations as Q8_K
 * super-blocks, and the conversions prefill's panels use (base's reference
 * dequantizers, exact).  The dot products are each path's
 * (model/kernels_quant.h). */
#include <math.h>
#include <string.h>

#include "model/kernels_impl.h"

void quant_quantize_q8k(int8_t *q, float *d, int16_t *sum, const float *x, int k) {
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
TO_F32(mxfp4)

/* ---- prefill's units (kernels_impl.h) ------------------------------------------------ */

void quant_unit_kind(QuantUnit *u, TensorType t, int k) {
    u->nb = k / QK;
    /* MXFP4's doubled E2M1 values, -12..12, are u - 12 */
    u->off = t == TENSOR_Q8_0 ? 128 : t == TENSOR_Q4_0 ? 8 : t == TENSOR_Q5_0 ? 16
           : t == TENSOR_Q3_K ? 4 : t == TENSOR_Q6_K ? 32 : t == TENSOR_MXFP4 ? 12 : 0;
    u->has_min = t == TENSOR_Q4_1 || t == TENSOR_Q5_1 || t == TENSOR_Q2_K || t == TENSOR_Q4_K ||
                 t == TENSOR_Q5_K;
    u->split = t == TENSOR_Q2_K || t == TENSOR_Q3_K || t == TENSOR_Q6_K;
    u->centred = 0;
}

void quant_unit_centre(QuantUnit *u) {
    uint8_t off = (uint8_t)u->off, *q = u->q;
    size_t n = (size_t)u->nb * 2 * 8 * 64;
    for (size_t i = 0; i < n; i++) q[i] = (uint8_t)(q[i] - off); /* two's complement of u - off */
    u->centred = 1;
}

/* Block b of unit row r: 32 bytes u, the halves' scales and mins. */
static void unit_put_u(QuantUnit *u, int b, int r, const uint8_t *v, const float d[2], const float m[2]) {
    int g = r / 16, lane = r % 16;
    uint8_t *dst = u->q + (size_t)(b * 2 + g) * 8 * 64 + lane * 4;
    for (int s = 0; s < 8; s++) memcpy(dst + 64 * s, v + 4 * s, 4);
    for (int h = 0; h < 2; h++) {
        size_t at = ((size_t)(b * 2 + g) * 2 + h) * 16 + lane;
        u->d[at] = d[h];
        u->m[at] = m[h];
    }
}

/* The same from 32 centred quants. */
static void unit_put(QuantUnit *u, int b, int r, const int8_t *q, const float d[2], const float m[2]) {
    uint8_t v[QK];
    for (int j = 0; j < QK; j++) v[j] = (uint8_t)(q[j] + u->off);
    unit_put_u(u, b, r, v, d, m);
}

static void unit_row(QuantUnit *u, TensorType t, const uint8_t *row, int r, int k) {
    if (t == TENSOR_Q8_0) {
        for (int b = 0; b < k / QK; b++, row += 2 + QK) {
            float d = quant_half(row), dd[2] = {d, d}, mm[2] = {0.0f, 0.0f};
            unit_put(u, b, r, (const int8_t *)row + 2, dd, mm);
        }
        return;
    }
    /* MXFP4's codes straight to u (quant_mxfp4_u), without quant_unpack_mxfp4's
     * QuantBlock and unit_put's centring pass, which made its fill take 1.9x
     * Q4_0's time per weight (1.4x now) */
    if (t == TENSOR_MXFP4) {
        for (int b = 0; b < k / QK; b++, row += sizeof(BlockMXFP4)) {
            const BlockMXFP4 *blk = (const BlockMXFP4 *)row;
            float d = quant_e8m0_half(blk->e), dd[2] = {d, d}, mm[2] = {0.0f, 0.0f};
            uint8_t v[QK];
            for (int j = 0; j < QK / 2; j++) {
                v[j] = quant_mxfp4_u[blk->qs[j] & 0xF];
                v[j + QK / 2] = quant_mxfp4_u[blk->qs[j] >> 4];
            }
            unit_put_u(u, b, r, v, dd, mm);
        }
        return;
    }
    if (tensor_block_size(t) == QK) {
        QuantBlock qb;
        for (int b = 0; b < k / QK; b++, row += tensor_block_bytes(t)) {
            switch (t) {
            case TENSOR_Q4_0: quant_unpack_q4_0(row, &qb); break;
            case TENSOR_Q4_1: quant_unpack_q4_1(row, &qb); break;
            case TENSOR_Q5_0: quant_unpack_q5_0(row, &qb); break;
            default: quant_unpack_q5_1(row, &qb); break;
            }
            float dd[2] = {qb.d, qb.d}, mm[2] = {qb.m, qb.m};
            unit_put(u, b, r, qb.q, dd, mm);
        }
        return;
    }
    QuantSuperBlock sb;
    for (int s = 0; s < k / QK_K; s++, row += tensor_block_bytes(t)) {
        switch (t) {
        case TENSOR_Q2_K: quant_unpack_q2_k(row, &sb); break;
        case TENSOR_Q3_K: quant_unpack_q3_k(row, &sb); break;
        case TENSOR_Q4_K: quant_unpack_q4_k(row, &sb); break;
        case TENSOR_Q5_K: quant_unpack_q5_k(row, &sb); break;
        default: quant_unpack_q6_k(row, &sb); break;
        }
        for (int j = 0; j < QK_K / QK; j++) {
            /* sub-block of each half: 2j + h of 16, or j of 32 (d * sc and dmin * mn are exact) */
            float dd[2], mm[2];
            for (int h = 0; h < 2; h++) {
                int sub = sb.sub == 16 ? 2 * j + h : j;
                dd[h] = sb.d * (float)sb.sc[sub];
                mm[h] = -(sb.dmin * (float)sb.mn[sub]);
            }
            unit_put(u, s * (QK_K / QK) + j, r, sb.q + QK * j, dd, mm);
        }
    }
}

void quant_unit_fill(QuantUnit *u, TensorType t, const void *rows, size_t row_bytes, int n_rows, int k) {
    quant_unit_kind(u, t, k);
    static const int8_t zero[QK];
    static const float none[2];
    for (int r = 0; r < UNIT_ROWS; r++) {
        if (r < n_rows)
            unit_row(u, t, (const uint8_t *)rows + (size_t)r * row_bytes, r, k);
        else
            for (int b = 0; b < u->nb; b++) unit_put(u, b, r, zero, none, none);
    }
}

/* Inlined with each width the callers use, so that the inner loop's
 * length is a constant and it vectorizes (with width a variable GCC
 * leaves it scalar). */
static inline __attribute__((always_inline)) void sums_of(int32_t *sum, const int8_t *q, int k, int width) {
    for (int s = 0; s < k / width; s++, q += width) {
        int32_t acc = 0;
        for (int i = 0; i < width; i++) acc += q[i];
        sum[s] = acc;
    }
}

void quant_sums(int32_t *sum, const int8_t *q, int k, int width) {
    if (width == 16) sums_of(sum, q, k, 16);
    else if (width == QK) sums_of(sum, q, k, QK);
    else sums_of(sum, q, k, width);
}
