#include "base/quant.h"

#include <string.h>

#include "base/util.h"

_Static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
               sizeof(BlockQ5_1) == 24, "ggml's block sizes");
_Static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
               sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210, "ggml's super-block sizes");

float quant_half(const uint8_t *p) { return fp16_to_fp32((uint16_t)(p[0] | p[1] << 8)); }

void quant_scale_min_k4(const uint8_t *scales, int j, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = scales[j] & 63;
        *mn = scales[j + 4] & 63;
    } else {
        *sc = (uint8_t)((scales[j + 4] & 0xF) | (scales[j - 4] >> 6) << 4);
        *mn = (uint8_t)((scales[j + 4] >> 4) | (scales[j] >> 6) << 4);
    }
}

void quant_scales_q3_k(const uint8_t *packed, int8_t out[16]) {
    for (int j = 0; j < 16; j++) {
        int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
        int high = packed[8 + j % 4] >> (2 * (j / 4)) & 3;
        out[j] = (int8_t)(low | high << 4);
    }
}

/* The blocks of 32: weight j's 4 low bits are a nibble of qs[j % 16]; the
 * 5-bit types add bit j of qh as bit 4. */
static int nibble(const uint8_t *qs, int j) { return j < QK / 2 ? qs[j] & 0xF : qs[j - QK / 2] >> 4; }
static int bit5(const uint8_t *qh, int j) { return (qh[j / 8] >> (j % 8) & 1) << 4; }

void quant_unpack_q4_0(const void *blk, QuantBlock *u) {
    const BlockQ4_0 *b = blk;
    for (int j = 0; j < QK; j++) u->q[j] = (int8_t)(nibble(b->qs, j) - 8);
    u->d = quant_half(b->d), u->m = 0.0f;
}

void quant_unpack_q4_1(const void *blk, QuantBlock *u) {
    const BlockQ4_1 *b = blk;
    for (int j = 0; j < QK; j++) u->q[j] = (int8_t)nibble(b->qs, j);
    u->d = quant_half(b->d), u->m = quant_half(b->m);
}

void quant_unpack_q5_0(const void *blk, QuantBlock *u) {
    const BlockQ5_0 *b = blk;
    for (int j = 0; j < QK; j++) u->q[j] = (int8_t)((nibble(b->qs, j) | bit5(b->qh, j)) - 16);
    u->d = quant_half(b->d), u->m = 0.0f;
}

void quant_unpack_q5_1(const void *blk, QuantBlock *u) {
    const BlockQ5_1 *b = blk;
    for (int j = 0; j < QK; j++) u->q[j] = (int8_t)(nibble(b->qs, j) | bit5(b->qh, j));
    u->d = quant_half(b->d), u->m = quant_half(b->m);
}

/* Q2_K, Q3_K, Q6_K: weight w of a super-block lies in half h = w / 128,
 * group g = w % 128 / 32 of it, at l = w % 32; its bits are in byte l of
 * the half's 32-byte slices, at the group's bit position. */
void quant_unpack_q2_k(const void *blk, QuantSuperBlock *u) {
    const BlockQ2_K *b = blk;
    for (int w = 0; w < QK_K; w++) u->q[w] = (int8_t)(b->qs[32 * (w / 128) + w % 32] >> (2 * (w % 128 / 32)) & 3);
    for (int s = 0; s < 16; s++) u->sc[s] = (int8_t)(b->scales[s] & 0xF), u->mn[s] = b->scales[s] >> 4;
    u->sub = 16, u->d = quant_half(b->d), u->dmin = quant_half(b->dmin);
}

void quant_unpack_q3_k(const void *blk, QuantSuperBlock *u) {
    const BlockQ3_K *b = blk;
    for (int w = 0; w < QK_K; w++) {
        int h = w / 128, g = w % 128 / 32, l = w % 32;
        u->q[w] = (int8_t)((b->qs[32 * h + l] >> (2 * g) & 3) - (b->hmask[l] >> (4 * h + g) & 1 ? 0 : 4));
    }
    quant_scales_q3_k(b->scales, u->sc);
    for (int s = 0; s < 16; s++) u->sc[s] = (int8_t)(u->sc[s] - 32), u->mn[s] = 0;
    u->sub = 16, u->d = quant_half(b->d), u->dmin = 0.0f;
}

/* Q4_K, Q5_K: each 64 weights share 32 bytes of qs, the first 32 weights
 * in the low nibbles, the next 32 in the high ones; sub-block s = w / 32
 * takes bit s of qh[w % 32] as the fifth bit. */
