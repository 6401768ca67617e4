/* Prefill on AMX tiles, in builds that target AMX-BF16 (the AVX-512
 * path's table points here): BF16 weights (KernelPath.bf16_tiles,
 * gemm_bf16), and, where AMX-INT8 is targeted too, the units of the
 * block-quantized types with one scale per block (gemm_q8_amx, below).
 *
 * One TDPBF16PS multiplies a 16 x 32 BF16 tile by a 32 x 16 one into 16 x
 * 16 f32 sums: 8192 multiply-adds, against 32 per cycle for two f32 FMA
 * units (and AVX512-BF16's dpbf16ps, which runs on one port here, is no
 * faster than f32).  The weights are the A tiles, 16 rows by 32 weights
 * read in place from the mapped rows; the activations, rounded to BF16
 * once per chunk, are the B tiles, which AMX wants in pairs: row p of a
 * tile holds, for each of 16 tokens, weights 2p and 2p + 1 of its 32.  So
 * C = W x^T, 16 rows by 16 tokens, transposed into out on the way out.
 *
 * The products of BF16 pairs are exact in f32; the sums round (and
 * denormals flush to zero), in an order of the hardware's, so prefill is
 * not the same bits as decode, which keeps f32 activations: test_kernels
 * bounds both against the exact product. */
#include "model/kernels_impl.h"

#ifdef KERNELS_AMX
#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* Asked once per process, from whichever thread first needs the tiles
 * (the server's slots run on their own threads): the request is
 * idempotent, so two threads that both find the answer unknown may both
 * ask, and store the same answer. */
int kernels_amx_ready(void) {
    static atomic_int state; /* 0 unknown, 1 yes, -1 no */
    int s = atomic_load_explicit(&state, memory_order_relaxed);
    if (!s) {
        s = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 1 : -1;
        atomic_store_explicit(&state, s, memory_order_relaxed);
    }
    return s == 1;
}

/* Tile (g, c): tokens 16g.. by weights 32c..; TILE elements each. */
#define TILE 512

void amx_bf16_tiles(uint16_t *dst, const float *x, int n, int k, int t0, int t1) {
    int chunks = k / 32;
    /* pair p of a token's 32 weights goes to row p of the tile, at the token's column */
    const __m512i rows = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
    int end = t1 == n ? (n + 15) / 16 * 16 : t1;
    for (int t = t0; t < end; t++) {
        uint16_t *tiles = dst + (size_t)(t / 16) * chunks * TILE + (t % 16) * 2;
        for (int c = 0; c < chunks; c++) {
            __m512i pairs = _mm512_setzero_si512();
            if (t < n) {
                const float *src = x + (size_t)t * k + 32 * c;
                pairs = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src));
            }
            _mm512_i32scatter_epi32(tiles + (size_t)c * TILE, rows, pairs, 4);
        }
    }
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

/* C tiles 0-3 (rows block i, tokens group j: tile 2i + j), A tiles 4-5,
 * B tiles 6-7; every tile 16 rows of 64 bytes. */
static void configure(void) {
    TileConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) cfg.colsb[i] = 64, cfg.rows[i] = 16;
    _tile_loadconfig(&cfg);
}

/* 16 x 16 sums (rows by tokens) into out (tokens by rows), the valid part. */
static void store_c(float *out, size_t ldo, const float *c, int nr, int nt) {
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) out[(size_t)t * ldo + r] = c[r * 16 + t];
}

#define DP(C, A, B) _tile_dpbf16ps(C, A, B)

