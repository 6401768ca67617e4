/* AVX2 + FMA + F16C path: 8 float lanes.  Dot products sum 8-lane
 * partials over k (the tail through a masked load into the low lanes) and
 * reduce the lanes with the tree ((l + l+4) + (l+2 + l+6)), then the two
 * halves — the portable path's tree; reduce8 does it for 8 outputs at
 * once. */
#include "model/kernels_impl.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

/* Lane masks for the first 0..8 lanes. */
static const int32_t TAIL[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
INLINE __m256i tail_mask(int k) { return _mm256_loadu_si256((const __m256i *)(TAIL + 8 - k)); }

INLINE __m256 load_w(const void *p, TensorType type) {
    if (type == TENSOR_F16) return _mm256_cvtph_ps(_mm_loadu_si128(p));
    if (type == TENSOR_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(p)), 16));
    return _mm256_loadu_ps(p);
}

/* The first `k` (< 8) elements; 16-bit types are copied out first, as AVX2
 * has no 16-bit masked load. */
INLINE __m256 load_w_part(const void *p, TensorType type, int k) {
    if (type == TENSOR_F32) return _mm256_maskload_ps(p, tail_mask(k));
    uint16_t h[8] = {0};
    memcpy(h, p, (size_t)k * 2);
    return load_w(h, type);
}

/* Element e of the result is the lane sum of b[e]. */
INLINE __m256 reduce8(const __m256 *b) {
    __m256 c[4], d[2];
    /* B_i = b[4(i%2) + i/2] leaves the sums in natural order. */
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        __m256 lo = b[4 * ((2 * p) % 2) + (2 * p) / 2], hi = b[4 * ((2 * p + 1) % 2) + (2 * p + 1) / 2];
        c[p] = _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
    }
#pragma GCC unroll 2
    for (int p = 0; p < 2; p++)
        d[p] = _mm256_add_ps(_mm256_shuffle_ps(c[2 * p], c[2 * p + 1], 0x44),
                             _mm256_shuffle_ps(c[2 * p], c[2 * p + 1], 0xEE));
    return _mm256_add_ps(_mm256_shuffle_ps(d[0], d[1], 0x88), _mm256_shuffle_ps(d[0], d[1], 0xDD));
}

INLINE float hsum8(__m256 v) {
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

INLINE void dot_tile(float *out, size_t ldo, const float *x, size_t ldx, const char *w,
                     size_t wrow, int k, TensorType type, int MR, int NR, int mv, int nv) {
    const float *xp[2];
    const char *wp[8];
    size_t es = tensor_row_bytes(type, 1);
#pragma GCC unroll 2
    for (int j = 0; j < NR; j++) xp[j] = x + (size_t)(j < nv ? j : nv - 1) * ldx;
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) wp[i] = w + (size_t)(i < mv ? i : mv - 1) * wrow;
    __m256 acc[8];
#pragma GCC unroll 8
    for (int a = 0; a < 8; a++) acc[a] = _mm256_setzero_ps();
    int kk = 0;
    for (; kk + 8 <= k; kk += 8) {
        __m256 xv[2];
#pragma GCC unroll 2
        for (int j = 0; j < NR; j++) {
            xv[j] = _mm256_loadu_ps(xp[j] + kk);
            /* Keep every operand in a register: GCC would otherwise fold the
             * loads into the multiply-adds and read each vector repeatedly. */
            __asm__("" : "+v"(xv[j]));
        }
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m256 wv = load_w(wp[i] + (size_t)kk * es, type);
            __asm__("" : "+v"(wv));
#pragma GCC unroll 2
            for (int j = 0; j < NR; j++) acc[j * MR + i] = _mm256_fmadd_ps(wv, xv[j], acc[j * MR + i]);
        }
    }
    if (kk < k) {
        __m256 xv[2];
#pragma GCC unroll 2
        for (int j = 0; j < NR; j++) xv[j] = _mm256_maskload_ps(xp[j] + kk, tail_mask(k - kk));
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m256 wv = load_w_part(wp[i] + (size_t)kk * es, type, k - kk);
#pragma GCC unroll 2
            for (int j = 0; j < NR; j++) acc[j * MR + i] = _mm256_fmadd_ps(wv, xv[j], acc[j * MR + i]);
        }
    }
    __m256 sums = reduce8(acc);
    if (MR == 8 && mv == 8) {
        _mm256_storeu_ps(out, sums);
        return;
    }
    float tmp[8];
    _mm256_storeu_ps(tmp, sums);
    for (int j = 0; j < nv; j++)
        for (int i = 0; i < mv; i++) out[(size_t)j * ldo + i] = tmp[j * MR + i];
}

