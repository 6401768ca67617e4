/* The AVX-512 path's int8 prefill (kernels_int8_prefill): block-quantized
 * weights unpacked into units of 32 rows (kernels_impl.h) against
 * activations quantized to Q8, the products exact int32 sums on VNNI's
 * dpbusd; and Q8_0's rows and packed groups put into units a vector at a
 * time.  In builds that target AVX512-VNNI (KERNELS_AVX512_INT8); without
 * it the path's table has no gemm_q8 and prefill keeps f32 panels. */
#include "model/kernels_avx512.h"

#ifdef KERNELS_AVX512_INT8
#include <string.h>

/* Prefill's integer product (kernels_impl.h): NT tokens against the
 * unit's two groups of 16 rows.  Per 4 weights, each token's 4 quants are
 * broadcast against the interleaved u (dpbusd: unsigned by signed, exact
 * in int32); per half block, off times the activations' sum is taken off
 * in int32 and the lanes (one per row) are scaled into f32 accumulators. */
INLINE void gemm_q8_tile(float *out, size_t ldo, const QuantUnit *w, int rows, const QuantActs *x,
                         int t, int NT, int OFF, int MIN, int SPLIT) {
    int k = x->k;
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xs[4];
    __m512 acc[2][4];
#pragma GCC unroll 4
    for (int j = 0; j < NT; j++) {
        xq[j] = x->q + (size_t)(t + j) * k;
        xd[j] = x->d + (size_t)(t + j) * (k / 32);
        xs[j] = x->sum + (size_t)(t + j) * (k / 16);
        acc[0][j] = acc[1][j] = _mm512_setzero_ps();
    }
    for (int b = 0; b < w->nb; b++) {
        const uint8_t *wq = w->q + (size_t)b * 1024;
        for (int h = 0; h < (SPLIT ? 2 : 1); h++) {
            __m512i ia[2][4];
#pragma GCC unroll 4
            for (int j = 0; j < NT; j++) ia[0][j] = ia[1][j] = _mm512_setzero_si512();
            for (int s = SPLIT ? 4 * h : 0; s < (SPLIT ? 4 * h + 4 : 8); s++) {
                __m512i w0 = _mm512_loadu_si512(wq + 64 * s), w1 = _mm512_loadu_si512(wq + 512 + 64 * s);
#pragma GCC unroll 4
                for (int j = 0; j < NT; j++) {
                    int32_t v;
                    memcpy(&v, xq[j] + 32 * b + 4 * s, 4);
                    __m512i xb = _mm512_set1_epi32(v);
                    ia[0][j] = _mm512_dpbusd_epi32(ia[0][j], w0, xb);
                    ia[1][j] = _mm512_dpbusd_epi32(ia[1][j], w1, xb);
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < NT; j++) {
                int32_t sum = SPLIT ? xs[j][2 * b + h] : xs[j][2 * b] + xs[j][2 * b + 1];
                __m512 xdv = _mm512_set1_ps(xd[j][b]);
#pragma GCC unroll 2
                for (int g = 0; g < 2; g++) {
                    __m512i v = ia[g][j];
                    if (OFF) v = _mm512_sub_epi32(v, _mm512_set1_epi32(w->off * sum));
                    size_t at = ((size_t)(b * 2 + g) * 2 + h) * 16;
                    acc[g][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(_mm512_loadu_ps(w->d + at), xdv),
                                                acc[g][j]);
                    if (MIN)
                        acc[g][j] = _mm512_fmadd_ps(_mm512_loadu_ps(w->m + at),
                                                    _mm512_set1_ps(xd[j][b] * (float)sum), acc[g][j]);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < NT; j++)
        for (int g = 0; g < 2 && rows > 16 * g; g++) {
            __mmask16 m = rows - 16 * g >= 16 ? 0xFFFF : (__mmask16)((1u << (rows - 16 * g)) - 1);
            _mm512_mask_storeu_ps(out + (size_t)(t + j) * ldo + 16 * g, m, acc[g][j]);
        }
}

#define GEMM_Q8_KIND(name, OFF, MIN, SPLIT)                                                       \
    static void name(float *out, size_t ldo, const QuantUnit *w, int rows, const QuantActs *x,    \
                     int t0, int t1) {                                                            \
        int t = t0;                                                                               \
        for (; t + 4 <= t1; t += 4) gemm_q8_tile(out, ldo, w, rows, x, t, 4, OFF, MIN, SPLIT);    \
        switch (t1 - t) {                                                                         \
        case 3: gemm_q8_tile(out, ldo, w, rows, x, t, 3, OFF, MIN, SPLIT); break;                 \
        case 2: gemm_q8_tile(out, ldo, w, rows, x, t, 2, OFF, MIN, SPLIT); break;                 \
        case 1: gemm_q8_tile(out, ldo, w, rows, x, t, 1, OFF, MIN, SPLIT); break;                 \
        }                                                                                         \
    }
GEMM_Q8_KIND(gemm_q8_centred, 1, 0, 0)       /* Q8_0, Q4_0, Q5_0, MXFP4 */
GEMM_Q8_KIND(gemm_q8_min, 0, 1, 0)           /* Q4_1, Q5_1, Q4_K, Q5_K */
GEMM_Q8_KIND(gemm_q8_split_min, 0, 1, 1)     /* Q2_K */
GEMM_Q8_KIND(gemm_q8_split_centred, 1, 0, 1) /* Q3_K, Q6_K */

void avx512_gemm_q8(float *out, size_t ldo, const QuantUnit *w, int rows, const QuantActs *x, int t0,
                    int t1) {
    if (w->split)
        (w->has_min ? gemm_q8_split_min : gemm_q8_split_centred)(out, ldo, w, rows, x, t0, t1);
    else
        (w->has_min ? gemm_q8_min : gemm_q8_centred)(out, ldo, w, rows, x, t0, t1);
}

/* Q8_0 rows into a unit (quant_unit_fill's bytes, scales and mins).  A
 * group's vector s holds quants 4s..4s+3 of each of its 16 rows: a
 * transpose of 16 rows by 8 four-byte words, done as two 8 x 8 ones side
 * by side (rows r and r + 8 in one register): the fill then costs half
 * what it does row by row (quant_unit_fill) or gathered.  The file's
 * quants are already centred (int8); u adds 128 by flipping the top
 * bit. */
void avx512_unit_fill_q8_0(QuantUnit *u, const void *rows, size_t row_bytes, int n_rows, int k, int centred) {
    static const uint8_t zero[2 + QK];
    quant_unit_kind(u, TENSOR_Q8_0, k);
    const __m512i flip = _mm512_set1_epi8(centred ? 0 : (char)0x80);
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    for (int g = 0; g < 2; g++) {
        const uint8_t *row[16];
        for (int r = 0; r < 16; r++)
            row[r] = 16 * g + r < n_rows ? (const uint8_t *)rows + (size_t)(16 * g + r) * row_bytes : NULL;
        for (int b = 0; b < k / 32; b++) {
            size_t at = (size_t)b * (2 + QK);
            const uint8_t *blk[16];
            uint16_t h[16];
            for (int r = 0; r < 16; r++) {
                blk[r] = row[r] ? row[r] + at : zero;
                memcpy(&h[r], blk[r], 2);
            }
            __m512i v[8], t[8], q[8];
            for (int i = 0; i < 8; i++)
                v[i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk[i] + 2))),
                                          _mm256_loadu_si256((const __m256i *)(blk[i + 8] + 2)), 1);
            for (int i = 0; i < 8; i += 2) {
                t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
                t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
            }
            for (int i = 0; i < 8; i += 4) { /* q[i + j]: word j (and j + 4) of rows i.. */
                q[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
                q[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
                q[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
                q[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
            }
            uint8_t *dst = u->q + (size_t)(b * 2 + g) * 512;
            for (int j = 0; j < 4; j++) {
                __m512i words_j = _mm512_permutex2var_epi64(q[j], lo, q[j + 4]);
                __m512i words_j4 = _mm512_permutex2var_epi64(q[j], hi, q[j + 4]);
                _mm512_storeu_si512(dst + 64 * j, _mm512_xor_si512(words_j, flip));
                _mm512_storeu_si512(dst + 64 * (j + 4), _mm512_xor_si512(words_j4, flip));
            }
            __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
            size_t sc = (size_t)(b * 2 + g) * 2 * 16;
            _mm512_storeu_ps(u->d + sc, d);
            _mm512_storeu_ps(u->d + sc + 16, d);
            _mm512_storeu_ps(u->m + sc, _mm512_setzero_ps());
            _mm512_storeu_ps(u->m + sc + 16, _mm512_setzero_ps());
        }
    }
    u->centred = centred;
}

/* The same from packed Q8_0 groups, whose quants lie as a unit's: copied,
 * and the scales converted 16 at a time, where the portable fill from the
 * copy (quant_unit_fill_packed) converts one at a time. */
void avx512_unit_fill_packed_q8_0(QuantUnit *u, const void *groups, int n_rows, int k) {
    quant_unit_kind(u, TENSOR_Q8_0, k);
    size_t group = (size_t)u->nb * sizeof(PackQ8_0);
    for (int g = 0; g < 2; g++)
        for (int b = 0; b < u->nb; b++) {
            uint8_t *dst = u->q + (size_t)(b * 2 + g) * 512;
            float *d = u->d + (size_t)(b * 2 + g) * 32, *m = u->m + (size_t)(b * 2 + g) * 32;
            __m512 dv = _mm512_setzero_ps();
            if (16 * g < n_rows) {
                const PackQ8_0 *p = (const PackQ8_0 *)((const char *)groups + g * group) + b;
                for (int s = 0; s < 8; s++) _mm512_storeu_si512(dst + 64 * s, _mm512_loadu_si512(p->qs[s]));
                dv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p->d));
            } else {
                for (int s = 0; s < 8; s++) _mm512_storeu_si512(dst + 64 * s, _mm512_setzero_si512());
            }
            _mm512_storeu_ps(d, dv);
            _mm512_storeu_ps(d + 16, dv);
            _mm512_storeu_ps(m, _mm512_setzero_ps());
            _mm512_storeu_ps(m + 16, _mm512_setzero_ps());
        }
}
#endif
