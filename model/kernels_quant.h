/* Decode's dot products on ggml's block-quantized weights (base/quant.h),
 * instantiated by each path (kernels_portable.c, kernels_avx2.c,
 * kernels_avx512.c), which defines before including this file either
 *
 *   static inline int32_t quant_idot(const int8_t *q, const int8_t *x,
 *                                    const int32_t *scale, int n_sub, int sub);
 *
 * = sum over s < n_sub of scale[s] * (q . x over weights [s*sub, (s+1)*sub)),
 * for sub 16 or 32, exactly (|q| <= 32, |x| <= 127); or QUANT_AVX256 and
 *
 *   __m256i quant_dot4(__m256i q, __m256i x);
 *
 * whose int32 lane i is the sum of q . x over bytes 4i..4i+3, from which
 * quant_idot below is made, and the kernels that unpack Q4_0, Q4_1, Q5_0,
 * Q5_1, MXFP4, Q4_K, Q5_K and Q6_K in registers (a path may also bring its
 * own Q4_0 and MXFP4, QUANT_DOT_Q4_0 and QUANT_DOT_MXFP4).
 *
 * The 32-weight block types (MXFP4 too: q its doubled E2M1 values, d its
 * E8M0 half scale) run against Q8 blocks of 32 activations (the
 * path's quantize_q8), the K-quants against Q8_K super-blocks
 * (quantize_q8k: 256 int8 with one f32 scale and int16 sums of each 16).
 * A row's result is the sum over blocks of d_w * d_x * (integer dot)
 * [+ m_w * d_x * sum x, or - dmin_w * d_x * sum_s mn_s (sum x of s)]: the
 * integers are exact on every path, so paths differ only in the few float
 * operations per block. */
#ifndef POSENC_KERNELS_QUANT_H
#define POSENC_KERNELS_QUANT_H
#include "base/quant.h"

#ifdef QUANT_AVX256
static inline float quant_half_avx(const uint8_t *p) { return _cvtsh_ss((uint16_t)(p[0] | p[1] << 8)); }

static inline int32_t quant_hsum_epi32(__m256i acc) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return _mm_cvtsi128_si32(h);
}

/* Sub-blocks of 32 fill a register; of 16, a register holds two, their
 * scales in its two 128-bit halves. */
static inline int32_t quant_idot(const int8_t *q, const int8_t *x, const int32_t *scale, int n_sub,
                                 int sub) {
    __m256i acc = _mm256_setzero_si256();
    for (int s = 0; s < n_sub; s += 32 / sub) {
        __m256i sc = sub == 32 ? _mm256_set1_epi32(scale[s])
                               : _mm256_setr_epi32(scale[s], scale[s], scale[s], scale[s], scale[s + 1],
                                                   scale[s + 1], scale[s + 1], scale[s + 1]);
        __m256i p = quant_dot4(_mm256_loadu_si256((const __m256i *)(q + s * sub)),
                               _mm256_loadu_si256((const __m256i *)(x + s * sub)));
        acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(p, sc));
    }
    return quant_hsum_epi32(acc);
}
#endif

static const int32_t quant_one = 1;
static const int8_t quant_ones[QK] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                      1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

static inline float quant_block_dot(const QuantBlock *u, const int8_t *xq, float xd, int has_m) {
    float r = (float)quant_idot(u->q, xq, &quant_one, 1, QK) * (u->d * xd);
    if (has_m) r += (float)quant_idot(quant_ones, xq, &quant_one, 1, QK) * (u->m * xd);
    return r;
}