/* One token against rows streamed one after another (see the AVX-512 path). */
INLINE void dot_stream(float *out, const float *x, const char *w, size_t wrow, int m, int k,
                       TensorType type) {
    size_t es = tensor_row_bytes(type, 1);
    for (int r = 0; r < m; r++, w += wrow) {
        __m256 acc = _mm256_setzero_ps();
        int kk = 0;
        for (; kk + 8 <= k; kk += 8)
            acc = _mm256_fmadd_ps(load_w(w + (size_t)kk * es, type), _mm256_loadu_ps(x + kk), acc);
        if (kk < k)
            acc = _mm256_fmadd_ps(load_w_part(w + (size_t)kk * es, type, k - kk),
                                  _mm256_maskload_ps(x + kk, tail_mask(k - kk)), acc);
        out[r] = hsum8(acc);
    }
}

INLINE void dot_any(float *out, size_t ldo, const float *x, size_t ldx, const void *w, size_t ldw,
                    int n, int m, int k, TensorType type) {
    size_t wrow = tensor_row_bytes(type, ldw);
    const char *wb = w;
    int t = 0;
    for (; t + 2 <= n; t += 2)
        for (int r = 0; r < m; r += 4)
            dot_tile(out + (size_t)t * ldo + r, ldo, x + (size_t)t * ldx, ldx, wb + r * wrow, wrow, k,
                     type, 4, 2, m - r < 4 ? m - r : 4, 2);
    if (t == n) return;
    if (k >= 128) {
        dot_stream(out + (size_t)t * ldo, x + (size_t)t * ldx, wb, wrow, m, k, type);
        return;
    }
    for (int r = 0; r < m; r += 8)
        dot_tile(out + (size_t)t * ldo + r, ldo, x + (size_t)t * ldx, ldx, wb + r * wrow, wrow, k, type,
                 8, 1, m - r < 8 ? m - r : 8, 1);
}

/* NV vectors (hs <= 32 per pass) of NT tokens. */
INLINE void mix_tile(float *out, size_t ldo, const float *p, size_t ldp, const char *v, size_t vrow,
                     int cells, TensorType type, int NT, int NV, int nt, int last) {
    __m256 acc[2][4];
#pragma GCC unroll 2
    for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) acc[t][j] = _mm256_setzero_ps();
    const float *pp[2];
#pragma GCC unroll 2
    for (int t = 0; t < NT; t++) pp[t] = p + (size_t)(t < nt ? t : nt - 1) * ldp;
    size_t es = tensor_row_bytes(type, 1);
    for (int c = 0; c < cells; c++) {
        const char *vc = v + (size_t)c * vrow;
        __m256 vv[4];
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++)
        {
            vv[j] = j == NV - 1 && last < 8 ? load_w_part(vc + 8 * j * es, type, last)
                                            : load_w(vc + 8 * j * es, type);
            __asm__("" : "+v"(vv[j])); /* in a register, read once (see dot_tile) */
        }
#pragma GCC unroll 2
        for (int t = 0; t < NT; t++) {
            __m256 pb = _mm256_set1_ps(pp[t][c]);
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) acc[t][j] = _mm256_fmadd_ps(pb, vv[j], acc[t][j]);
        }
    }
    for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) {
            float *o = out + (size_t)t * ldo + 8 * j;
            if (j == NV - 1 && last < 8) _mm256_maskstore_ps(o, tail_mask(last), acc[t][j]);
            else _mm256_storeu_ps(o, acc[t][j]);
        }
}