static void unpack_k4(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, QuantSuperBlock *u) {
    for (int s = 0; s < QK_K / 32; s++) {
        uint8_t sc;
        quant_scale_min_k4(scales, s, &sc, &u->mn[s]);
        u->sc[s] = (int8_t)sc;
        for (int l = 0; l < 32; l++) {
            uint8_t byte = qs[32 * (s / 2) + l];
            int q = s % 2 ? byte >> 4 : byte & 0xF;
            u->q[32 * s + l] = (int8_t)(qh ? q | (qh[l] >> s & 1) << 4 : q);
        }
    }
    u->sub = 32;
}

void quant_unpack_q4_k(const void *blk, QuantSuperBlock *u) {
    const BlockQ4_K *b = blk;
    unpack_k4(b->scales, b->qs, NULL, u);
    u->d = quant_half(b->d), u->dmin = quant_half(b->dmin);
}

void quant_unpack_q5_k(const void *blk, QuantSuperBlock *u) {
    const BlockQ5_K *b = blk;
    unpack_k4(b->scales, b->qs, b->qh, u);
    u->d = quant_half(b->d), u->dmin = quant_half(b->dmin);
}

void quant_unpack_q6_k(const void *blk, QuantSuperBlock *u) {
    const BlockQ6_K *b = blk;
    for (int w = 0; w < QK_K; w++) {
        int h = w / 128, g = w % 128 / 32, l = w % 32;
        /* groups 0, 1 take the low nibbles of ql's two 32-byte slices,
         * groups 2, 3 the high ones */
        uint8_t lo = b->ql[64 * h + 32 * (g % 2) + l];
        u->q[w] = (int8_t)(((g < 2 ? lo & 0xF : lo >> 4) | (b->qh[32 * h + l] >> (2 * g) & 3) << 4) - 32);
    }
    for (int s = 0; s < 16; s++) u->sc[s] = b->scales[s], u->mn[s] = 0;
    u->sub = 16, u->d = quant_half(b->d), u->dmin = 0.0f;
}

/* ---- dequantization ------------------------------------------------------------ */

/* ggml computes q*d for the _0 types and q*d + m for the _1 ones (adding a
 * zero m would turn -0 into +0), and (d*sc)*q - dmin*mn for the K-quants
 * (those without mins compute (d*sc)*q, which equals it minus +0 bit for
 * bit). */
static void dequantize_32(const void *src, float *dst, size_t n, size_t bytes, int has_m,
                          void (*unpack)(const void *, QuantBlock *)) {
    const uint8_t *p = src;
    QuantBlock u;
    for (size_t i = 0; i < n / QK; i++, p += bytes, dst += QK) {
        unpack(p, &u);
        for (int j = 0; j < QK; j++) dst[j] = has_m ? (float)u.q[j] * u.d + u.m : (float)u.q[j] * u.d;
    }
}

static void dequantize_k(const void *src, float *dst, size_t n, size_t bytes,
                         void (*unpack)(const void *, QuantSuperBlock *)) {
    const uint8_t *p = src;
    QuantSuperBlock u;
    for (size_t i = 0; i < n / QK_K; i++, p += bytes, dst += QK_K) {
        unpack(p, &u);
        for (int w = 0; w < QK_K; w++) {
            int s = w / u.sub;
            dst[w] = u.d * (float)u.sc[s] * (float)u.q[w] - u.dmin * (float)u.mn[s];
        }
    }
}

void dequantize_row_q4_0(const void *src, float *dst, size_t n) { dequantize_32(src, dst, n, sizeof(BlockQ4_0), 0, quant_unpack_q4_0); }
void dequantize_row_q4_1(const void *src, float *dst, size_t n) { dequantize_32(src, dst, n, sizeof(BlockQ4_1), 1, quant_unpack_q4_1); }
void dequantize_row_q5_0(const void *src, float *dst, size_t n) { dequantize_32(src, dst, n, sizeof(BlockQ5_0), 0, quant_unpack_q5_0); }
void dequantize_row_q5_1(const void *src, float *dst, size_t n) { dequantize_32(src, dst, n, sizeof(BlockQ5_1), 1, quant_unpack_q5_1); }
void dequantize_row_q2_k(const void *src, float *dst, size_t n) { dequantize_k(src, dst, n, sizeof(BlockQ2_K), quant_unpack_q2_k); }
void dequantize_row_q3_k(const void *src, float *dst, size_t n) { dequantize_k(src, dst, n, sizeof(BlockQ3_K), quant_unpack_q3_k); }
void dequantize_row_q4_k(const void *src, float *dst, size_t n) { dequantize_k(src, dst, n, sizeof(BlockQ4_K), quant_unpack_q4_k); }
void dequantize_row_q5_k(const void *src, float *dst, size_t n) { dequantize_k(src, dst, n, sizeof(BlockQ5_K), quant_unpack_q5_k); }
void dequantize_row_q6_k(const void *src, float *dst, size_t n) { dequantize_k(src, dst, n, sizeof(BlockQ6_K), quant_unpack_q6_k); }