#define QUANT_DOT_Q8(type, BLOCK, HAS_M)                                                          \
    static void dot_##type(float *out, const int8_t *xq, const float *xd, const void *w,         \
                           size_t row_bytes, int m, int k) {                                     \
        QuantBlock u;                                                                            \
        for (int r = 0; r < m; r++) {                                                            \
            const BLOCK *blk = (const BLOCK *)((const uint8_t *)w + (size_t)r * row_bytes);     \
            stream_prefetch(blk, row_bytes);                                                     \
            float s = 0.0f;                                                                      \
            for (int b = 0; b < k / QK; b++) {                                                   \
                quant_unpack_##type(blk + b, &u);                                                \
                s += quant_block_dot(&u, xq + QK * b, xd[b], HAS_M);                             \
            }                                                                                    \
            out[r] = s;                                                                          \
        }                                                                                        \
    }
#ifdef QUANT_AVX256
/* The 32-block types without the trip through QuantBlock: the nibbles
 * (weights 0-15 low, 16-31 high) and qh's fifth bits (bit j of weight j)
 * are put together in registers, each block's 8 int32 lanes scaled into a
 * float accumulator (and the _1 types' m times the block's activations),
 * reduced once per row. */
static inline __m256i quant_block32_avx(const uint8_t *qs, const uint8_t *qh, int centre) {
    const __m128i low = _mm_set1_epi8(0xF);
    __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), low), _mm_and_si128(raw, low));
    if (qh) { /* byte j takes byte j / 8 of qh, keeps bit j % 8, as 16 */
        uint32_t bits;
        memcpy(&bits, qh, 4);
        __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits),
                                             _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                                0x0303030303030303));
        __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201);
        q = _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                                                _mm256_set1_epi8(16)));
    }
    return _mm256_sub_epi8(q, _mm256_set1_epi8((char)centre));
}
static inline float quant_hsum_ps(__m256 acc) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}
#define QUANT_DOT_Q8_AVX(type, BLOCK, QH, M, CENTRE)                                              \
    static void dot_##type(float *out, const int8_t *xq, const float *xd, const void *w,         \
                           size_t row_bytes, int m, int k) {                                     \
        const __m256i ones = _mm256_set1_epi8(1);                                                \
        (void)ones;                                                                              \
        for (int r = 0; r < m; r++) {                                                            \
            const BLOCK *blk = (const BLOCK *)((const uint8_t *)w + (size_t)r * row_bytes);     \
            stream_prefetch(blk, row_bytes);                                                     \
            __m256 acc = _mm256_setzero_ps();                                                    \
            for (int b = 0; b < k / QK; b++, blk++) {                                            \
                __m256i x = _mm256_loadu_si256((const __m256i *)(xq + QK * b));                  \
                __m256i p = quant_dot4(quant_block32_avx(blk->qs, QH, CENTRE), x);               \
                float d = quant_half_avx(blk->d) * xd[b];                                        \
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d), acc);           \
                if (M) {                                                                         \
                    float mb = quant_half_avx(M) * xd[b];                                        \
                    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(quant_dot4(ones, x)), _mm256_set1_ps(mb), acc); \
                }                                                                                \
            }                                                                                    \
            out[r] = quant_hsum_ps(acc);                                                         \
        }                                                                                        \
    }
#ifndef QUANT_DOT_Q4_0
QUANT_DOT_Q8_AVX(q4_0, BlockQ4_0, NULL, (const uint8_t *)NULL, 8)
#define QUANT_DOT_Q4_0 dot_q4_0
#endif
QUANT_DOT_Q8_AVX(q4_1, BlockQ4_1, NULL, blk->m, 0)
QUANT_DOT_Q8_AVX(q5_0, BlockQ5_0, blk->qh, (const uint8_t *)NULL, 16)
QUANT_DOT_Q8_AVX(q5_1, BlockQ5_1, blk->qh, blk->m, 0)
/* MXFP4: the nibbles (Q4_0's layout) looked up in quant_e2m1 with a byte
 * shuffle, then as Q4_0 with the E8M0 half scale for d (a path may bring
 * its own, QUANT_DOT_MXFP4). */