INLINE void mix_any(float *out, size_t ldo, const float *p, size_t ldp, const void *v, size_t ldv,
                    int n, int cells, int hs, TensorType type) {
    size_t vrow = tensor_row_bytes(type, ldv), es = tensor_row_bytes(type, 1);
    for (int i0 = 0; i0 < hs; i0 += 32) {
        int w = hs - i0 < 32 ? hs - i0 : 32, nv = (w + 7) / 8, last = w - 8 * (nv - 1);
        const char *vb = (const char *)v + (size_t)i0 * es;
        for (int t = 0; t < n; t += 2) {
            int nt = n - t < 2 ? n - t : 2;
            float *o = out + (size_t)t * ldo + i0;
            const float *pt = p + (size_t)t * ldp;
#define MIX(NT, NV) mix_tile(o, ldo, pt, ldp, vb, vrow, cells, type, NT, NV, nt, last)
            if (nt == 1) {
                if (nv == 1) MIX(1, 1); else if (nv == 2) MIX(1, 2); else if (nv == 3) MIX(1, 3); else MIX(1, 4);
            } else {
                if (nv == 1) MIX(2, 1); else if (nv == 2) MIX(2, 2); else if (nv == 3) MIX(2, 3); else MIX(2, 4);
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
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int b = 0; b < k / 32; b++, x += 32, q += 32) {
        __m256 v[4], amax = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(x + 8 * j);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[j]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        float m = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        d[b] = m / 127.0f;
        __m256 vid = _mm256_set1_ps(m > 0.0f ? 127.0f / m : 0.0f);
        __m256i i[4];
        for (int j = 0; j < 4; j++) i[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
        /* pack 32-bit to 8-bit; the packs interleave 128-bit lanes, undone by the permute */
        __m256i s = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
        s = _mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)q, s);
    }
}

/* Q8_K: one maximum per 256, two vectors of 8 per sum of 16; the products
 * and nearest-even conversions are the portable path's lrintf, so the bits
 * are its own. */
static void quantize_q8k(int8_t *q, float *d, int16_t *sum, const float *x, int k) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int b = 0; b < k / QK_K; b++, x += QK_K, q += QK_K) {
        __m256 amax = _mm256_setzero_ps();
        for (int j = 0; j < QK_K / 8; j++) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * j)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        float m = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        d[b] = m / 127.0f;
        __m256 vid = _mm256_set1_ps(m > 0.0f ? 127.0f / m : 0.0f);
        for (int j = 0; j < QK_K / 16; j++) {
            __m256i lo = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * j), vid));
            __m256i hi = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * j + 8), vid));
            /* 16 int32 to int8, in order: the packs interleave the 128-bit lanes */
            __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xd8);
            __m128i p8 = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
            _mm_storeu_si128((__m128i *)(q + 16 * j), p8);
            __m256i s8 = _mm256_add_epi32(lo, hi);
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
            sum[b * (QK_K / 16) + j] = (int16_t)_mm_cvtsi128_si32(s4);
        }
    }
}

INLINE __m256 dot32_i8(__m256i x, __m256i w) {
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(w, x));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* One row at a time, for the prefetcher (see dot_stream). */
static void dot_q8_0(float *out, const int8_t *xq, const float *xd, const void *w, size_t row_bytes,
                     int m, int k) {
    for (int r = 0; r < m; r++) {
        __m256 acc = _mm256_setzero_ps();
        const uint8_t *blk = (const uint8_t *)w + (size_t)r * row_bytes;
        stream_prefetch(blk, row_bytes);
        for (int b = 0; b < k / 32; b++, blk += 34) {
            uint16_t h;
            memcpy(&h, blk, 2);
            __m256 s = _mm256_set1_ps(_cvtsh_ss(h) * xd[b]);
            __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + 32 * b));
            __m256i wv = _mm256_loadu_si256((const __m256i *)(blk + 2));
            acc = _mm256_fmadd_ps(dot32_i8(xv, wv), s, acc);
        }
        out[r] = hsum8(acc);
    }
}

/* ---- conversions ----------------------------------------------------------- */

/* f16 and bf16 */
INLINE void to_f32_any(float *dst, const void *src, size_t n, TensorType type) {
    const uint8_t *p = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_w(p + 2 * i, type));
    if (i < n) {
        float tmp[8];
        _mm256_storeu_ps(tmp, load_w_part(p + 2 * i, type, (int)(n - i)));
        memcpy(dst + i, tmp, (n - i) * sizeof(float));
    }
}
KERNEL_TO_F32(f16_to_f32, TENSOR_F16)
KERNEL_TO_F32(bf16_to_f32, TENSOR_BF16)

static void q8_0_to_f32(float *dst, const void *src, size_t n) {
    const uint8_t *p = src;
    for (size_t b = 0; b < n / 32; b++, p += 34) {
        uint16_t h;
        memcpy(&h, p, 2);
        __m256 d = _mm256_set1_ps(_cvtsh_ss(h));
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 2 + 8 * j)));
            _mm256_storeu_ps(dst + 32 * b + 8 * j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
        }
    }
}

static void to_f16(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        uint16_t tmp[8];
        __m256 v = _mm256_maskload_ps(src + i, tail_mask((int)(n - i)));
        _mm_storeu_si128((__m128i *)tmp, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        memcpy(dst + i, tmp, (n - i) * 2);
    }
}

/* ---- activations ------------------------------------------------------------ */

/* e^x as in the AVX-512 path, with 2^n built in the exponent field. */
INLINE __m256 exp8(__m256 x) {
    __m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_GE_OQ);
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f)), _mm256_set1_ps(-87.33654f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* n in [-126, 127]: 2^n is a normal float */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), live);
}

static float max_of(const float *x, int n) {
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
    float lanes[8], m = -INFINITY;
    _mm256_storeu_ps(lanes, vmax);
    for (int l = 0; l < 8; l++) m = lanes[l] > m ? lanes[l] : m;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static float exp_sum(float *x, int n, float max) {
    __m256 vm = _mm256_set1_ps(max), sum = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (i < n) {
        __m256i m = tail_mask(n - i);
        __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vm)), _mm256_castsi256_ps(m));
        _mm256_maskstore_ps(x + i, m, e);
        sum = _mm256_add_ps(sum, e);
    }
    return hsum8(sum);
}

