/* AVX-512 path (F, BW, VL; VNNI for Q8_0 when present): 16 float lanes.
 * This file holds the path's table, its float tiles (decode, attention,
 * prefill's f32 panels), the row-wise decode of block-quantized weights,
 * the conversions and the activations; the kernels on packed rows are in
 * kernels_avx512_packed.c, prefill's int8 units in kernels_avx512_int8.c
 * (what they share: kernels_avx512.h).
 *
 * Dot products keep one accumulator per output and sum 16-lane partials
 * over k (the tail through a masked load into the low lanes), then reduce
 * the lanes with the tree ((l + l+8) + (l+4 + l+12)), then pairs (0,2)
 * (1,3), then the two halves: reduce16 below does that for 16 outputs at
 * once, so every output of a tile rounds as if it had been computed
 * alone. */
#include "model/kernels_avx512.h"

#ifdef KERNELS_AVX512
#include <math.h>
#include <string.h>

/* 16 weights at p as floats; the masked form reads only the first lanes. */
INLINE __m512 load_w(const void *p, TensorType type) {
    if (type == TENSOR_F16) return _mm512_cvtph_ps(_mm256_loadu_si256(p));
    if (type == TENSOR_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(p)), 16));
    return _mm512_loadu_ps(p);
}

INLINE __m512 load_w_mask(const void *p, TensorType type, __mmask16 m) {
    if (type == TENSOR_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    if (type == TENSOR_BF16)
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
    return _mm512_maskz_loadu_ps(m, p);
}

/* Element e of the result is the lane sum of a[e]. */
INLINE __m512 reduce16(const __m512 *a) {
    __m512 c[8], g[4], u[2];
    /* The tree's stages pair accumulators 0-1, 2-3, ...; feeding them as
     * A_i = a[4(i%4) + i/4] leaves the sums in natural order. */
#pragma GCC unroll 8
    for (int p = 0; p < 8; p++) {
        __m512 lo = a[4 * ((2 * p) % 4) + (2 * p) / 4], hi = a[4 * ((2 * p + 1) % 4) + (2 * p + 1) / 4];
        c[p] = _mm512_add_ps(_mm512_shuffle_f32x4(lo, hi, 0x44), _mm512_shuffle_f32x4(lo, hi, 0xEE));
    }
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++)
        g[p] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * p], c[2 * p + 1], 0x88),
                             _mm512_shuffle_f32x4(c[2 * p], c[2 * p + 1], 0xDD));
#pragma GCC unroll 2
    for (int p = 0; p < 2; p++)
        u[p] = _mm512_add_ps(_mm512_shuffle_ps(g[2 * p], g[2 * p + 1], 0x44),
                             _mm512_shuffle_ps(g[2 * p], g[2 * p + 1], 0xEE));
    return _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x88), _mm512_shuffle_ps(u[0], u[1], 0xDD));
}

/* The same tree for one vector. */
INLINE float hsum16(__m512 v) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* One MR x NR tile (MR * NR <= 24): rows [0, mv) of w against tokens
 * [0, nv) of x (mv <= MR, nv <= NR; missing rows and tokens repeat the last
 * valid one and are not stored).  Rows stay in L1 while the caller walks
 * tokens. */
INLINE void dot_tile(float *out, size_t ldo, const float *x, size_t ldx, const char *w,
                     size_t wrow, int k, TensorType type, int MR, int NR, int mv, int nv) {
    const float *xp[4];
    const char *wp[16];
    size_t es = tensor_row_bytes(type, 1);
#pragma GCC unroll 4
    for (int j = 0; j < NR; j++) xp[j] = x + (size_t)(j < nv ? j : nv - 1) * ldx;
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) wp[i] = w + (size_t)(i < mv ? i : mv - 1) * wrow;
    __m512 acc[24];
