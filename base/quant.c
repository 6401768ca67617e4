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

/* The _0/_1 blocks: weight j's 4 low bits are a nibble of qs[j % 16]; the
 * 5-bit types add bit j of qh as bit 4. */
static int nibble(const uint8_t *qs, int j) { return j < QK / 2 ? qs[j] & 0xF : qs[j - QK / 2] >> 4; }
static int bit5(const uint8_t *qh, int j) { return (qh[j / 8] >> (j % 8) & 1) << 4; }

void dequantize_row_q4_0(const void *src, float *dst, size_t n) {
    const BlockQ4_0 *b = src;
    for (size_t i = 0; i < n / QK; i++, b++, dst += QK) {
        float d = quant_half(b->d);
        for (int j = 0; j < QK; j++) dst[j] = (float)(nibble(b->qs, j) - 8) * d;
    }
}

void dequantize_row_q4_1(const void *src, float *dst, size_t n) {
    const BlockQ4_1 *b = src;
    for (size_t i = 0; i < n / QK; i++, b++, dst += QK) {
        float d = quant_half(b->d), m = quant_half(b->m);
        for (int j = 0; j < QK; j++) dst[j] = (float)nibble(b->qs, j) * d + m;
    }
}

void dequantize_row_q5_0(const void *src, float *dst, size_t n) {
    const BlockQ5_0 *b = src;
    for (size_t i = 0; i < n / QK; i++, b++, dst += QK) {
        float d = quant_half(b->d);
        for (int j = 0; j < QK; j++) dst[j] = (float)((nibble(b->qs, j) | bit5(b->qh, j)) - 16) * d;
    }
}

void dequantize_row_q5_1(const void *src, float *dst, size_t n) {
    const BlockQ5_1 *b = src;
    for (size_t i = 0; i < n / QK; i++, b++, dst += QK) {
        float d = quant_half(b->d), m = quant_half(b->m);
        for (int j = 0; j < QK; j++) dst[j] = (float)(nibble(b->qs, j) | bit5(b->qh, j)) * d + m;
    }
}

/* Q2_K, Q3_K, Q6_K: weight w of a super-block lies in half h = w / 128,
 * group g = w % 128 / 32 of it, at l = w % 32; its bits are in byte l of
 * the half's 32-byte slices, at the group's bit position. */
void dequantize_row_q2_k(const void *src, float *dst, size_t n) {
    const BlockQ2_K *b = src;
    for (size_t i = 0; i < n / QK_K; i++, b++, dst += QK_K) {
        float d = quant_half(b->d), dmin = quant_half(b->dmin);
        for (int w = 0; w < QK_K; w++) {
            int h = w / 128, g = w % 128 / 32, l = w % 32;
            uint8_t sm = b->scales[w / 16];
            float dl = d * (float)(sm & 0xF), ml = dmin * (float)(sm >> 4);
            dst[w] = dl * (float)(b->qs[32 * h + l] >> (2 * g) & 3) - ml;
        }
    }
}

void dequantize_row_q3_k(const void *src, float *dst, size_t n) {
    const BlockQ3_K *b = src;
    for (size_t i = 0; i < n / QK_K; i++, b++, dst += QK_K) {
        float d = quant_half(b->d);
        int8_t sc[16];
        quant_scales_q3_k(b->scales, sc);
        for (int w = 0; w < QK_K; w++) {
            int h = w / 128, g = w % 128 / 32, l = w % 32;
            float dl = d * (float)(sc[w / 16] - 32);
            int q = (b->qs[32 * h + l] >> (2 * g) & 3) - (b->hmask[l] >> (4 * h + g) & 1 ? 0 : 4);
            dst[w] = dl * (float)q;
        }
    }
}

/* Q4_K, Q5_K: each 64 weights share 32 bytes of qs, the first 32 weights
 * in the low nibbles, the next 32 in the high ones; sub-block s = w / 32
 * takes bit s of qh[w % 32] as the fifth bit. */
void dequantize_row_q4_k(const void *src, float *dst, size_t n) {
    const BlockQ4_K *b = src;
    for (size_t i = 0; i < n / QK_K; i++, b++, dst += QK_K) {
        float d = quant_half(b->d), dmin = quant_half(b->dmin);
        for (int s = 0; s < QK_K / 32; s++) {
            uint8_t sc, mn;
            quant_scale_min_k4(b->scales, s, &sc, &mn);
            float ds = d * (float)sc, ms = dmin * (float)mn;
            const uint8_t *qs = b->qs + 32 * (s / 2);
            for (int l = 0; l < 32; l++)
                dst[32 * s + l] = ds * (float)(s % 2 ? qs[l] >> 4 : qs[l] & 0xF) - ms;
        }
    }
}

void dequantize_row_q5_k(const void *src, float *dst, size_t n) {
    const BlockQ5_K *b = src;
    for (size_t i = 0; i < n / QK_K; i++, b++, dst += QK_K) {
        float d = quant_half(b->d), dmin = quant_half(b->dmin);
        for (int s = 0; s < QK_K / 32; s++) {
            uint8_t sc, mn;
            quant_scale_min_k4(b->scales, s, &sc, &mn);
            float ds = d * (float)sc, ms = dmin * (float)mn;
            const uint8_t *qs = b->qs + 32 * (s / 2);
            for (int l = 0; l < 32; l++) {
                int q = (s % 2 ? qs[l] >> 4 : qs[l] & 0xF) | (b->qh[l] >> s & 1) << 4;
                dst[32 * s + l] = ds * (float)q - ms;
            }
        }
    }
}

void dequantize_row_q6_k(const void *src, float *dst, size_t n) {
    const BlockQ6_K *b = src;
    for (size_t i = 0; i < n / QK_K; i++, b++, dst += QK_K) {
        float d = quant_half(b->d);
        for (int w = 0; w < QK_K; w++) {
            int h = w / 128, g = w % 128 / 32, l = w % 32;
            /* groups 0, 1 take the low nibbles of ql's two 32-byte slices,
             * groups 2, 3 the high ones */
            uint8_t lo = b->ql[64 * h + 32 * (g % 2) + l];
            int q = ((g < 2 ? lo & 0xF : lo >> 4) | (b->qh[32 * h + l] >> (2 * g) & 3) << 4) - 32;
            dst[w] = d * (float)b->scales[w / 16] * (float)q;
        }
    }
}