void amx_gemm_bf16(float *out, size_t ldo, const uint16_t *tiles, const uint16_t *w, size_t ldw, int r0, int r1,
                   int n, int k, uint16_t *pad) {
    configure();
    int chunks = k / 32, groups = (n + 15) / 16;
    float c[4][256];
    for (int r = r0; r < r1; r += 32) {
        /* a block of 16 rows is read in place if whole, else from pad with zero rows */
        const uint16_t *a[2];
        int nr[2];
        for (int i = 0; i < 2; i++) {
            int first = r + 16 * i;
            nr[i] = r1 - first < 16 ? (r1 - first > 0 ? r1 - first : 0) : 16;
            a[i] = w + (size_t)first * ldw;
            if (nr[i] > 0 && nr[i] < 16) {
                memset(pad, 0, (size_t)16 * k * sizeof *pad);
                for (int q = 0; q < nr[i]; q++) memcpy(pad + (size_t)q * k, a[i] + (size_t)q * ldw, (size_t)k * 2);
                a[i] = pad;
            }
        }
        size_t lda[2] = {a[0] == pad ? (size_t)k * 2 : ldw * 2, a[1] == pad ? (size_t)k * 2 : ldw * 2};
        for (int g = 0; g < groups; g += 2) {
            int two = g + 1 < groups, rows2 = nr[1] > 0;
            const uint16_t *b0 = tiles + (size_t)g * chunks * TILE, *b1 = b0 + (size_t)chunks * TILE;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int ch = 0; ch < chunks; ch++) {
                _tile_loadd(4, a[0] + 32 * ch, lda[0]);
                _tile_loadd(6, b0 + (size_t)ch * TILE, 64);
                DP(0, 4, 6);
                if (two) {
                    _tile_loadd(7, b1 + (size_t)ch * TILE, 64);
                    DP(1, 4, 7);
                }
                if (rows2) {
                    _tile_loadd(5, a[1] + 32 * ch, lda[1]);
                    DP(2, 5, 6);
                    if (two) DP(3, 5, 7);
                }
            }
            int nt0 = n - 16 * g < 16 ? n - 16 * g : 16, nt1 = two ? (n - 16 * (g + 1) < 16 ? n - 16 * (g + 1) : 16) : 0;
            _tile_stored(0, c[0], 64);
            store_c(out + (size_t)(16 * g) * ldo + r, ldo, c[0], nr[0], nt0);
            if (two) {
                _tile_stored(1, c[1], 64);
                store_c(out + (size_t)(16 * (g + 1)) * ldo + r, ldo, c[1], nr[0], nt1);
            }
            if (rows2) {
                _tile_stored(2, c[2], 64);
                store_c(out + (size_t)(16 * g) * ldo + r + 16, ldo, c[2], nr[1], nt0);
                if (two) {
                    _tile_stored(3, c[3], 64);
                    store_c(out + (size_t)(16 * (g + 1)) * ldo + r + 16, ldo, c[3], nr[1], nt1);
                }
            }
        }
    }
    _tile_release();
}

#ifdef KERNELS_AMX_INT8
/* Block-quantized prefill (gemm_q8_amx): the unit's centred quants
 * (quant_unit_centre) are the B tiles as they lie, a group of 16 rows by
 * one block (8 rows of 64 bytes), and the Q8 activations the A tile, 16
 * tokens by 32 quants read in place (a token's quants are k bytes apart).
 * Per block, TDPBSSD gives the exact int32 sums of the 16 tokens by the
 * unit's 32 rows in two C tiles; they are stored and scaled as gemm_q8's
 * into f32 sums in memory.  The products and the vector work do not
 * overlap (one waits for the other), but a store right after its product
 * waits for the product's latency: so the C tiles alternate by block, and
 * block b + 1's products are issued before block b's sums are stored,
 * which hides that latency (four C tiles of 32 tokens by 32 rows, each
 * stored right after its product, do not). */
static void configure_q8(void) {
    TileConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) cfg.rows[i] = 16, cfg.colsb[i] = 64;
    cfg.rows[0] = cfg.rows[1] = 8; /* B: the unit's two groups */
    cfg.colsb[2] = 32;             /* A: 16 tokens; C: 4-5 even blocks, 6-7 odd ones */
    _tile_loadconfig(&cfg);
}

#define INLINE static inline __attribute__((always_inline))

/* Block b's products of the A tile (a, k bytes apart) with the unit's two
 * groups into tiles C0 (rows 0-15) and C1 (16-31). */