#pragma GCC unroll 24
    for (int a = 0; a < 24; a++) acc[a] = _mm512_setzero_ps();
    int kk = 0;
    for (; kk + 16 <= k; kk += 16) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            xv[j] = _mm512_loadu_ps(xp[j] + kk);
            /* Keep every operand in a register: GCC would otherwise fold the
             * loads into the multiply-adds and read each vector MR (or NR)
             * times, which makes the tile load-bound. */
            __asm__("" : "+v"(xv[j]));
        }
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m512 wv = load_w(wp[i] + (size_t)kk * es, type);
            __asm__("" : "+v"(wv));
#pragma GCC unroll 4
            for (int j = 0; j < NR; j++) acc[j * MR + i] = _mm512_fmadd_ps(wv, xv[j], acc[j * MR + i]);
        }
    }
    if (kk < k) {
        __mmask16 m = (__mmask16)((1u << (k - kk)) - 1);
        __m512 xv[4];
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) xv[j] = _mm512_maskz_loadu_ps(m, xp[j] + kk);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m512 wv = load_w_mask(wp[i] + (size_t)kk * es, type, m);
#pragma GCC unroll 4
            for (int j = 0; j < NR; j++) acc[j * MR + i] = _mm512_fmadd_ps(wv, xv[j], acc[j * MR + i]);
        }
    }
    if (mv == MR && MR == 16) {
        _mm512_storeu_ps(out, reduce16(acc));
        return;
    }
    /* past 16 outputs the rest are reduced beside zeros (x + 0 is x, so
     * every output's tree is unchanged) */
    float tmp[32];
    _mm512_storeu_ps(tmp, reduce16(acc));
    if (MR * NR > 16) {
        __m512 rest[16];
#pragma GCC unroll 16
        for (int a = 0; a < 16; a++) rest[a] = 16 + a < MR * NR ? acc[16 + a] : _mm512_setzero_ps();
        _mm512_storeu_ps(tmp + 16, reduce16(rest));
    }
    __mmask16 rows = (__mmask16)((1u << mv) - 1);
    for (int j = 0; j < nv; j++) _mm512_mask_storeu_ps(out + (size_t)j * ldo, rows, _mm512_maskz_loadu_ps(rows, tmp + j * MR));
}

/* One token against rows streamed one after another: the hardware
 * prefetcher keeps up with one ascending stream per core but not with
 * several interleaved rows, which get about half the bandwidth. */
INLINE void dot_stream(float *out, const float *x, const char *w, size_t wrow, int m, int k,
                       TensorType type) {
    size_t es = tensor_row_bytes(type, 1);
    __mmask16 tail = (__mmask16)((1u << (k % 16)) - 1);
    for (int r = 0; r < m; r++, w += wrow) {
        stream_prefetch(w, (size_t)k * es);
        __m512 acc = _mm512_setzero_ps();
        int kk = 0;
        for (; kk + 16 <= k; kk += 16)
            acc = _mm512_fmadd_ps(load_w(w + (size_t)kk * es, type), _mm512_loadu_ps(x + kk), acc);
        if (kk < k)
            acc = _mm512_fmadd_ps(load_w_mask(w + (size_t)kk * es, type, tail), _mm512_maskz_loadu_ps(tail, x + kk), acc);
        out[r] = hsum16(acc);
    }
}

/* Decode's attention reads a head's cells in one pass, keys and then
 * values, with little work per byte, so at long contexts it waits on
 * memory: each cell's bytes are asked for 2 KB ahead (1 to 3 KB ahead do
 * alike, 8 KB less well). */
#define KV_AHEAD 2048

/* Rows in groups of 8, each group held in L1 while it meets the tokens 3
 * at a time (24 accumulators; each token vector read from L2 feeds 8
 * multiply-adds, where a 4 x 4 tile's feeds 4, in either loop order); a
 * remainder of 1 or 2 tokens uses taller tiles.  A single token against
 * long rows (a weight matrix, not a head's keys) streams. */
