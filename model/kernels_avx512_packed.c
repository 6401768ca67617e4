/* The AVX-512 path's kernels on packed rows (kernels_impl.h, written by
 * kernels_pack.c at load time): decode of Q4_0, Q8_0, MXFP4, Q4_K, Q5_K,
 * Q6_K, F32 and F16 (KernelPath.dot_packed), each group of 16 rows' sums one vector, and
 * prefill of F32 and F16 (gemm_packed), whose every output is decode's
 * chain of multiply-adds. */
#include "model/kernels_avx512.h"

#ifdef KERNELS_AVX512
#include <string.h>

INLINE __m512i dpbusd_acc(__m512i acc, __m512i u, __m512i x) {
#ifdef __AVX512VNNI__
    return _mm512_dpbusd_epi32(acc, u, x);
#else
    return _mm512_add_epi32(acc, dot4_u8(u, x));
#endif
}
/* dpbusd_acc for u of all 8 bits (Q8_0's quants + 128): without VNNI,
 * maddubs would saturate its 16-bit pair sums (2 * 255 * 127 > 32767), so
 * the nibbles are summed apart. */
INLINE __m512i dpbusd_acc_u8(__m512i acc, __m512i u, __m512i x) {
#ifdef __AVX512VNNI__
    return _mm512_dpbusd_epi32(acc, u, x);
#else
    const __m512i low = _mm512_set1_epi8(0xF);
    __m512i lo = dot4_u8(_mm512_and_si512(u, low), x);
    __m512i hi = dot4_u8(_mm512_and_si512(_mm512_srli_epi16(u, 4), low), x);
    return _mm512_add_epi32(acc, _mm512_add_epi32(lo, _mm512_slli_epi32(hi, 4)));
#endif
}
INLINE __m512i broadcast4(const int8_t *x) {
    int32_t v;
    memcpy(&v, x, 4);
    return _mm512_set1_epi32(v);
}
/* The 16 rows' sums of u * x over each half of a block of 32: the low
 * nibbles (weights 0-15) in *lo, the high ones in *hi; a Q6_K block ORs
 * its top two bits in (qh, else NULL), a Q5_K block its fifth bit (q5h,
 * else NULL); MXFP4's nibbles are codes, u the table's byte for each
 * (lut, else NULL). */
INLINE void packed_block(__m512i *lo, __m512i *hi, const uint8_t qs[4][64], const uint8_t qh[2][64],
                         const uint8_t *q5h, const __m512i *lut, const int8_t *x) {
    const __m512i low = _mm512_set1_epi8(0xF), top = _mm512_set1_epi8(0x30), fifth = _mm512_set1_epi8(0x10);
    __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512(), h0, h1, h5;
    if (qh) h0 = _mm512_loadu_si512(qh[0]), h1 = _mm512_loadu_si512(qh[1]);
    if (q5h) h5 = _mm512_loadu_si512(q5h);
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        __m512i v = _mm512_loadu_si512(qs[s]);
        __m512i u0 = _mm512_and_si512(v, low), u1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
        if (lut) u0 = _mm512_shuffle_epi8(*lut, u0), u1 = _mm512_shuffle_epi8(*lut, u1);
        if (qh) { /* bits 2s, 2s + 1 of each byte to bits 4, 5 (16-bit shifts: the mask drops what crosses) */
            __m512i t0 = s < 3 ? _mm512_slli_epi16(h0, 4 - 2 * s) : _mm512_srli_epi16(h0, 2);
            __m512i t1 = s < 3 ? _mm512_slli_epi16(h1, 4 - 2 * s) : _mm512_srli_epi16(h1, 2);
            u0 = _mm512_or_si512(u0, _mm512_and_si512(t0, top));
            u1 = _mm512_or_si512(u1, _mm512_and_si512(t1, top));
        }
        if (q5h) { /* bit s to bit 4, and bit 4 + s to bit 4 (16-bit shifts: the mask drops what crosses) */
            __m512i t0 = _mm512_slli_epi16(h5, 4 - s), t1 = s ? _mm512_srli_epi16(h5, s) : h5;
            u0 = _mm512_or_si512(u0, _mm512_and_si512(t0, fifth));
            u1 = _mm512_or_si512(u1, _mm512_and_si512(t1, fifth));
        }
        a = dpbusd_acc(a, u0, broadcast4(x + 4 * s));
        b = dpbusd_acc(b, u1, broadcast4(x + 16 + 4 * s));
    }
    *lo = a, *hi = b;
}
INLINE __m512 packed_half16(const uint8_t d[PACK_ROWS][2]) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)d));
}
INLINE void packed_store(float *out, __m512 v, int rows) {
    _mm512_mask_storeu_ps(out, rows >= 16 ? 0xFFFF : (__mmask16)((1u << rows) - 1), v);
}