#define Q8_ISSUE(C0, C1, a, k, wq, b)                                  \
    do {                                                               \
        _tile_loadd(0, (wq) + (size_t)((b) * 2) * 512, 64);            \
        _tile_loadd(1, (wq) + (size_t)((b) * 2 + 1) * 512, 64);        \
        _tile_loadd(2, (a) + 32 * (b), k);                             \
        _tile_zero(C0);                                                \
        _tile_zero(C1);                                                \
        _tile_dpbssd(C0, 2, 0);                                        \
        _tile_dpbssd(C1, 2, 1);                                        \
    } while (0)

/* acc[g][j] += block b's sums c[g] for token t + j, rows of group g,
 * scaled as gemm_q8's (FIRST: acc starts from +0, as gemm_q8's). */
INLINE void q8_scale(float (*acc)[256], const int32_t (*c)[256], const QuantUnit *w, const QuantActs *x, int t,
                     int b, int FIRST) {
    int k = x->k;
    __m512 d[2] = {_mm512_loadu_ps(w->d + (size_t)(b * 2) * 32), _mm512_loadu_ps(w->d + (size_t)(b * 2 + 1) * 32)};
#pragma GCC unroll 4
    for (int j = 0; j < 16; j++) {
        __m512 xd = _mm512_set1_ps(x->d[(size_t)(t + j) * (k / 32) + b]);
#pragma GCC unroll 2
        for (int g = 0; g < 2; g++) {
            float *o = acc[g] + 16 * j;
            __m512 sum = _mm512_cvtepi32_ps(_mm512_load_si512(c[g] + 16 * j));
            _mm512_store_ps(o, _mm512_fmadd_ps(sum, _mm512_mul_ps(d[g], xd),
                                               FIRST ? _mm512_setzero_ps() : _mm512_load_ps(o)));
        }
    }
}

/* The unit's rows by tokens t..t+15, the first nt stored. */
static void q8_tokens(float *out, size_t ldo, const QuantUnit *w, int rows, const QuantActs *x, int t, int nt) {
    size_t k = (size_t)x->k;
    int nb = w->nb;
    const int8_t *a = x->q + (size_t)t * k;
    _Alignas(64) int32_t c[2][256];
    _Alignas(64) float acc[2][256];
    Q8_ISSUE(4, 5, a, k, w->q, 0);
    for (int b = 0; b < nb; b++) {
        if (b & 1) {
            if (b + 1 < nb) Q8_ISSUE(4, 5, a, k, w->q, b + 1);
            _tile_stored(6, c[0], 64);
            _tile_stored(7, c[1], 64);
        } else {
            if (b + 1 < nb) Q8_ISSUE(6, 7, a, k, w->q, b + 1);
            _tile_stored(4, c[0], 64);
            _tile_stored(5, c[1], 64);
        }
        if (b == 0)
            q8_scale(acc, (const int32_t(*)[256])c, w, x, t, 0, 1);
        else
            q8_scale(acc, (const int32_t(*)[256])c, w, x, t, b, 0);
    }
    for (int g = 0; g < 2 && 16 * g < rows; g++) {
        __mmask16 mask = rows - 16 * g >= 16 ? 0xFFFF : (__mmask16)((1u << (rows - 16 * g)) - 1);
        for (int j = 0; j < nt; j++)
            _mm512_mask_storeu_ps(out + (size_t)(t + j) * ldo + 16 * g, mask, _mm512_load_ps(acc[g] + 16 * j));
    }
}

void amx_gemm_q8(float *out, size_t ldo, const QuantUnit *w, int rows, const QuantActs *x, int t0, int t1) {
    configure_q8();
    for (int t = t0; t < t1; t += 16) {
        /* a last tile past t1 moves back to end there (tokens done twice come
         * out the same bits); with fewer than 16 tokens the A tile reads past t1 */
        int start = t, nt = t1 - t < 16 ? t1 - t : 16;
        if (nt < 16 && t1 - t0 >= 16) start = t1 - 16, nt = 16;
        q8_tokens(out, ldo, w, rows, x, start, nt);
    }
    _tile_release();
}
#endif
#else
int kernels_amx_ready(void) { return 0; }
#endif