INLINE void dot_any(float *out, size_t ldo, const float *x, size_t ldx, const void *w, size_t ldw,
                    int n, int m, int k, TensorType type) {
    size_t wrow = tensor_row_bytes(type, ldw);
    const char *wb = w;
    int t = n / 3 * 3;
    for (int r = 0; r < m && t; r += 8)
        for (int j = 0; j < t; j += 3)
            dot_tile(out + (size_t)j * ldo + r, ldo, x + (size_t)j * ldx, ldx, wb + r * wrow, wrow, k,
                     type, 8, 3, m - r < 8 ? m - r : 8, 3);
    int nv = n - t;
    if (nv == 0) return;
    if (nv == 1 && k >= 128) {
        dot_stream(out + (size_t)t * ldo, x + (size_t)t * ldx, wb, wrow, m, k, type);
        return;
    }
    float *o = out + (size_t)t * ldo;
    const float *xt = x + (size_t)t * ldx;
    for (int r = 0; r < m;) {
        int left = m - r;
        if (nv == 1) {
            prefetch_ahead(wb + r * wrow, 16 * wrow, KV_AHEAD);
            dot_tile(o + r, ldo, xt, ldx, wb + r * wrow, wrow, k, type, 16, 1, left < 16 ? left : 16, 1);
            r += 16;
        } else if (nv == 2) {
            dot_tile(o + r, ldo, xt, ldx, wb + r * wrow, wrow, k, type, 8, 2, left < 8 ? left : 8, 2);
            r += 8;
        } else {
            dot_tile(o + r, ldo, xt, ldx, wb + r * wrow, wrow, k, type, 5, 3, left < 5 ? left : 5, 3);
            r += 5;
        }
    }
}

/* NV vectors (hs <= 64 per pass) of NT tokens; the last vector is masked
 * to the head's width. */
INLINE void mix_tile(float *out, size_t ldo, const float *p, size_t ldp, const char *v, size_t vrow,
                     int cells, TensorType type, int NT, int NV, int nt, __mmask16 last) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) acc[t][j] = _mm512_setzero_ps();
    const float *pp[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) pp[t] = p + (size_t)(t < nt ? t : nt - 1) * ldp;
    size_t es = tensor_row_bytes(type, 1);
    for (int c = 0; c < cells; c++) {
        const char *vc = v + (size_t)c * vrow;
        if (NT == 1) prefetch_ahead(vc, vrow, KV_AHEAD);
        __m512 vv[4];
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++)
        {
            vv[j] = j == NV - 1 ? load_w_mask(vc + 16 * j * es, type, last) : load_w(vc + 16 * j * es, type);
            __asm__("" : "+v"(vv[j])); /* in a register, read once (see dot_tile) */
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            __m512 pb = _mm512_set1_ps(pp[t][c]);
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) acc[t][j] = _mm512_fmadd_ps(pb, vv[j], acc[t][j]);
        }
    }
    /* t and j constant once unrolled: with t < nt as the loop's bound, GCC
     * kept acc in memory and stored all 16 vectors at every cell */
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) {
            if (t >= nt) continue;
            if (j == NV - 1) _mm512_mask_storeu_ps(out + (size_t)t * ldo + 16 * j, last, acc[t][j]);
            else _mm512_storeu_ps(out + (size_t)t * ldo + 16 * j, acc[t][j]);
        }
}

INLINE void mix_any(float *out, size_t ldo, const float *p, size_t ldp, const void *v, size_t ldv,
                    int n, int cells, int hs, TensorType type) {
    size_t vrow = tensor_row_bytes(type, ldv), es = tensor_row_bytes(type, 1);
    for (int i0 = 0; i0 < hs; i0 += 64) {
        int w = hs - i0 < 64 ? hs - i0 : 64, nv = (w + 15) / 16;
        __mmask16 last = (__mmask16)(w % 16 ? (1u << (w % 16)) - 1 : 0xFFFF);
        const char *vb = (const char *)v + (size_t)i0 * es;
        for (int t = 0; t < n; t += 4) {
            int nt = n - t < 4 ? n - t : 4;
            float *o = out + (size_t)t * ldo + i0;
            const float *pt = p + (size_t)t * ldp;
#define MIX(NT, NV) mix_tile(o, ldo, pt, ldp, vb, vrow, cells, type, NT, NV, nt, last)
            if (nt == 1) {
                if (nv == 1) MIX(1, 1); else if (nv == 2) MIX(1, 2); else if (nv == 3) MIX(1, 3); else MIX(1, 4);
            } else {
                if (nv == 1) MIX(4, 1); else if (nv == 2) MIX(4, 2); else if (nv == 3) MIX(4, 3); else MIX(4, 4);
            }
#undef MIX
        }
    }
}