/* Decode's packed rows are one stream (kernels_impl.h), and each block's
 * (or eighth of a super-block's) bytes are asked for STREAM_AHEAD further
 * on as it is read: the hardware prefetcher alone falls behind, and
 * asking for a group's rows all at its start does worse still. */
/* MXFP4's E8M0 half scales of 16 rows, as quant_e8m0_half makes them:
 * 2^(e - 128), e < 2 subnormal. */
INLINE __m512 packed_e8m0_half16(const uint8_t e8[PACK_ROWS]) {
    __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e8));
    __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    return _mm512_castsi512_ps(_mm512_mask_sllv_epi32(normal, _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)),
                                                      _mm512_set1_epi32(0x00200000), e));
}

/* Q4_0 and MXFP4, blocks of 32 nibbles: per block the 16 rows' sums less
 * the centre times the activations' sum (Q4_0's 8; MXFP4's 12, its codes
 * through a byte shuffle to u = 12 + the doubled E2M1 value,
 * quant_mxfp4_u), scaled by each row's f16 scale or E8M0 half scale. */
INLINE void packed_nibbles(float *out, const DecodeActs *x, const void *w, int m, int k, int mxfp4) {
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)quant_mxfp4_u));
    size_t bytes = mxfp4 ? sizeof(PackMXFP4) : sizeof(PackQ4_0);
    int nb = k / QK, centre = mxfp4 ? 12 : 8;
    const char *p = w;
    for (int g = 0; g < m; g += PACK_ROWS, p += (size_t)nb * bytes) {
        __m512 acc = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const PackQ4_0 *q4 = (const void *)(p + (size_t)b * bytes);
            const PackMXFP4 *fp4 = (const void *)(p + (size_t)b * bytes);
            __m512i lo, hi;
            stream_prefetch(p + (size_t)b * bytes, bytes);
            packed_block(&lo, &hi, mxfp4 ? fp4->qs : q4->qs, NULL, NULL, mxfp4 ? &lut : NULL, x->q + QK * b);
            __m512i dot = _mm512_sub_epi32(_mm512_add_epi32(lo, hi), _mm512_set1_epi32(centre * x->sum[b]));
            __m512 scale = mxfp4 ? packed_e8m0_half16(fp4->e) : packed_half16(q4->d);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(scale, _mm512_set1_ps(x->d[b])), acc);
        }
        packed_store(out + g, acc, m - g);
    }
}
void avx512_packed_q4_0(float *out, const DecodeActs *x, const void *w, int m, int k) {
    packed_nibbles(out, x, w, m, k, 0);
}
void avx512_packed_mxfp4(float *out, const DecodeActs *x, const void *w, int m, int k) {
    packed_nibbles(out, x, w, m, k, 1);
}

/* Q8_0's bytes need no unpacking: per block, 8 products of the 16 rows'
 * 4 quants with a broadcast 4 of the activations, less 128 times their
 * sum, scaled once. */