#ifndef QUANT_DOT_MXFP4
static void dot_mxfp4(float *out, const int8_t *xq, const float *xd, const void *w, size_t row_bytes, int m,
                      int k) {
    const __m128i lut = _mm_loadu_si128((const __m128i *)quant_e2m1), low = _mm_set1_epi8(0xF);
    for (int r = 0; r < m; r++) {
        const BlockMXFP4 *blk = (const BlockMXFP4 *)((const uint8_t *)w + (size_t)r * row_bytes);
        stream_prefetch(blk, row_bytes);
        __m256 acc = _mm256_setzero_ps();
        for (int b = 0; b < k / QK; b++, blk++) {
            __m128i raw = _mm_loadu_si128((const __m128i *)blk->qs);
            __m256i q = _mm256_set_m128i(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(raw, 4), low)),
                                         _mm_shuffle_epi8(lut, _mm_and_si128(raw, low)));
            __m256i p = quant_dot4(q, _mm256_loadu_si256((const __m256i *)(xq + QK * b)));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(quant_e8m0_half(blk->e) * xd[b]), acc);
        }
        out[r] = quant_hsum_ps(acc);
    }
}
#define QUANT_DOT_MXFP4 dot_mxfp4
#endif
#else
QUANT_DOT_Q8(q4_0, BlockQ4_0, 0)
#define QUANT_DOT_Q4_0 dot_q4_0
QUANT_DOT_Q8(q4_1, BlockQ4_1, 1)
QUANT_DOT_Q8(q5_0, BlockQ5_0, 0)
QUANT_DOT_Q8(q5_1, BlockQ5_1, 1)
QUANT_DOT_Q8(mxfp4, BlockMXFP4, 0)
#define QUANT_DOT_MXFP4 dot_mxfp4
#endif

/* One super-block: d * xd * sum_s sc_s (q_s . x_s) - dmin * xd * sum_s mn_s (sum x_s);
 * the integer sums are at most 63 * 31 * 127 * 256 in magnitude. */
static inline float quant_superblock_dot(const QuantSuperBlock *u, const int8_t *xq,
                                         const int16_t *xsum, float xd) {
    int32_t dot = quant_idot(u->q, xq, u->sc, QK_K / u->sub, u->sub), mins = 0;
    if (u->dmin != 0.0f)
        for (int s = 0; s < QK_K / u->sub; s++) {
            int32_t xs = 0;
            for (int i = 0; i < u->sub / 16; i++) xs += xsum[s * (u->sub / 16) + i];
            mins += u->mn[s] * xs;
        }
    return u->d * xd * (float)dot - u->dmin * xd * (float)mins;
}

/* A type's super-block against its 256 activations, through QuantSuperBlock. */
#define QUANT_SUPERBLOCK_UNPACKED(type)                                                           \
    static inline float superblock_##type(const void *blk, const int8_t *xq, const int16_t *xsum, \
                                          float xd) {                                             \
        QuantSuperBlock u;                                                                        \
        quant_unpack_##type(blk, &u);                                                             \
        return quant_superblock_dot(&u, xq, xsum, xd);                                            \
    }

#ifdef QUANT_AVX256
/* Q4_K, Q5_K and Q6_K, the types of the K_M files, with the quants split in
 * registers: the same exact integer sums and the same float operations per
 * super-block as quant_superblock_dot. */
/* Q4_K, Q5_K (qh not NULL): each 64 weights share 32 bytes of qs (low
 * nibbles: sub-block 2j, high: 2j + 1); sub-block s takes bit s of qh[l]. */