/* The table's row functions (kernels_impl.h). */
KERNEL_DOT_ROWS(dot_f32, TENSOR_F32)
KERNEL_DOT_ROWS(dot_f16, TENSOR_F16)
KERNEL_DOT_ROWS(dot_bf16, TENSOR_BF16)
KERNEL_MIX_ROWS(mix_f32, TENSOR_F32)
KERNEL_MIX_ROWS(mix_f16, TENSOR_F16)

/* ---- Q8_0 ---------------------------------------------------------------- */

static void quantize_q8(int8_t *q, float *d, const float *x, int k) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int b = 0; b < k / 32; b++, x += 32, q += 32) {
        __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        __m512 amax = _mm512_max_ps(_mm512_andnot_ps(sign, x0), _mm512_andnot_ps(sign, x1));
        float m = _mm512_reduce_max_ps(amax);
        float db = m / 127.0f, id = m > 0.0f ? 127.0f / m : 0.0f;
        d[b] = db;
        __m512 vid = _mm512_set1_ps(id);
        /* nearest-even rounding; |x * id| <= 127 so the narrowing never saturates */
        __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, vid));
        __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, vid));
        _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(i0));
        _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(i1));
    }
}

/* Q8_K: one maximum per 256, each vector of 16 one sum's quants; the
 * products and nearest-even conversions are the portable path's lrintf, so
 * the bits are its own. */
static void quantize_q8k(int8_t *q, float *d, int16_t *sum, const float *x, int k) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int b = 0; b < k / QK_K; b++, x += QK_K, q += QK_K) {
        __m512 amax = _mm512_setzero_ps();
        for (int j = 0; j < QK_K / 16; j++) amax = _mm512_max_ps(amax, _mm512_andnot_ps(sign, _mm512_loadu_ps(x + 16 * j)));
        float m = _mm512_reduce_max_ps(amax);
        d[b] = m / 127.0f;
        __m512 vid = _mm512_set1_ps(m > 0.0f ? 127.0f / m : 0.0f);
        for (int j = 0; j < QK_K / 16; j++) {
            __m512i i = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * j), vid));
            _mm_storeu_si128((__m128i *)(q + 16 * j), _mm512_cvtepi32_epi8(i));
            sum[b * (QK_K / 16) + j] = (int16_t)_mm512_reduce_add_epi32(i);
        }
    }
}

/* Two blocks' quants (32 + 32 int8, 34 bytes apart) in one register. */
INLINE __m512i load_q8_pair(const uint8_t *blk) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(blk + 2));
    __m256i b = _mm256_loadu_si256((const __m256i *)(blk + 36));
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

/* Per int32 lane: the sum of 4 products of signed bytes, through the
 * unsigned-by-signed instruction: |x| times w with x's sign moved onto w
 * (|q| <= 127, so the negation never overflows). */
INLINE __m512i dot4_i8(__m512i ax, __mmask64 xneg, __m512i w) {
    __m512i sw = _mm512_mask_sub_epi8(w, xneg, _mm512_setzero_si512(), w);
#ifdef __AVX512VNNI__
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), ax, sw);
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(ax, sw), _mm512_set1_epi16(1));
#endif
}

INLINE __m512 scale_pair(const uint8_t *blk) {
    uint16_t a, b;
    memcpy(&a, blk, 2);
    memcpy(&b, blk + 34, 2);
    __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)a)),
                                        _mm_set1_epi16((short)b), 1);
    return _mm512_cvtph_ps(h);
}

/* R rows at a time share the activation loads; lanes 0-7 hold the even
 * block of a pair, 8-15 the odd one.  An odd last block goes through the
 * low half with the high half's activations zeroed. */