void avx512_packed_q8_0(float *out, const DecodeActs *x, const void *w, int m, int k) {
    const PackQ8_0 *p = w;
    int nb = k / QK;
    for (int g = 0; g < m; g += PACK_ROWS, p += nb) {
        __m512 acc = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            stream_prefetch(p + b, sizeof *p);
            __m512i dot = _mm512_set1_epi32(-128 * x->sum[b]);
#pragma GCC unroll 8
            for (int s = 0; s < 8; s++)
                dot = dpbusd_acc_u8(dot, _mm512_loadu_si512(p[b].qs[s]), broadcast4(x->q + QK * b + 4 * s));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                  _mm512_mul_ps(packed_half16(p[b].d), _mm512_set1_ps(x->d[b])), acc);
        }
        packed_store(out + g, acc, m - g);
    }
}

/* Packed F32 and F16 (kernels_impl.h): every output is one lane's chain
 * of multiply-adds over columns 0..k-1, from 0, F16's columns converted
 * to f32 exactly.  Column c of a group of 16 rows. */
INLINE __m512 packed_col(const void *group, size_t c, TensorType type) {
    if (type == TENSOR_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)group + c * PACK_ROWS)));
    return _mm512_loadu_ps((const float *)group + c * PACK_ROWS);
}

/* Decode runs four groups at once, four chains in flight and four
 * ascending streams. */
INLINE void packed_float(float *out, const DecodeActs *x, const void *w, int m, int k, TensorType type) {
    const char *p = w;
    const float *xv = x->x;
    size_t group = (size_t)k * PACK_ROWS * tensor_row_bytes(type, 1);
    int groups = (m + PACK_ROWS - 1) / PACK_ROWS, g = 0;
    for (; g + 4 <= groups; g += 4) {
        const char *q = p + (size_t)g * group;
        __m512 acc[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) acc[i] = _mm512_setzero_ps();
        for (int c = 0; c < k; c++) {
            __m512 xc = _mm512_set1_ps(xv[c]);
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) acc[i] = _mm512_fmadd_ps(packed_col(q + (size_t)i * group, (size_t)c, type), xc, acc[i]);
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) packed_store(out + (g + i) * PACK_ROWS, acc[i], m - (g + i) * PACK_ROWS);
    }
    for (; g < groups; g++) {
        const char *q = p + (size_t)g * group;
        __m512 acc = _mm512_setzero_ps();
        for (int c = 0; c < k; c++) acc = _mm512_fmadd_ps(packed_col(q, (size_t)c, type), _mm512_set1_ps(xv[c]), acc);
        packed_store(out + g * PACK_ROWS, acc, m - g * PACK_ROWS);
    }
}
void avx512_packed_f32(float *out, const DecodeActs *x, const void *w, int m, int k) {
    packed_float(out, x, w, m, k, TENSOR_F32);
}
void avx512_packed_f16(float *out, const DecodeActs *x, const void *w, int m, int k) {
    packed_float(out, x, w, m, k, TENSOR_F16);
}

/* Prefill on packed rows: tiles of 4 groups (64 rows) by 6 tokens, 24
 * accumulators, each column 4 vector loads of 16 rows and 6 broadcasts.
 * The columns run whole (the 4 groups' 192 KB at k = 768 stream from L2),
 * so every output is decode's chain, and no partial sums go back to
 * memory between column blocks: blocking the columns (by 64 to 256) costs
 * that traffic and gains nothing, and 8 groups by 3 tokens in blocks of 64
 * columns are well below this tile.  Missing groups and tokens repeat the
 * last valid one and are not stored; rows past m are masked.  Each group's
 * columns are asked for PACKED_AHEAD columns (1 KB of F32) before they
 * are read (prefetch_ahead: the last may pass the copy's end): the stream
 * from L2 then keeps up a little better than on its own (4, 8 and 32
 * columns ahead do as well or less). */
