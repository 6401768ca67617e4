/* ggml's block-quantized tensor types, byte for byte as GGUF stores them,
 * and their reference dequantizers (tests/base/test_quant.c checks them
 * bit for bit against ggml's own on fixture blocks).
 *
 * Every field is bytes (an f16 is two little-endian bytes), so a block has
 * no padding and no alignment: tensors of these types start anywhere in
 * the mapped file, and a row is its blocks end to end.  Within a block,
 * weight j of the block is named x[j]; d, m, dmin are f16 scales.
 *
 * Blocks of 32 (x = d*q, or d*q + m for the _1 types):
 *   Q4_0  q = 4-bit - 8          Q4_1  q = 4-bit, plus m
 *   Q5_0  q = 5-bit - 16         Q5_1  q = 5-bit, plus m
 *   (Q8_0, 8-bit, is tensor.h's own.)
 * K-quants: super-blocks of QK_K = 256 weights in sub-blocks of 16 or 32,
 * each sub-block with its own integer scale (and min) that an f16 super
 * scale d (and dmin) multiplies:
 *   Q2_K  16 x 16, 2-bit q, 4-bit scale and min:  x = d*sc*q - dmin*mn
 *   Q3_K  16 x 16, 3-bit q - 4, 6-bit scale - 32:  x = d*sc*q
 *   Q4_K   8 x 32, 4-bit q, 6-bit scale and min:  x = d*sc*q - dmin*mn
 *   Q5_K   8 x 32, 5-bit q, 6-bit scale and min:  x = d*sc*q - dmin*mn
 *   Q6_K  16 x 16, 6-bit q - 32, int8 scale:      x = d*sc*q
 * MXFP4 (OCP microscaling): blocks of 32 E2M1 values (4-bit floats: sign,
 * 2 exponent bits, 1 mantissa bit) sharing one E8M0 scale (a bare
 * exponent).  ggml keeps the E2M1 values doubled, as the integers
 * q = 0, ±1, ±2, ±3, ±4, ±6, ±8, ±12, and halves the scale instead:
 * x = q * 2^(e - 128). */
#ifndef POSENC_QUANT_H
#define POSENC_QUANT_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define QK 32    /* weights per block of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 */
#define QK_K 256 /* weights per K-quant super-block */

typedef struct {
    uint8_t d[2];
    uint8_t qs[QK / 2]; /* x[j] in the low nibble of qs[j], x[j + 16] in the high, j < 16 */
} BlockQ4_0;

typedef struct {
    uint8_t d[2], m[2];
    uint8_t qs[QK / 2]; /* as Q4_0 */
} BlockQ4_1;

typedef struct {
    uint8_t d[2];
    uint8_t qh[4];      /* bit j of this little-endian uint32: bit 4 of x[j] */
    uint8_t qs[QK / 2]; /* low 4 bits, as Q4_0 */
} BlockQ5_0;

typedef struct {
    uint8_t d[2], m[2];
    uint8_t qh[4];
    uint8_t qs[QK / 2];
} BlockQ5_1;

typedef struct {
    uint8_t e;          /* E8M0: the block's scale is 2^(e - 127) */
    uint8_t qs[QK / 2]; /* E2M1 codes, nibbles as Q4_0's */
} BlockMXFP4;

/* In the K-quants, q bits are spread over the super-block in groups of 32
 * bytes: byte l of a group holds bits of weights l, l + 32, l + 64, ...
 * (see the dequantizers, which are the definition). */
typedef struct {
    uint8_t scales[QK_K / 16]; /* sub-block s: scale in bits 0-3, min in bits 4-7 */
    uint8_t qs[QK_K / 4];      /* 2-bit q, 4 per byte */
    uint8_t d[2], dmin[2];
} BlockQ2_K;

typedef struct {
    uint8_t hmask[QK_K / 8];   /* the third bit of q (set: q is not lowered by 4) */
    uint8_t qs[QK_K / 4];      /* the low 2 bits of q */
    uint8_t scales[12];        /* 16 x 6 bits (quant_scales_q3_k) */
    uint8_t d[2];
} BlockQ3_K;

typedef struct {
    uint8_t d[2], dmin[2];
    uint8_t scales[12];        /* 8 x (6-bit scale, 6-bit min) (quant_scale_min_k4) */
    uint8_t qs[QK_K / 2];      /* 4-bit q */
} BlockQ4_K;

typedef struct {
    uint8_t d[2], dmin[2];
    uint8_t scales[12];        /* as Q4_K */
    uint8_t qh[QK_K / 8];      /* the fifth bit of q */
    uint8_t qs[QK_K / 2];      /* the low 4 bits of q */
} BlockQ5_K;

typedef struct {
    uint8_t ql[QK_K / 2];      /* the low 4 bits of q */
    uint8_t qh[QK_K / 4];      /* the high 2 bits of q */
    int8_t scales[QK_K / 16];
    uint8_t d[2];
} BlockQ6_K;

/* The f16 at p (two little-endian bytes) as f32. */
float quant_half(const uint8_t *p);
/* Scale and min of sub-block j < 8 from Q4_K/Q5_K's 12 packed bytes:
 * j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 split between the
 * nibbles of byte j + 4 and the top 2 bits of bytes j - 4 and j. */