INLINE void dot_q8_rows(float *out, const int8_t *xq, const float *xd, const uint8_t *w,
                        size_t row_bytes, int k, int R, int rv) {
    const uint8_t *wr[4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) wr[i] = w + (size_t)(i < rv ? i : rv - 1) * row_bytes;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int a = 0; a < 16; a++) acc[a] = _mm512_setzero_ps();
    int nb = k / 32;
    for (int b = 0; b < nb; b += 2) {
        __m512i xv;
        __m512 xs;
        if (b + 1 < nb) {
            xv = _mm512_loadu_si512(xq + 32 * b);
            xs = _mm512_insertf32x8(_mm512_set1_ps(xd[b]), _mm256_set1_ps(xd[b + 1]), 1);
        } else {
            xv = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(xq + 32 * b)));
            xs = _mm512_insertf32x8(_mm512_set1_ps(xd[b]), _mm256_setzero_ps(), 1);
        }
        __mmask64 neg = _mm512_movepi8_mask(xv);
        __m512i ax = _mm512_abs_epi8(xv);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const uint8_t *blk = wr[i] + (size_t)b * 34;
            __m512i wv;
            __m512 ws;
            if (b + 1 < nb) {
                wv = load_q8_pair(blk);
                ws = scale_pair(blk);
            } else { /* the row ends after this block: do not read past it */
                wv = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(blk + 2)));
                uint16_t h;
                memcpy(&h, blk, 2);
                ws = _mm512_cvtph_ps(_mm256_set1_epi16((short)h));
            }
            __m512 prod = _mm512_cvtepi32_ps(dot4_i8(ax, neg, wv));
            acc[i] = _mm512_fmadd_ps(prod, _mm512_mul_ps(ws, xs), acc[i]);
        }
    }
    float tmp[16];
    _mm512_storeu_ps(tmp, reduce16(acc));
    for (int i = 0; i < rv; i++) out[i] = tmp[i];
}

static void dot_q8_0(float *out, const int8_t *xq, const float *xd, const void *w, size_t row_bytes,
                     int m, int k) {
    /* one row at a time, for the prefetcher (see dot_stream) */
    for (int r = 0; r < m; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * row_bytes;
        stream_prefetch(row, row_bytes);
        dot_q8_rows(out + r, xq, xd, row, row_bytes, k, 1, 1);
    }
}

/* ---- conversions ----------------------------------------------------------- */

/* f16 and bf16 */
INLINE void to_f32_any(float *dst, const void *src, size_t n, TensorType type) {
    const uint8_t *p = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_w(p + 2 * i, type));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(dst + i, m, load_w_mask(p + 2 * i, type, m));
    }
}
KERNEL_TO_F32(f16_to_f32, TENSOR_F16)
KERNEL_TO_F32(bf16_to_f32, TENSOR_BF16)

static void q8_0_to_f32(float *dst, const void *src, size_t n) {
    const uint8_t *p = src;
    for (size_t b = 0; b < n / 32; b++, p += 34) {
        uint16_t h;
        memcpy(&h, p, 2);
        __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16((short)h));
        __m128i q0 = _mm_loadu_si128((const __m128i *)(p + 2));
        __m128i q1 = _mm_loadu_si128((const __m128i *)(p + 18));
        _mm512_storeu_ps(dst + 32 * b, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0))));
        _mm512_storeu_ps(dst + 32 * b + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1))));
    }
}

static void to_f16(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_mask_storeu_epi16(dst + i, m, h);
    }
}

/* ---- activations ------------------------------------------------------------ */

/* e^x within 2 ulp (Cephes' polynomial on [-ln2/2, ln2/2], scaled by 2^n);
 * exactly 0 below -87.3 (where e^x leaves the normal floats), so masked
 * scores (-inf) weigh nothing. */
INLINE __m512 exp16(__m512 x) {
    __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33654f), _CMP_GE_OQ);
    x = _mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps(live, p, n);
}

