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
 *   Q6_K  16 x 16, 6-bit q - 32, int8 scale:      x = d*sc*q */
#ifndef POSENC_QUANT_H
#define POSENC_QUANT_H
#include <stddef.h>
#include <stdint.h>

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
void quant_scale_min_k4(const uint8_t *scales, int j, uint8_t *sc, uint8_t *mn);
/* Q3_K's 16 six-bit scales (still biased by 32) from its 12 packed bytes:
 * the low 4 bits in the nibbles of bytes 0-7, the high 2 bits in 8-11. */
void quant_scales_q3_k(const uint8_t *packed, int8_t out[16]);

/* A block of 32 as integers: x[j] = q[j] * d (+ m for the _1 types). */
typedef struct {
    int8_t q[QK]; /* centred for the _0 types */
    float d, m;   /* m 0 for the _0 types */
} QuantBlock;
void quant_unpack_q4_0(const void *blk, QuantBlock *u);
void quant_unpack_q4_1(const void *blk, QuantBlock *u);
void quant_unpack_q5_0(const void *blk, QuantBlock *u);
void quant_unpack_q5_1(const void *blk, QuantBlock *u);

/* A K-quant super-block as integers:
 * x[w] = (d * sc[s]) * q[w] - dmin * mn[s] for w in sub-block s = w / sub. */
typedef struct {
    int8_t q[QK_K];  /* centred as the type defines (Q3_K: -4..3, Q6_K: -32..31) */
    int8_t sc[16];   /* sub-block scales, centred (Q3_K: -32..31) */
    uint8_t mn[16];  /* sub-block mins; 0 for Q3_K and Q6_K */
    int sub;         /* weights per sub-block: 16 or 32 */
    float d, dmin;   /* dmin 0 for Q3_K and Q6_K */
} QuantSuperBlock;
void quant_unpack_q2_k(const void *blk, QuantSuperBlock *u);
void quant_unpack_q3_k(const void *blk, QuantSuperBlock *u);
void quant_unpack_q4_k(const void *blk, QuantSuperBlock *u);
void quant_unpack_q5_k(const void *blk, QuantSuperBlock *u);
void quant_unpack_q6_k(const void *blk, QuantSuperBlock *u);

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
#endif