static inline void quant_scale_min_k4(const uint8_t *scales, int j, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = scales[j] & 63;
        *mn = scales[j + 4] & 63;
    } else {
        *sc = (uint8_t)((scales[j + 4] & 0xF) | (scales[j - 4] >> 6) << 4);
        *mn = (uint8_t)((scales[j + 4] >> 4) | (scales[j] >> 6) << 4);
    }
}
/* Q3_K's 16 six-bit scales (still biased by 32) from its 12 packed bytes:
 * the low 4 bits in the nibbles of bytes 0-7, the high 2 bits in 8-11. */
void quant_scales_q3_k(const uint8_t *packed, int8_t out[16]);

/* The doubled E2M1 values by code: bit 3 the sign, bits 1-2 the exponent,
 * bit 0 the mantissa (code 8, -0, is 0 as ggml's table has it). */
static const int8_t quant_e2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
/* Half the E8M0 scale, 2^(e - 128), which multiplies the doubled values:
 * e = 0 and 1 are f32 subnormals (2^-128, 2^-127), e = 255 is 2^127
 * (ggml gives no NaN for 255, and neither does this). */
static inline float quant_e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* A block of 32 as integers: x[j] = q[j] * d (+ m for the _1 types). */
typedef struct {
    int8_t q[QK]; /* centred for the _0 types */
    float d, m;   /* m 0 for the _0 types */
} QuantBlock;

/* A K-quant super-block as integers:
 * x[w] = (d * sc[s]) * q[w] - dmin * mn[s] for w in sub-block s = w / sub. */
typedef struct {
    int8_t q[QK_K];  /* centred as the type defines (Q3_K: -4..3, Q6_K: -32..31) */
    int32_t sc[16];  /* sub-block scales, centred (Q3_K: -32..31) */
    int32_t mn[16];  /* sub-block mins; 0 for Q3_K and Q6_K */
    int sub;         /* weights per sub-block: 16 or 32 */
    float d, dmin;   /* dmin 0 for Q3_K and Q6_K */
} QuantSuperBlock;

/* The unpacking is the layouts' definition, shared by the reference
 * dequantizers and the integer dot products (model/kernels_quant.h);
 * inline, with loops over whole 16- and 32-byte slices, so that a kernel
 * that calls one vectorizes it. */

/* Blocks of 32: weight j < 16 is the low nibble of qs[j], weight j + 16 the
 * high one; the 5-bit types add bit j of qh (a little-endian uint32) as bit
 * 4.  Eight weights at a time in a uint64 (bytes never carry into each
 * other: every value stays below 0x80 until the centring, done on v | 0x80
 * so that it never borrows). */
static inline uint64_t quant_spread_bits(uint8_t bits) { /* bit i -> byte i, as 0 or 1 */
    uint64_t t = (uint64_t)bits * 0x0101010101010101ull & 0x8040201008040201ull;
    return (t + 0x7F7F7F7F7F7F7F7Full) >> 7 & 0x0101010101010101ull;
}
static inline void quant_unpack_32(const uint8_t *qs, const uint8_t *qh, int centre, QuantBlock *u) {
    const uint64_t low = 0x0F0F0F0F0F0F0F0Full, top = 0x8080808080808080ull;
    const uint64_t c = (uint64_t)centre * 0x0101010101010101ull;
    for (int i = 0; i < 2; i++) {
        uint64_t v, lo, hi;
        memcpy(&v, qs + 8 * i, 8);
        lo = v & low, hi = v >> 4 & low;
        if (qh) {
            lo |= quant_spread_bits(qh[i]) << 4;
            hi |= quant_spread_bits(qh[2 + i]) << 4;
        }
        lo = ((lo | top) - c) ^ top, hi = ((hi | top) - c) ^ top;
        memcpy(u->q + 8 * i, &lo, 8);
        memcpy(u->q + QK / 2 + 8 * i, &hi, 8);
    }
}
static inline void quant_unpack_q4_0(const void *blk, QuantBlock *u) {
    const BlockQ4_0 *b = blk;
    quant_unpack_32(b->qs, NULL, 8, u);
    u->d = quant_half(b->d), u->m = 0.0f;
}
static inline void quant_unpack_q4_1(const void *blk, QuantBlock *u) {
    const BlockQ4_1 *b = blk;
    quant_unpack_32(b->qs, NULL, 0, u);
    u->d = quant_half(b->d), u->m = quant_half(b->m);
}
static inline void quant_unpack_q5_0(const void *blk, QuantBlock *u) {
    const BlockQ5_0 *b = blk;
    quant_unpack_32(b->qs, b->qh, 16, u);
    u->d = quant_half(b->d), u->m = 0.0f;
}
static inline void quant_unpack_q5_1(const void *blk, QuantBlock *u) {
    const BlockQ5_1 *b = blk;
    quant_unpack_32(b->qs, b->qh, 0, u);
    u->d = quant_half(b->d), u->m = quant_half(b->m);
}