static float exp_sum(float *x, int n, float max) {
    __m512 mx = _mm512_set1_ps(max), sum = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mx));
        _mm512_storeu_ps(x + i, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (i < n) {
        __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
        __m512 e = _mm512_maskz_mov_ps(tail, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), mx)));
        _mm512_mask_storeu_ps(x + i, tail, e);
        sum = _mm512_add_ps(sum, e);
    }
    return hsum16(sum);
}

static float max_of(const float *x, int n) {
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
    if (i < n) {
        __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
        vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_maskz_loadu_ps(tail, x + i));
    }
    return _mm512_reduce_max_ps(vmax);
}

static void softmax(float *x, int n) {
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
    __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    if (i < n) vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_maskz_loadu_ps(tail, x + i));
    __m512 vs = _mm512_set1_ps(exp_sum(x, n, _mm512_reduce_max_ps(vmax)));
    for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_div_ps(_mm512_loadu_ps(x + i), vs));
    if (i < n) _mm512_mask_storeu_ps(x + i, tail, _mm512_div_ps(_mm512_maskz_loadu_ps(tail, x + i), vs));
}

static float sum_exp(const float *x, int n, float *max) {
    __m512 vmax = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
    __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    if (i < n) vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_maskz_loadu_ps(tail, x + i));
    float m = *max = _mm512_reduce_max_ps(vmax);
    if (m == INFINITY || m == -INFINITY) return m == INFINITY ? 1.0f : 0.0f;
    __m512 mx = _mm512_set1_ps(m);
    for (i = 0; i + 16 <= n; i += 16) sum = _mm512_add_ps(sum, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mx)));
    if (i < n) sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(tail, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), mx))));
    return hsum16(sum);
}

INLINE __m512 silu_mul(__m512 h, __m512 g) {
    __m512 one = _mm512_set1_ps(1.0f);
    __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), h));
    return _mm512_mul_ps(_mm512_div_ps(h, _mm512_add_ps(one, e)), g);
}

static void swiglu(float *h, const float *g, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(h + i, silu_mul(_mm512_loadu_ps(h + i), _mm512_loadu_ps(g + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(h + i, m, silu_mul(_mm512_maskz_loadu_ps(m, h + i), _mm512_maskz_loadu_ps(m, g + i)));
    }
}

/* 0.5 v (1 + tanh u) = v (1 - 1 / (e^2u + 1)) */
INLINE __m512 gelu16(__m512 v) {
    const __m512 k = _mm512_set1_ps(0.7978845608028654f), c = _mm512_set1_ps(0.044715f);
    __m512 u = _mm512_mul_ps(k, _mm512_fmadd_ps(_mm512_mul_ps(c, v), _mm512_mul_ps(v, v), v));
    __m512 e = exp16(_mm512_add_ps(u, u));
    __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_mul_ps(v, _mm512_sub_ps(one, _mm512_div_ps(one, _mm512_add_ps(e, one))));
}

static void gelu(float *h, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(h + i, gelu16(_mm512_loadu_ps(h + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(h + i, m, gelu16(_mm512_maskz_loadu_ps(m, h + i)));
    }
}

/* ---- block-quantized types (kernels_quant.h) ----------------------------------- */

/* 8 int32 lanes, lane i the sum of q . x over bytes 4i..4i+3 (lanes 0-3 the
 * first 16 bytes): |q| times x with q's sign moved onto x (|q| <= 32, so
 * the pairs the 16-bit step adds stay below 2^13). */
INLINE __m256i quant_dot4(__m256i vq, __m256i vx) {
    __m256i aq = _mm256_sign_epi8(vq, vq), sx = _mm256_sign_epi8(vx, vq);
#ifdef __AVX512VNNI__
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), aq, sx);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(aq, sx), _mm256_set1_epi16(1));
#endif
}

/* Q4_0 two blocks to a register, lanes 0-7 the even block of a pair, 8-15
 * the odd one: the nibbles as they are (0..15, unsigned, so the
 * unsigned-by-signed product needs no sign moved) against the
 * activations, less 8 times the activations' sum. */
static void dot_q4_0_pairs(float *out, const int8_t *xq, const float *xd, const void *w, size_t row_bytes,
                           int m, int k) {
    const __m256i low = _mm256_set1_epi8(0xF);
    const __m512i eight = _mm512_set1_epi8(8);
    int nb = k / 32;
    for (int r = 0; r < m; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * row_bytes;
        stream_prefetch(row, row_bytes);
        __m512 acc = _mm512_setzero_ps();
        for (int b = 0; b < nb; b += 2) {
            const uint8_t *blk = row + (size_t)b * sizeof(BlockQ4_0);
            int pair = b + 1 < nb; /* else the row ends after this block: do not read past it */
            __m128i raw0 = _mm_loadu_si128((const __m128i *)(blk + 2));
            __m256i raw = pair ? _mm256_inserti128_si256(_mm256_castsi128_si256(raw0),
                                                         _mm_loadu_si128((const __m128i *)(blk + 20)), 1)
                               : _mm256_zextsi128_si256(raw0);
            __m256i lo = _mm256_and_si256(raw, low), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
            /* [lo0 lo1 hi0 hi1] -> [lo0 hi0 lo1 hi1]: each block's weights 0-15, 16-31 */
            __m512i q = _mm512_shuffle_i64x2(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                                             _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                                             _MM_SHUFFLE(3, 1, 2, 0));
            __m512i x = pair ? _mm512_loadu_si512(xq + 32 * b)
                             : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(xq + 32 * b)));
            __m512i p = _mm512_sub_epi32(dot4_u8(q, x), dot4_u8(eight, x));
            uint16_t h0, h1 = 0;
            memcpy(&h0, blk, 2);
            if (pair) memcpy(&h1, blk + 18, 2);
            __m512 ws = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)h0)),
                                                                _mm_set1_epi16((short)h1), 1));
            __m512 xs = _mm512_insertf32x8(_mm512_set1_ps(xd[b]), _mm256_set1_ps(pair ? xd[b + 1] : 0.0f), 1);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(ws, xs), acc);
        }
        out[r] = _mm512_reduce_add_ps(acc);
    }
}