static inline float superblock_k4(const uint8_t *d, const uint8_t *dmin, const uint8_t *scales,
                                  const uint8_t *qs, const uint8_t *qh, const int8_t *xq,
                                  const int16_t *xsum, float xd) {
    const __m256i low = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    __m256i hbits = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    __m256i acc = _mm256_setzero_si256();
    int32_t mins = 0;
    for (int j = 0; j < 4; j++) {
        uint8_t sc0, mn0, sc1, mn1;
        quant_scale_min_k4(scales, 2 * j, &sc0, &mn0);
        quant_scale_min_k4(scales, 2 * j + 1, &sc1, &mn1);
        __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
        __m256i q0 = _mm256_and_si256(raw, low), q1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
        if (qh) {
            q0 = _mm256_or_si256(q0, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), one), 4));
            q1 = _mm256_or_si256(q1, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), one), 4));
        }
        __m256i p0 = quant_dot4(q0, _mm256_loadu_si256((const __m256i *)(xq + 64 * j)));
        __m256i p1 = quant_dot4(q1, _mm256_loadu_si256((const __m256i *)(xq + 64 * j + 32)));
        acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(p0, _mm256_set1_epi32(sc0)));
        acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(p1, _mm256_set1_epi32(sc1)));
        mins += mn0 * (xsum[4 * j] + xsum[4 * j + 1]) + mn1 * (xsum[4 * j + 2] + xsum[4 * j + 3]);
    }
    return quant_half_avx(d) * xd * (float)quant_hsum_epi32(acc) - quant_half_avx(dmin) * xd * (float)mins;
}
static inline float superblock_q4_k(const void *blk, const int8_t *xq, const int16_t *xsum, float xd) {
    const BlockQ4_K *b = blk;
    return superblock_k4(b->d, b->dmin, b->scales, b->qs, NULL, xq, xsum, xd);
}
static inline float superblock_q5_k(const void *blk, const int8_t *xq, const int16_t *xsum, float xd) {
    const BlockQ5_K *b = blk;
    return superblock_k4(b->d, b->dmin, b->scales, b->qs, b->qh, xq, xsum, xd);
}

/* Q6_K: weight 128 h + 32 g + l as quant_unpack_q6_k; a group's 32 weights
 * span two sub-blocks of 16, one per 128-bit half of the register. */
static inline float superblock_q6_k(const void *blk, const int8_t *xq, const int16_t *xsum, float xd) {
    (void)xsum; /* no mins */
    const BlockQ6_K *b = blk;
    const __m256i low = _mm256_set1_epi8(0xF), three = _mm256_set1_epi8(3), centre = _mm256_set1_epi8(32);
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i lo[2] = {_mm256_loadu_si256((const __m256i *)(b->ql + 64 * h)),
                         _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32))};
        __m256i hi = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        for (int g = 0; g < 4; g++) {
            __m256i q4 = g < 2 ? _mm256_and_si256(lo[g], low) : _mm256_and_si256(_mm256_srli_epi16(lo[g - 2], 4), low);
            __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(hi, 2 * g), three);
            __m256i q = _mm256_sub_epi8(_mm256_or_si256(q4, _mm256_slli_epi16(q2, 4)), centre);
            const int8_t *sc = b->scales + 8 * h + 2 * g;
            __m256i scv = _mm256_setr_epi32(sc[0], sc[0], sc[0], sc[0], sc[1], sc[1], sc[1], sc[1]);
            __m256i p = quant_dot4(q, _mm256_loadu_si256((const __m256i *)(xq + 128 * h + 32 * g)));
            acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(p, scv));
        }
    }
    return quant_half_avx(b->d) * xd * (float)quant_hsum_epi32(acc);
}
#else
QUANT_SUPERBLOCK_UNPACKED(q4_k)
QUANT_SUPERBLOCK_UNPACKED(q5_k)
QUANT_SUPERBLOCK_UNPACKED(q6_k)
#endif
QUANT_SUPERBLOCK_UNPACKED(q2_k)
QUANT_SUPERBLOCK_UNPACKED(q3_k)