#define PACKED_AHEAD 16
#define PACKED_TILE_GROUPS 4
#define PACKED_TILE_TOKENS 6
INLINE void packed_tile(float *out, size_t ldo, const float *x, size_t ldx, const char *w, size_t group, int k,
                        int ng, int nt, int m, TensorType type) {
    const char *wg[PACKED_TILE_GROUPS];
    const float *xt[PACKED_TILE_TOKENS];
    size_t col = PACK_ROWS * tensor_row_bytes(type, 1);
#pragma GCC unroll 4
    for (int i = 0; i < PACKED_TILE_GROUPS; i++) wg[i] = w + (size_t)(i < ng ? i : ng - 1) * group;
#pragma GCC unroll 6
    for (int j = 0; j < PACKED_TILE_TOKENS; j++) xt[j] = x + (size_t)(j < nt ? j : nt - 1) * ldx;
    __m512 acc[PACKED_TILE_TOKENS][PACKED_TILE_GROUPS];
#pragma GCC unroll 6
    for (int j = 0; j < PACKED_TILE_TOKENS; j++)
#pragma GCC unroll 4
        for (int i = 0; i < PACKED_TILE_GROUPS; i++) acc[j][i] = _mm512_setzero_ps();
    for (int c = 0; c < k; c++) {
        __m512 b[PACKED_TILE_TOKENS];
#pragma GCC unroll 6
        for (int j = 0; j < PACKED_TILE_TOKENS; j++) b[j] = _mm512_set1_ps(xt[j][c]);
#pragma GCC unroll 4
        for (int i = 0; i < PACKED_TILE_GROUPS; i++) {
            prefetch_ahead(wg[i] + (size_t)c * col, 64, PACKED_AHEAD * col);
            __m512 v = packed_col(wg[i], (size_t)c, type);
#pragma GCC unroll 6
            for (int j = 0; j < PACKED_TILE_TOKENS; j++) acc[j][i] = _mm512_fmadd_ps(v, b[j], acc[j][i]);
        }
    }
    for (int j = 0; j < nt; j++)
        for (int i = 0; i < ng; i++) packed_store(out + (size_t)j * ldo + (size_t)i * PACK_ROWS, acc[j][i], m - i * PACK_ROWS);
}

INLINE void gemm_packed_float(float *out, size_t ldo, const float *x, size_t ldx, const void *w, int n, int m, int k,
                              TensorType type) {
    size_t group = (size_t)k * PACK_ROWS * tensor_row_bytes(type, 1);
    int groups = (m + PACK_ROWS - 1) / PACK_ROWS;
    for (int g0 = 0; g0 < groups; g0 += PACKED_TILE_GROUPS)
        for (int t = 0; t < n; t += PACKED_TILE_TOKENS)
            packed_tile(out + (size_t)t * ldo + (size_t)g0 * PACK_ROWS, ldo, x + (size_t)t * ldx, ldx,
                        (const char *)w + (size_t)g0 * group, group, k,
                        groups - g0 < PACKED_TILE_GROUPS ? groups - g0 : PACKED_TILE_GROUPS,
                        n - t < PACKED_TILE_TOKENS ? n - t : PACKED_TILE_TOKENS, m - g0 * PACK_ROWS, type);
}
void avx512_gemm_packed_f32(float *out, size_t ldo, const float *x, size_t ldx, const void *w, int n, int m,
                            int k) {
    gemm_packed_float(out, ldo, x, ldx, w, n, m, k, TENSOR_F32);
}
void avx512_gemm_packed_f16(float *out, size_t ldo, const float *x, size_t ldx, const void *w, int n, int m,
                            int k) {
    gemm_packed_float(out, ldo, x, ldx, w, n, m, k, TENSOR_F16);
}

/* One super-block of 16 packed K-quant rows against Q8_K activations
 * (xq, their sums of 16 ks, scale kd): Q4_K's (bits 4) and Q5_K's (5)
 * scales and mins per 32 weights, or Q6_K's (6) scales per 16 around the
 * centre 32. */
