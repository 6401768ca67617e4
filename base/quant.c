#include "base/quant.h"

#include <string.h>

#include "base/util.h"

_Static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
               sizeof(BlockQ5_1) == 24 && sizeof(BlockMXFP4) == 17, "ggml's block sizes");
_Static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
               sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210, "ggml's super-block sizes");

float quant_half(const uint8_t *p) { return fp16_to_fp32((uint16_t)(p[0] | p[1] << 8)); }

void quant_scales_q3_k(const uint8_t *packed, int8_t out[16]) {
    for (int j = 0; j < 16; j++) {
        int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
        int high = packed[8 + j % 4] >> (2 * (j / 4)) & 3;
        out[j] = (int8_t)(low | high << 4);
    }
}

/* ---- dequantization ------------------------------------------------------------ */

/* ggml computes q*d for the _0 types and q*d + m for the _1 ones (adding a
 * zero m would turn -0 into +0), and (d*sc)*q - dmin*mn for the K-quants
 * (those without mins compute (d*sc)*q, which equals it minus +0 bit for
 * bit). */
#define DEQUANTIZE_32(type, BLOCK, HAS_M)                                                         \
    void dequantize_row_##type(const void *src, float *dst, size_t n) {                          \
        const BLOCK *b = src;                                                                    \
        QuantBlock u;                                                                            \
        for (size_t i = 0; i < n / QK; i++, dst += QK) {                                         \
            quant_unpack_##type(b + i, &u);                                                      \
            for (int j = 0; j < QK; j++)                                                         \
                dst[j] = HAS_M ? (float)u.q[j] * u.d + u.m : (float)u.q[j] * u.d;                \
        }                                                                                        \
    }
DEQUANTIZE_32(q4_0, BlockQ4_0, 0)
DEQUANTIZE_32(q4_1, BlockQ4_1, 1)
DEQUANTIZE_32(q5_0, BlockQ5_0, 0)
DEQUANTIZE_32(q5_1, BlockQ5_1, 1)
/* MXFP4 too is q * d, d its half scale: exact (q has two significant bits
 * and d is a power of two no less than 2^-128) unless it overflows to
 * infinity at large e, as ggml's does. */
DEQUANTIZE_32(mxfp4, BlockMXFP4, 0)

#define DEQUANTIZE_K(type, BLOCK)                                                                 \
    void dequantize_row_##type(const void *src, float *dst, size_t n) {                          \
        const BLOCK *b = src;                                                                    \
        QuantSuperBlock u;                                                                       \
        for (size_t i = 0; i < n / QK_K; i++, dst += QK_K) {                                     \
            quant_unpack_##type(b + i, &u);                                                      \
            for (int w = 0; w < QK_K; w++) {                                                     \
                int s = w / u.sub;                                                               \
                dst[w] = u.d * (float)u.sc[s] * (float)u.q[w] - u.dmin * (float)u.mn[s];         \
            }                                                                                    \
        }                                                                                        \
    }
DEQUANTIZE_K(q2_k, BlockQ2_K)
DEQUANTIZE_K(q3_k, BlockQ3_K)
DEQUANTIZE_K(q4_k, BlockQ4_K)
DEQUANTIZE_K(q5_k, BlockQ5_K)
DEQUANTIZE_K(q6_k, BlockQ6_K)