static void softmax(float *x, int n) {
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
    float mx = -INFINITY;
    float lanes[8];
    _mm256_storeu_ps(lanes, vmax);
    for (int l = 0; l < 8; l++) mx = lanes[l] > mx ? lanes[l] : mx;
    for (int j = i; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    __m256 vs = _mm256_set1_ps(exp_sum(x, n, mx));
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; i++) x[i] /= _mm256_cvtss_f32(vs);
}

static float sum_exp(const float *x, int n, float *max) {
    float m = -INFINITY;
    for (int j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    *max = m;
    if (m == INFINITY || m == -INFINITY) return m == INFINITY ? 1.0f : 0.0f;
    __m256 vm = _mm256_set1_ps(m), sum = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) sum = _mm256_add_ps(sum, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
    if (i < n) {
        __m256i mask = tail_mask(n - i);
        sum = _mm256_add_ps(sum, _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), vm)),
                                               _mm256_castsi256_ps(mask)));
    }
    return hsum8(sum);
}

INLINE __m256 silu_mul(__m256 h, __m256 g) {
    __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), h));
    return _mm256_mul_ps(_mm256_div_ps(h, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), g);
}

static void swiglu(float *h, const float *g, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(h + i, silu_mul(_mm256_loadu_ps(h + i), _mm256_loadu_ps(g + i)));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(h + i, m, silu_mul(_mm256_maskload_ps(h + i, m), _mm256_maskload_ps(g + i, m)));
    }
}

INLINE __m256 gelu8(__m256 v) {
    const __m256 k = _mm256_set1_ps(0.7978845608028654f), c = _mm256_set1_ps(0.044715f);
    __m256 u = _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(c, v), _mm256_mul_ps(v, v), v));
    __m256 e = exp8(_mm256_add_ps(u, u)), one = _mm256_set1_ps(1.0f);
    return _mm256_mul_ps(v, _mm256_sub_ps(one, _mm256_div_ps(one, _mm256_add_ps(e, one))));
}

static void gelu(float *h, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(h + i, gelu8(_mm256_loadu_ps(h + i)));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(h + i, m, gelu8(_mm256_maskload_ps(h + i, m)));
    }
}

/* ---- block-quantized types (kernels_quant.h) ----------------------------------- */

/* 8 int32 lanes, lane i the sum of q . x over bytes 4i..4i+3 (lanes 0-3 the
 * first 16 bytes): |q| times x with q's sign moved onto x (|q| <= 32, so
 * the pairs the 16-bit step adds stay below 2^13). */
INLINE __m256i quant_dot4(__m256i vq, __m256i vx) {
    __m256i aq = _mm256_sign_epi8(vq, vq), sx = _mm256_sign_epi8(vx, vq);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(aq, sx), _mm256_set1_epi16(1));
}

#define QUANT_AVX256 /* kernels_quant.h's 256-bit kernels, on quant_dot4 */
#include "model/kernels_quant.h"

/* ---- the FMA peak (KernelPath.fma_peak) ------------------------------------ */

/* 12 independent chains cover 2 units x 4 cycles of latency. */
static double fma_peak(long rounds) {
    __m256 a[12];
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps(1.0f + (float)i);
    for (long r = 0; r < rounds; r++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
#pragma GCC unroll 12
    for (int i = 1; i < 12; i++) a[0] = _mm256_add_ps(a[0], a[i]);
    float lanes[8];
    _mm256_storeu_ps(lanes, a[0]);
    volatile float sink = lanes[0]; /* the chains are not dead code */
    (void)sink;
    return 2.0 * 8 * 12 * (double)rounds;
}

static const KernelPath path = {
    .name = "avx2",
    .type = {
        [TENSOR_F32] = {.dot = dot_f32, .mix = mix_f32, .to_f32 = kernel_copy_f32},
        [TENSOR_F16] = {.dot = dot_f16, .mix = mix_f16, .to_f32 = f16_to_f32},
        [TENSOR_BF16] = {.dot = dot_bf16, .to_f32 = bf16_to_f32},
        [TENSOR_Q8_0] = {.dot_q8 = dot_q8_0, .to_f32 = q8_0_to_f32},
        KERNEL_QUANT_TYPES,
    },
    .quantize_q8 = quantize_q8, .quantize_q8k = quantize_q8k, .to_f16 = to_f16, .softmax = softmax, .sum_exp = sum_exp, .exp_sum = exp_sum, .max_of = max_of,
    .swiglu = swiglu, .gelu = gelu, .fma_peak = fma_peak,
};
const KernelPath *const kernels_avx2 = &path;
#else
const KernelPath *const kernels_avx2 = NULL;
#endif