/* MXFP4 as dot_q4_0_pairs: the codes through a byte shuffle to u = 12 +
 * the doubled E2M1 value (quant_mxfp4_u: 0..24, unsigned like Q4_0's
 * nibbles), less 12 times the activations' sum; the scales are E8M0 half
 * scales. */
static void dot_mxfp4_pairs(float *out, const int8_t *xq, const float *xd, const void *w, size_t row_bytes,
                            int m, int k) {
    const __m256i low = _mm256_set1_epi8(0xF);
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)quant_mxfp4_u));
    const __m512i twelve = _mm512_set1_epi8(12);
    int nb = k / 32;
    for (int r = 0; r < m; r++) {
        const BlockMXFP4 *blk = (const BlockMXFP4 *)((const uint8_t *)w + (size_t)r * row_bytes);
        stream_prefetch(blk, row_bytes);
        __m512 acc = _mm512_setzero_ps();
        for (int b = 0; b < nb; b += 2) {
            int pair = b + 1 < nb; /* else the row ends after this block: do not read past it */
            __m128i raw0 = _mm_loadu_si128((const __m128i *)blk[b].qs);
            __m256i raw = pair ? _mm256_inserti128_si256(_mm256_castsi128_si256(raw0),
                                                         _mm_loadu_si128((const __m128i *)blk[b + 1].qs), 1)
                               : _mm256_zextsi128_si256(raw0);
            __m256i lo = _mm256_and_si256(raw, low), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
            /* [lo0 lo1 hi0 hi1] -> [lo0 hi0 lo1 hi1], then the codes to u */
            __m512i codes = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            __m512i q = _mm512_shuffle_epi8(lut, _mm512_shuffle_i64x2(codes, codes, _MM_SHUFFLE(3, 1, 2, 0)));
            __m512i x = pair ? _mm512_loadu_si512(xq + 32 * b)
                             : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(xq + 32 * b)));
            __m512i p = _mm512_sub_epi32(dot4_u8(q, x), dot4_u8(twelve, x));
            __m512 ws = _mm512_insertf32x8(_mm512_set1_ps(quant_e8m0_half(blk[b].e) * xd[b]),
                                           _mm256_set1_ps(pair ? quant_e8m0_half(blk[b + 1].e) * xd[b + 1] : 0.0f), 1);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), ws, acc);
        }
        out[r] = _mm512_reduce_add_ps(acc);
    }
}

