/* Prefill of BF16 weights on AVX512-BF16's pair products, in builds that
 * target it (the AVX-512 path's table points here; on a CPU with AMX the
 * tiles take precedence where the kernel allows them).
 *
 * One VDPBF16PS adds, in each of 16 f32 lanes, the products of two BF16
 * pairs: lane r of the weights' vector holds weights 2c and 2c + 1 of row
 * r, and the activations' pair (2c, 2c + 1) of one token is broadcast to
 * every lane.  So the layout is packed F32's (kernels_impl.h) with pairs
 * for floats: a group of 16 rows is (k / 2, 16) pairs, and the tile is
 * gemm_packed_f32's, 4 groups (64 rows) by 6 tokens in 24 accumulators,
 * each pair of columns 4 vector loads and 6 broadcasts.  Each output
 * needs no horizontal sum.  The rows are read from the mapped weights
 * and packed once per call, a block of 64 rows into the thread's pad,
 * then multiplied with every token of the chunk (the packing is 64 x k
 * moves against 64 x k x tokens products).
 *
 * A VDPBF16PS lane adds two products where an FMA adds one, and where it
 * issues about as often as an FMA (AMD's family 26 does) that is nearly
 * twice the f32 rate: the reason for this kernel where there is no AMX. */
#include "model/kernels_impl.h"

#ifdef KERNELS_BF16_PAIRS
#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

#define TILE_GROUPS 4
#define TILE_TOKENS 6

void pairs_bf16_round(uint16_t *dst, const float *x, int n, int k, int t0, int t1) {
    (void)n;
    for (int t = t0; t < t1; t++)
        for (int c = 0; c < k; c += 32) {
            const float *src = x + (size_t)t * k + c;
            __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src));
            _mm512_storeu_si512(dst + (size_t)t * k + c, (__m512i)v);
        }
}

/* r[i] holds 16 pairs of row i; on return r[j] holds pair j of the 16
 * rows, row i in lane i. */
INLINE void transpose16(__m512i r[16]) {
    __m512i t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) { /* per 128-bit lane: rows 2i, 2i + 1 of pairs 0, 1 (lo) and 2, 3 (hi) */
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    __m512i u[16]; /* u[4a + j], lane L: rows 4a..4a+3 of pair 4L + j */
#pragma GCC unroll 4
    for (int a = 0; a < 4; a++) {
        u[4 * a] = _mm512_unpacklo_epi64(t[4 * a], t[4 * a + 2]);
        u[4 * a + 1] = _mm512_unpackhi_epi64(t[4 * a], t[4 * a + 2]);
        u[4 * a + 2] = _mm512_unpacklo_epi64(t[4 * a + 1], t[4 * a + 3]);
        u[4 * a + 3] = _mm512_unpackhi_epi64(t[4 * a + 1], t[4 * a + 3]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) { /* lane L of u[j], u[4 + j], u[8 + j], u[12 + j] into pair 4L + j */
        __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
        __m512i v2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44), v3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
        r[j] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        r[4 + j] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
        r[8 + j] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        r[12 + j] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
    }
}

/* Rows [0, nr) of w (nr <= 64, rows ldw apart) into pad as groups of 16
 * rows by k / 2 pairs, rows past nr zero. */
static void pack_rows(uint32_t *pad, const uint16_t *w, size_t ldw, int nr, int k) {
    size_t pairs = (size_t)k / 2;
    for (int g = 0; 16 * g < nr; g++)
        for (size_t c = 0; c < pairs; c += 16) {
            __m512i r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                r[i] = 16 * g + i < nr ? _mm512_loadu_si512(w + (size_t)(16 * g + i) * ldw + 2 * c)
                                       : _mm512_setzero_si512();
            transpose16(r);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++) _mm512_store_si512(pad + ((size_t)g * pairs + c + j) * 16, r[j]);
        }
}

INLINE __m512bh broadcast_pair(const uint16_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return (__m512bh)_mm512_set1_epi32((int)v);
}

/* Groups [0, ng) of the packed rows by tokens [0, nt) of x (missing groups
 * and tokens repeat the last valid one and are not stored); m rows valid
 * from the first group's first. */
INLINE void pairs_tile(float *out, size_t ldo, const uint16_t *x, int k, const uint32_t *w, size_t group, int ng,
                       int nt, int m) {
    const uint32_t *wg[TILE_GROUPS];
    const uint16_t *xt[TILE_TOKENS];
#pragma GCC unroll 4
    for (int i = 0; i < TILE_GROUPS; i++) wg[i] = w + (size_t)(i < ng ? i : ng - 1) * group;
#pragma GCC unroll 6
    for (int j = 0; j < TILE_TOKENS; j++) xt[j] = x + (size_t)(j < nt ? j : nt - 1) * k;
    __m512 acc[TILE_TOKENS][TILE_GROUPS];
#pragma GCC unroll 6
    for (int j = 0; j < TILE_TOKENS; j++)
#pragma GCC unroll 4
        for (int i = 0; i < TILE_GROUPS; i++) acc[j][i] = _mm512_setzero_ps();
    for (int c = 0; c < k / 2; c++) {
        __m512bh b[TILE_TOKENS];
#pragma GCC unroll 6
        for (int j = 0; j < TILE_TOKENS; j++) b[j] = broadcast_pair(xt[j] + 2 * c);
#pragma GCC unroll 4
        for (int i = 0; i < TILE_GROUPS; i++) {
            __m512bh v = (__m512bh)_mm512_load_si512(wg[i] + (size_t)c * 16);
#pragma GCC unroll 6
            for (int j = 0; j < TILE_TOKENS; j++) acc[j][i] = _mm512_dpbf16_ps(acc[j][i], v, b[j]);
        }
    }
    for (int j = 0; j < nt; j++)
        for (int i = 0; i < ng; i++) {
            int rows = m - 16 * i;
            _mm512_mask_storeu_ps(out + (size_t)j * ldo + 16 * i, rows >= 16 ? 0xFFFF : (__mmask16)((1u << rows) - 1),
                                  acc[j][i]);
        }
}

void pairs_gemm_bf16(float *out, size_t ldo, const uint16_t *xbf, const uint16_t *w, size_t ldw, int r0, int r1,
                     int n, int k, uint16_t *pad) {
    uint32_t *packed = (uint32_t *)pad;
    size_t group = (size_t)k / 2 * 16;
    int m = r1 - r0, groups = (m + 15) / 16;
    pack_rows(packed, w + (size_t)r0 * ldw, ldw, m, k);
    for (int t = 0; t < n; t += TILE_TOKENS)
        pairs_tile(out + (size_t)t * ldo + r0, ldo, xbf + (size_t)t * k, k, packed, group,
                   groups < TILE_GROUPS ? groups : TILE_GROUPS, n - t < TILE_TOKENS ? n - t : TILE_TOKENS, m);
}
#endif