#define QUANT_DOT_Q8K(type, BLOCK)                                                                \
    static void dot_##type(float *out, const int8_t *xq, const float *xd, const int16_t *xsum,    \
                           const void *w, size_t row_bytes, int m, int k) {                      \
        for (int r = 0; r < m; r++) {                                                            \
            const BLOCK *blk = (const BLOCK *)((const uint8_t *)w + (size_t)r * row_bytes);     \
            stream_prefetch(blk, row_bytes);                                                     \
            float s = 0.0f;                                                                      \
            for (int b = 0; b < k / QK_K; b++)                                                   \
                s += superblock_##type(blk + b, xq + QK_K * b, xsum + (QK_K / 16) * b, xd[b]);   \
            out[r] = s;                                                                          \
        }                                                                                        \
    }
QUANT_DOT_Q8K(q2_k, BlockQ2_K)
QUANT_DOT_Q8K(q3_k, BlockQ3_K)
QUANT_DOT_Q8K(q4_k, BlockQ4_K)
QUANT_DOT_Q8K(q5_k, BlockQ5_K)
QUANT_DOT_Q8K(q6_k, BlockQ6_K)

/* Their entries in the path's table (a path may bring its own Q4_0,
 * QUANT_DOT_Q4_0, and kernels on packed rows, QUANT_PACKED_Q4_0,
 * QUANT_PACKED_MXFP4, QUANT_PACKED_Q4_K, QUANT_PACKED_Q5_K and
 * QUANT_PACKED_Q6_K (kernels_impl.h), defined before it includes this
 * file; a path without them reads the rows as the file has them). */
#ifndef QUANT_PACKED_Q4_0
#define QUANT_PACKED_Q4_0 NULL
#endif
#ifndef QUANT_PACKED_MXFP4
#define QUANT_PACKED_MXFP4 NULL
#endif
#ifndef QUANT_PACKED_Q4_K
#define QUANT_PACKED_Q4_K NULL
#endif
#ifndef QUANT_PACKED_Q5_K
#define QUANT_PACKED_Q5_K NULL
#endif
#ifndef QUANT_PACKED_Q6_K
#define QUANT_PACKED_Q6_K NULL
#endif
#define KERNEL_QUANT_TYPES                                                                        \
    [TENSOR_Q4_0] = {.dot_q8 = QUANT_DOT_Q4_0, .dot_packed = QUANT_PACKED_Q4_0,                  \
                     .to_f32 = quant_q4_0_to_f32},                                               \
    [TENSOR_Q4_1] = {.dot_q8 = dot_q4_1, .to_f32 = quant_q4_1_to_f32},                           \
    [TENSOR_Q5_0] = {.dot_q8 = dot_q5_0, .to_f32 = quant_q5_0_to_f32},                           \
    [TENSOR_Q5_1] = {.dot_q8 = dot_q5_1, .to_f32 = quant_q5_1_to_f32},                           \
    [TENSOR_Q2_K] = {.dot_q8k = dot_q2_k, .to_f32 = quant_q2_k_to_f32},                          \
    [TENSOR_Q3_K] = {.dot_q8k = dot_q3_k, .to_f32 = quant_q3_k_to_f32},                          \
    [TENSOR_Q4_K] = {.dot_q8k = dot_q4_k, .dot_packed = QUANT_PACKED_Q4_K,                       \
                     .to_f32 = quant_q4_k_to_f32},                                               \
    [TENSOR_Q5_K] = {.dot_q8k = dot_q5_k, .dot_packed = QUANT_PACKED_Q5_K,                       \
                     .to_f32 = quant_q5_k_to_f32},                                               \
    [TENSOR_Q6_K] = {.dot_q8k = dot_q6_k, .dot_packed = QUANT_PACKED_Q6_K,                       \
                     .to_f32 = quant_q6_k_to_f32},                                               \
    [TENSOR_MXFP4] = {.dot_q8 = QUANT_DOT_MXFP4, .dot_packed = QUANT_PACKED_MXFP4,                \
                      .to_f32 = quant_mxfp4_to_f32}
#endif