INLINE __m512 packed_superblock(const void *blk, int bits, const int8_t *xq, const int16_t *ks, float kd) {
    __m512i dot = _mm512_setzero_si512(), mins = _mm512_setzero_si512();
    const PackQ5_K *q5 = blk;
    const PackQ4_K *q4 = bits == 5 ? &q5->k4 : blk; /* Q5_K's scales and low bits are Q4_K's */
    const PackQ6_K *q6 = blk;
    size_t eighth = (bits == 6 ? sizeof *q6 : bits == 5 ? sizeof *q5 : sizeof *q4) / 8;
    for (int j = 0; j < QK_K / 32; j++) {
        __m512i lo, hi;
        stream_prefetch((const char *)blk + j * eighth, eighth);
        packed_block(&lo, &hi, bits == 6 ? q6->ql[j] : q4->qs[j], bits == 6 ? q6->qh[j] : NULL,
                     bits == 5 ? q5->qh[j] : NULL, NULL, xq + 32 * j);
        if (bits == 6) {
            lo = _mm512_sub_epi32(lo, _mm512_set1_epi32(32 * ks[2 * j]));
            hi = _mm512_sub_epi32(hi, _mm512_set1_epi32(32 * ks[2 * j + 1]));
            dot = _mm512_add_epi32(dot, _mm512_mullo_epi32(lo, _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)q6->sc[2 * j]))));
            dot = _mm512_add_epi32(dot, _mm512_mullo_epi32(hi, _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)q6->sc[2 * j + 1]))));
        } else {
            __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q4->sc[j]));
            __m512i mn = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q4->mn[j]));
            dot = _mm512_add_epi32(dot, _mm512_mullo_epi32(_mm512_add_epi32(lo, hi), sc));
            mins = _mm512_add_epi32(mins, _mm512_mullo_epi32(mn, _mm512_set1_epi32(ks[2 * j] + ks[2 * j + 1])));
        }
    }
    __m512 xd = _mm512_set1_ps(kd);
    __m512 r = _mm512_mul_ps(_mm512_cvtepi32_ps(dot),
                             _mm512_mul_ps(packed_half16(bits == 6 ? q6->d : q4->d), xd));
    if (bits == 6) return r;
    __m512 dmin = _mm512_mul_ps(packed_half16(q4->dmin), xd);
    /* Q5_K takes its min term off unfused, as the row-wise kernels do, so
     * that its packed rows give their bits; Q4_K's fused form is older,
     * and kept so that its bits stay as they were */
    if (bits == 5) return _mm512_sub_ps(r, _mm512_mul_ps(_mm512_cvtepi32_ps(mins), dmin));
    return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), dmin, r);
}

INLINE void packed_k(float *out, const DecodeActs *x, const void *w, int m, int k, int bits) {
    size_t bytes = bits == 6 ? sizeof(PackQ6_K) : bits == 5 ? sizeof(PackQ5_K) : sizeof(PackQ4_K);
    int nb = k / QK_K;
    const char *p = w;
    for (int g = 0; g < m; g += PACK_ROWS, p += (size_t)nb * bytes) {
        __m512 acc = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++)
            acc = _mm512_add_ps(acc, packed_superblock(p + (size_t)b * bytes, bits, x->kq + QK_K * b,
                                                       x->ksum + QK_K / 16 * b, x->kd[b]));
        packed_store(out + g, acc, m - g);
    }
}
void avx512_packed_q4_k(float *out, const DecodeActs *x, const void *w, int m, int k) { packed_k(out, x, w, m, k, 4); }
void avx512_packed_q5_k(float *out, const DecodeActs *x, const void *w, int m, int k) { packed_k(out, x, w, m, k, 5); }
void avx512_packed_q6_k(float *out, const DecodeActs *x, const void *w, int m, int k) { packed_k(out, x, w, m, k, 6); }
#endif