#define QUANT_PACKED_Q4_0 avx512_packed_q4_0 /* kernels_avx512_packed.c */
#define QUANT_PACKED_MXFP4 avx512_packed_mxfp4
#define QUANT_PACKED_Q4_K avx512_packed_q4_k
#define QUANT_PACKED_Q5_K avx512_packed_q5_k
#define QUANT_PACKED_Q6_K avx512_packed_q6_k

#define QUANT_AVX256 /* kernels_quant.h's 256-bit kernels, on quant_dot4 */
#define QUANT_DOT_Q4_0 dot_q4_0_pairs
#define QUANT_DOT_MXFP4 dot_mxfp4_pairs
#include "model/kernels_quant.h"

/* ---- the FMA peak (KernelPath.fma_peak) ------------------------------------ */

/* 12 independent chains cover 2 units x 4 cycles of latency. */
static double fma_peak(long rounds) {
    __m512 a[12];
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps(1.0f + (float)i);
    for (long r = 0; r < rounds; r++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
#pragma GCC unroll 12
    for (int i = 1; i < 12; i++) a[0] = _mm512_add_ps(a[0], a[i]);
    volatile float sink = _mm512_reduce_add_ps(a[0]); /* the chains are not dead code */
    (void)sink;
    return 2.0 * 16 * 12 * (double)rounds;
}

static const KernelPath path = {
    .name = "avx512",
    .type = {
        [TENSOR_F32] = {.dot = dot_f32, .dot_packed = avx512_packed_f32, .gemm_packed = avx512_gemm_packed_f32,
                        .mix = mix_f32, .to_f32 = kernel_copy_f32},
        [TENSOR_F16] = {.dot = dot_f16, .dot_packed = avx512_packed_f16, .gemm_packed = avx512_gemm_packed_f16,
                        .mix = mix_f16, .to_f32 = f16_to_f32},
        [TENSOR_BF16] = {.dot = dot_bf16, .to_f32 = bf16_to_f32},
        [TENSOR_Q8_0] = {.dot_q8 = dot_q8_0, .dot_packed = avx512_packed_q8_0, .to_f32 = q8_0_to_f32},
        KERNEL_QUANT_TYPES,
    },
#ifdef KERNELS_AMX
    .bf16_amx = {amx_bf16_tiles, amx_gemm_bf16, AMX_BF16_ROWS}, /* kernels_amx.c */
#endif
#ifdef KERNELS_BF16_PAIRS
    .bf16_pairs = {pairs_bf16_round, pairs_gemm_bf16, PAIRS_BF16_ROWS}, /* kernels_bf16.c */
#endif
#ifdef KERNELS_AMX_INT8
    .gemm_q8_amx = amx_gemm_q8, /* kernels_amx.c */
#endif
#ifdef KERNELS_AVX512_INT8 /* kernels_avx512_int8.c; without VNNI, prefill keeps f32 panels (kernels_int8_prefill) */
    .gemm_q8 = avx512_gemm_q8, .unit_fill_q8_0 = avx512_unit_fill_q8_0,
    .unit_fill_packed_q8_0 = avx512_unit_fill_packed_q8_0,
#endif
    .quantize_q8 = quantize_q8, .quantize_q8k = quantize_q8k, .to_f16 = to_f16,
    .softmax = softmax,
    .sum_exp = sum_exp, .exp_sum = exp_sum, .max_of = max_of, .swiglu = swiglu, .gelu = gelu, .fma_peak = fma_peak,
};
const KernelPath *const kernels_avx512 = &path;
#else
const KernelPath *const kernels_avx512 = NULL;
#endif