/* MXFP4: each nibble (laid out as Q4_0's) looked up in quant_e2m1. */
static inline void quant_unpack_mxfp4(const void *blk, QuantBlock *u) {
    const BlockMXFP4 *b = blk;
    for (int j = 0; j < QK / 2; j++) {
        u->q[j] = quant_e2m1[b->qs[j] & 0xF];
        u->q[j + QK / 2] = quant_e2m1[b->qs[j] >> 4];
    }
    u->d = quant_e8m0_half(b->e), u->m = 0.0f;
}

/* Q2_K, Q3_K, Q6_K: weight 128 h + 32 g + l (half h, group g, lane l)
 * takes its bits from byte l of the half's 32-byte slices, at the group's
 * bit position; sub-block s = w / 16. */
static inline void quant_unpack_q2_k(const void *blk, QuantSuperBlock *u) {
    const BlockQ2_K *b = blk;
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                u->q[128 * h + 32 * g + l] = (int8_t)(b->qs[32 * h + l] >> (2 * g) & 3);
    for (int s = 0; s < 16; s++) u->sc[s] = b->scales[s] & 0xF, u->mn[s] = b->scales[s] >> 4;
    u->sub = 16, u->d = quant_half(b->d), u->dmin = quant_half(b->dmin);
}
static inline void quant_unpack_q3_k(const void *blk, QuantSuperBlock *u) {
    const BlockQ3_K *b = blk;
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                u->q[128 * h + 32 * g + l] = (int8_t)((b->qs[32 * h + l] >> (2 * g) & 3) -
                                                      ((b->hmask[l] >> (4 * h + g) & 1) ^ 1) * 4);
    int8_t sc[16];
    quant_scales_q3_k(b->scales, sc);
    for (int s = 0; s < 16; s++) u->sc[s] = sc[s] - 32, u->mn[s] = 0;
    u->sub = 16, u->d = quant_half(b->d), u->dmin = 0.0f;
}
static inline void quant_unpack_q6_k(const void *blk, QuantSuperBlock *u) {
    const BlockQ6_K *b = blk;
    /* groups 0, 1 take the low nibbles of ql's two 32-byte slices of the
     * half, groups 2, 3 the high ones */
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++) {
                uint8_t lo = b->ql[64 * h + 32 * (g % 2) + l];
                u->q[128 * h + 32 * g + l] =
                    (int8_t)(((g < 2 ? lo & 0xF : lo >> 4) | (b->qh[32 * h + l] >> (2 * g) & 3) << 4) - 32);
            }
    for (int s = 0; s < 16; s++) u->sc[s] = b->scales[s], u->mn[s] = 0;
    u->sub = 16, u->d = quant_half(b->d), u->dmin = 0.0f;
}

/* Q4_K, Q5_K: each 64 weights share 32 bytes of qs, the first 32 weights
 * in the low nibbles, the next 32 in the high ones; sub-block s = w / 32
 * takes bit s of qh[w % 32] as the fifth bit. */
static inline void quant_unpack_k4(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                                   QuantSuperBlock *u) {
    for (int s = 0; s < QK_K / 32; s++) {
        uint8_t sc, mn;
        quant_scale_min_k4(scales, s, &sc, &mn);
        u->sc[s] = sc, u->mn[s] = mn;
        const uint8_t *bytes = qs + 32 * (s / 2);
        for (int l = 0; l < 32; l++) {
            int q = s % 2 ? bytes[l] >> 4 : bytes[l] & 0xF;
            u->q[32 * s + l] = (int8_t)(qh ? q | (qh[l] >> s & 1) << 4 : q);
        }
    }
    u->sub = 32;
}
static inline void quant_unpack_q4_k(const void *blk, QuantSuperBlock *u) {
    const BlockQ4_K *b = blk;
    quant_unpack_k4(b->scales, b->qs, NULL, u);
    u->d = quant_half(b->d), u->dmin = quant_half(b->dmin);
}
static inline void quant_unpack_q5_k(const void *blk, QuantSuperBlock *u) {
    const BlockQ5_K *b = blk;
    quant_unpack_k4(b->scales, b->qs, b->qh, u);
    u->d = quant_half(b->d), u->dmin = quant_half(b->dmin);
}

/* n weights (whole blocks) of each type to f32, computing every weight
 * exactly as ggml's reference dequantize_row_* does (same operations in the
 * same order, no FMA contraction), so results agree bit for bit. */
void dequantize_row_q4_0(const void *src, float *dst, size_t n);
void dequantize_row_q4_1(const void *src, float *dst, size_t n);
void dequantize_row_q5_0(const void *src, float *dst, size_t n);
void dequantize_row_q5_1(const void *src, float *dst, size_t n);
void dequantize_row_q2_k(const void *src, float *dst, size_t n);
void dequantize_row_q3_k(const void *src, float *dst, size_t n);
void dequantize_row_q4_k(const void *src, float *dst, size_t n);
void dequantize_row_q5_k(const void *src, float *dst, size_t n);
void dequantize_row_q6_k(const void *src, float *dst, size_t n);
void dequantize_row_mxfp4(const void *src, float *dst, size_t n);
#endif
