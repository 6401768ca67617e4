/* One instruction-set path of the kernels (portable C, AVX2+FMA,
 * AVX-512): the inner loops that kernels.c tiles and threads.  Every path
 * computes the same functions; they differ only in rounding (summation
 * order, FMA, the exp polynomial), which test_kernels bounds against the
 * portable path.
 *
 * Within one path the rounding of a result never depends on the tile
 * shape, the number of tokens in the call or the thread that computes it:
 * a dot product always sums lane-strided partials over k and then reduces
 * the lanes with one fixed tree; a weighted sum always adds its terms in
 * index order.  That is what makes decode (n = 1) and prefill (n > 1), and
 * 1 and 2 threads, agree bit for bit.
 *
 * What depends on the type of the weights (or of the KV cache) is looked
 * up in a table indexed by TensorType, one per path: adding a type means
 * writing its row functions and adding its entry to each path's table. */
#ifndef POSENC_KERNELS_IMPL_H
#define POSENC_KERNELS_IMPL_H
#include <stddef.h>
#include <stdint.h>

#include "base/tensor.h"

typedef struct DecodeActs DecodeActs; /* below */

/* The kernels of one type on one path; NULL where the type has none. */
typedef struct {
    /* out[t*ldo + r] = x[t*ldx + 0..k) . w[r*ldw + 0..k) for t < n, r < m,
     * with f32 activations (ldw in elements): decode against float-like
     * weights, attention scores against cached keys. */
    void (*dot)(float *out, size_t ldo, const float *x, size_t ldx, const void *w, size_t ldw,
                int n, int m, int k);
    /* out[r] = x . w[r] for r < m with x quantized to Q8 blocks (quantize_q8
     * below: int8 xq, one scale xd per 32): decode against block-quantized
     * weights; rows are row_bytes apart. */
    void (*dot_q8)(float *out, const int8_t *xq, const float *xd, const void *w, size_t row_bytes,
                   int m, int k);
    /* The same with x quantized to Q8_K super-blocks (quantize_q8k: int8
     * xq, one scale xd per 256, int16 sums xsum of each 16): the K-quants. */
    void (*dot_q8k)(float *out, const int8_t *xq, const float *xd, const int16_t *xsum,
                    const void *w, size_t row_bytes, int m, int k);
    /* out[r] = x . w[r] for r < m on rows packed for decode (PackQ4_0 ...
     * below), w the group of row 0; the integer sums are dot_q8's or
     * dot_q8k's, only the float steps may round differently. */
    void (*dot_packed)(float *out, const DecodeActs *x, const void *w, int m, int k);
    /* out[t*ldo + r] for t < n, r < m on packed rows, with f32 activations
     * x (rows ldx apart): prefill of a type whose packed decode also takes
     * f32 activations (F32), each output the same bits as dot_packed's. */
    void (*gemm_packed)(float *out, size_t ldo, const float *x, size_t ldx, const void *w, int n, int m,
                        int k);
    /* out[t*ldo + 0..hs) = sum over c < cells of p[t*ldp + c] * v[c*ldv + 0..hs),
     * terms added in order of c: attention's weighted sum of cached values. */
    void (*mix)(float *out, size_t ldo, const float *p, size_t ldp, const void *v, size_t ldv,
                int n, int cells, int hs);
    /* n elements (a multiple of the block size) to f32, exactly: prefill's
     * weight panels, reading the KV cache back. */
    void (*to_f32)(float *dst, const void *src, size_t n);
} TypeKernels;

/* Prefill of block-quantized weights as integer products.  Weights are
 * unpacked UNIT_ROWS rows at a time into one form for every type: an
 * unsigned byte u per weight and, per half block (16 weights), an f32
 * scale d and min m, so that weight = d * (u - off) + m with off fixed by
 * the type.  A unit interleaves 16 rows in each 64-byte vector: byte
 * (((b*2 + g)*8 + s)*16 + r)*4 + j is weight 32b + 4s + j of row 16g + r,
 * so one multiply-accumulate of 4-byte groups (VNNI's dpbusd) advances 16
 * rows by 4 weights against one token's 4 activations. */
#define UNIT_ROWS 32
typedef struct QuantUnit {
    int nb;          /* blocks of 32 along k */
    int off;         /* the type's centre: Q8_0 128, Q4_0 8, Q5_0 16, Q3_K 4, Q6_K 32, MXFP4 12, else 0 */
    int has_min;     /* m may be non-zero: the _1 types, Q2_K, Q4_K, Q5_K */
    int split;       /* the halves' scales may differ: sub-blocks of 16 (Q2_K, Q3_K, Q6_K) */
    int centred;     /* q holds int8 u - off instead of u (quant_unit_centre) */
    uint8_t *q;      /* (nb, 2, 8, 16, 4) u, as above */
    float *d, *m;    /* (nb, 2 row groups, 2 halves, 16 rows) */
} QuantUnit;

/* MXFP4's unit bytes by E2M1 code: u = the doubled value (quant_e2m1) +
 * off, 12 (also the AVX-512 decode's unsigned quants). */
static const uint8_t quant_mxfp4_u[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

/* Activations of a chunk quantized once for every matrix that reads
 * them: per token, Q8 blocks of 32 (the path's quantize_q8) and the sums
 * of each 16 quants, which turn a block's sum of u * x into one of
 * (u - off) * x, and give the min terms. */
typedef struct QuantActs {
    int k;           /* width */
    int8_t *q;       /* (tokens, k) */
    float *d;        /* (tokens, k / 32) */
    int32_t *sum;    /* (tokens, k / 16) */
} QuantActs;

/* Decode's packed weights (kernels_pack.c).  A block-quantized row read
 * block by block costs more instructions to unpack than its bytes take to
 * arrive, and every row ends in a horizontal sum; and prefill, which
 * unpacks rows into units, would otherwise gather 16 rows' blocks into a
 * unit's interleave each time it fills one.  So the matrices of the
 * types below are copied once at load time into groups of PACK_ROWS rows
 * interleaved as prefill's units are: each 64-byte vector holds 4
 * consecutive quants of each of the 16 rows, and one VNNI dpbusd advances
 * all 16 rows by 4 weights against 4 broadcast activations; a group's 16
 * sums come out as one vector.  The quants stay in their bits, so the
 * copy is the file's size (Q4_K's scales, unpacked to bytes, add 3%).
 *
 * Quants are unsigned (Q4_0 0..15 centred on 8, Q4_K 0..15, Q5_K 0..31, Q6_K 0..63
 * centred on 32, Q8_0 0..255 centred on 128: its vectors are whole bytes,
 * laid out as a unit's, so prefill copies them; MXFP4 keeps its E2M1
 * codes, which a byte shuffle turns into u = 12 + the doubled value).  In vector s (< 4) of a block of 32 weights, byte
 * 4r + i holds weight 4s + i of row r in its low nibble and weight
 * 16 + 4s + i in its high nibble; Q5_K's fifth bits are in qh (PackQ5_K);
 * Q6_K's top two bits are in qh, vector
 * [j][h] holding in byte 4r + i, bits 2s and 2s + 1, those of weight
 * 32j + 16h + 4s + i.  Rows past the matrix's end are zero.
 *
 * F32 and F16 matrices are packed too, for prefill: a group is (cols, 16)
 * floats (or halves), column c of its 16 rows in one vector.  Prefill's
 * tile then multiplies a vector of 16 rows by one broadcast activation,
 * with no horizontal sum per output (read row by row, every output of
 * every token ends in one, and the tile is bound by its loads; F16 would
 * also be converted to f32 panels first).  Each
 * output is one lane's chain of multiply-adds over columns 0..k-1 (F16
 * converted exactly), in decode and in prefill alike, so the two give the
 * same bits. */
#define PACK_ROWS 16 /* kernels.h's KERNELS_PACK_ROWS */
typedef struct {
    uint8_t d[PACK_ROWS][2];          /* f16 scale of each row */
    uint8_t qs[4][64];
} PackQ4_0;                           /* 16 rows by one block of 32 */
typedef struct {
    uint8_t d[PACK_ROWS][2];          /* f16 scale of each row */
    uint8_t qs[8][64];                /* byte 4r + i of vector s: q + 128 of weight 4s + i of row r */
} PackQ8_0;                           /* 16 rows by one block of 32: a unit's group as it is */
typedef struct {
    uint8_t e[PACK_ROWS];             /* E8M0 scale of each row */
    uint8_t qs[4][64];                /* the E2M1 codes as Q4_0's nibbles (u by quant_mxfp4_u) */
} PackMXFP4;                          /* 16 rows by one block of 32 */
typedef struct {
    uint8_t d[PACK_ROWS][2], dmin[PACK_ROWS][2];
    uint8_t sc[QK_K / 32][PACK_ROWS]; /* 6-bit scale and min of each sub-block of 32 */
    uint8_t mn[QK_K / 32][PACK_ROWS];
    uint8_t qs[QK_K / 32][4][64];
} PackQ4_K;                           /* 16 rows by one super-block */
typedef struct {
    PackQ4_K k4;                      /* the scales, mins and low 4 bits, as Q4_K's */
    uint8_t qh[QK_K / 32][64];        /* byte 4r + i, bit s: the fifth bit of weight 4s + i, bit 4 + s:
                                         of weight 16 + 4s + i (of sub-block j, row r) */
} PackQ5_K;
typedef struct {
    uint8_t d[PACK_ROWS][2];
    int8_t sc[QK_K / 16][PACK_ROWS];  /* scale of each sub-block of 16 */
    uint8_t ql[QK_K / 32][4][64];     /* the low 4 bits, as Q4_K's qs */
    uint8_t qh[QK_K / 32][2][64];
} PackQ6_K;

/* Bytes of one group of PACK_ROWS rows of `cols` weights packed, 0 when
 * type t has no packed form; pack_group packs rows [0, n_rows) of a
 * matrix (n_rows <= PACK_ROWS, rows row_bytes apart) into one. */
size_t pack_group_bytes(TensorType t, int cols);
void pack_group(TensorType t, void *dst, const void *rows, size_t row_bytes, int n_rows, int cols);

/* One token's activations as decode's integer kernels take them: Q8
 * blocks of 32 and each block's sum of quants, and Q8_K super-blocks. */
struct DecodeActs {
    const int8_t *q;
    const float *d;
    const int32_t *sum;   /* (k / 32) */
    const int8_t *kq;
    const float *kd;
    const int16_t *ksum;  /* (k / 16) */
    const float *x;       /* (k) the activations themselves: packed F32 */
};

/* The portable packed kernels (kernels_pack.c): the reference the SIMD
 * ones are tested against. */
void pack_dot_q4_0(float *out, const DecodeActs *x, const void *w, int m, int k);
void pack_dot_q8_0(float *out, const DecodeActs *x, const void *w, int m, int k);
void pack_dot_mxfp4(float *out, const DecodeActs *x, const void *w, int m, int k);
void pack_dot_q4_k(float *out, const DecodeActs *x, const void *w, int m, int k);
void pack_dot_q5_k(float *out, const DecodeActs *x, const void *w, int m, int k);
void pack_dot_q6_k(float *out, const DecodeActs *x, const void *w, int m, int k);

/* Prefill of BF16 weights with the activations rounded to BF16 (round
 * to nearest even) once per chunk: round() writes tokens [t0, t1) of x (n
 * <= 512 tokens, k a multiple of 32; t0 a multiple of 16, t1 too or n) in
 * the layout gemm() reads; gemm() then gives out[t*ldo + r] = x_t . w_r
 * for rows [r0, r1) (r1 - r0 <= rows; w's rows ldw elements apart) and
 * tokens [0, n), with `pad` rows * k elements of the calling thread's own.
 * The products of BF16 pairs are exact in f32; the sums round in the
 * kernel's order (denormals flush to zero), so prefill is not decode's
 * bits, which keeps f32 activations: test_kernels bounds both against the
 * exact product. */
typedef struct {
    void (*round)(uint16_t *dst, const float *x, int n, int k, int t0, int t1);
    void (*gemm)(float *out, size_t ldo, const uint16_t *xbf, const uint16_t *w, size_t ldw, int r0, int r1, int n,
                 int k, uint16_t *pad);
    int rows; /* per gemm() call */
} Bf16Prefill;

typedef struct {
    const char *name;
    TypeKernels type[TENSOR_TYPE_COUNT];
    /* out[t*ldo + r] = x_t . w_r for r < rows of the unit, t0 <= t < t1,
     * with integer products summed exactly per half block and scaled in
     * f32 block by block in order; NULL where the path has no fast int8
     * product (prefill then uses f32 panels). */
    void (*gemm_q8)(float *out, size_t ldo, const QuantUnit *w, int rows, const QuantActs *x, int t0,
                    int t1);
    /* The same on AMX tiles (kernels_amx.c), NULL where the path has none:
     * units of the centred types with one scale per block (Q8_0, Q4_0,
     * Q5_0, MXFP4: neither split nor has_min), their quants centred
     * (quant_unit_centre), and x's rows readable up to
     * t0 + 16.  The integer sums are exact and scaled in gemm_q8's order,
     * so the outputs are gemm_q8's bits. */
    void (*gemm_q8_amx)(float *out, size_t ldo, const QuantUnit *w, int rows, const QuantActs *x, int t0,
                        int t1);
    /* quant_unit_fill of Q8_0 rows, centred (quant_unit_centre) if asked;
     * NULL where the path has none. */
    void (*unit_fill_q8_0)(QuantUnit *u, const void *rows, size_t row_bytes, int n_rows, int k, int centred);
    /* quant_unit_fill_packed of Q8_0 (not centred); NULL where the path
     * has none. */
    void (*unit_fill_packed_q8_0)(QuantUnit *u, const void *groups, int n_rows, int k);
    /* Activations to Q8 blocks of 32 (k a multiple of 32): q = round(x / d),
     * d = max|x| / 127 per block, kept as f32. */
    void (*quantize_q8)(int8_t *q, float *d, const float *x, int k);
    /* Activations to Q8_K super-blocks (k a multiple of 256): q = round(x / d),
     * d = max|x| / 127 per 256, and the sums of each 16 q; the same bits on
     * every path (one token's, serial in decode: vectorized, it is not a
     * part of the token that stays while the threads' shares shrink). */
    void (*quantize_q8k)(int8_t *q, float *d, int16_t *sum, const float *x, int k);
    /* f32 to f16 (round to nearest even), for the f16 KV cache. */
    void (*to_f16)(uint16_t *dst, const float *src, size_t n);
    /* Prefill of BF16 weights on AMX tiles (kernels_amx.c) and on
     * AVX512-BF16's pair products (kernels_bf16.c); empty where the path
     * has none.  AMX is used where the kernel allows it, else the pairs. */
    Bf16Prefill bf16_amx, bf16_pairs;
    void (*softmax)(float *x, int n);
    float (*sum_exp)(const float *x, int n, float *max);
    /* x[i] = e^(x[i] - max) in place; returns their sum (lane-strided
     * partials, then the path's tree). */
    float (*exp_sum)(float *x, int n, float max);
    /* max over x[0..n), -inf for none */
    float (*max_of)(const float *x, int n);
    void (*swiglu)(float *h, const float *g, int n);
    void (*gelu)(float *h, int n);
    /* `rounds` rounds of multiply-adds on as many independent registers
     * as keep the FMA units busy, in the path's widest vectors; returns the
     * flops done (kernels_fma_peak_gflops). */
    double (*fma_peak)(long rounds);
} KernelPath;

/* 1 once the kernel lets this process use AMX's tile data (asked once),
 * 0 if it refuses or the build has no AMX kernels (kernels_amx.c). */
int kernels_amx_ready(void);
/* The AVX-512 path's prefill on AMX, in builds that target it
 * (KERNELS_AMX: kernels_amx.c defines these and the path's table points at
 * them): BF16 weights, and with AMX-INT8 targeted too (KERNELS_AMX_INT8),
 * block-quantized units (amx_gemm_q8). */
#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__) && defined(__linux__)
#define KERNELS_AMX 1
#if defined(__AMX_INT8__)
#define KERNELS_AMX_INT8 1
#endif
#endif
void amx_bf16_tiles(uint16_t *dst, const float *x, int n, int k, int t0, int t1);
void amx_gemm_bf16(float *out, size_t ldo, const uint16_t *tiles, const uint16_t *w, size_t ldw, int r0, int r1,
                   int n, int k, uint16_t *pad);
#define AMX_BF16_ROWS 32
/* The AVX-512 path's BF16 prefill on pair products (kernels_bf16.c), in
 * builds that target AVX512-BF16. */
#if defined(__AVX512F__) && defined(__AVX512BF16__)
#define KERNELS_BF16_PAIRS 1
#endif
void pairs_bf16_round(uint16_t *dst, const float *x, int n, int k, int t0, int t1);
void pairs_gemm_bf16(float *out, size_t ldo, const uint16_t *xbf, const uint16_t *w, size_t ldw, int r0, int r1,
                     int n, int k, uint16_t *pad);
#define PAIRS_BF16_ROWS 64
void amx_gemm_q8(float *out, size_t ldo, const QuantUnit *w, int rows, const QuantActs *x, int t0, int t1);

/* The paths compiled into this build; NULL when the compiler does not
 * target the instruction set (see the Makefile's PORTABLE). */
extern const KernelPath kernels_portable;
extern const KernelPath *const kernels_avx2;
extern const KernelPath *const kernels_avx512;

/* f32 "converted" to f32: a copy, the same on every path. */
void kernel_copy_f32(float *dst, const void *src, size_t n);

/* The portable quantize_q8k (kernels_quant.c), the bits every path's
 * must give. */
void quant_quantize_q8k(int8_t *q, float *d, int16_t *sum, const float *x, int k);
/* Rows [0, n_rows) of a block-quantized matrix (rows row_bytes apart, k
 * wide), n_rows <= UNIT_ROWS, into u (padded with zero rows; u's arrays
 * hold k / 32 blocks) (kernels_quant.c). */
void quant_unit_fill(QuantUnit *u, TensorType t, const void *rows, size_t row_bytes, int n_rows, int k);
/* The same from the packed copy (kernels_pack.c): `groups` the packed
 * group of the unit's first row; the unit is the same bytes and floats. */
void quant_unit_fill_packed(QuantUnit *u, TensorType t, const void *groups, int n_rows, int k);
/* A filled unit's bytes u to int8 u - off in place (centred set): the
 * weights' own quants, as AMX's signed-by-signed product takes them, so
 * its sums need no off term (every type's u - off fits in int8). */
void quant_unit_centre(QuantUnit *u);
/* A unit's nb, off, has_min and split for type t and width k (centred
 * 0). */
void quant_unit_kind(QuantUnit *u, TensorType t, int k);
/* The sums of each `width` of k quants: QuantActs.sum of one token (16),
 * decode's DecodeActs.sum (32) (kernels_quant.c). */
void quant_sums(int32_t *sum, const int8_t *q, int k, int width);
/* The block-quantized types' conversions to f32 (kernels_quant.c), the
 * same on every path; their dot products are each path's instance of
 * kernels_quant.h. */
void quant_q4_0_to_f32(float *dst, const void *src, size_t n);
void quant_q4_1_to_f32(float *dst, const void *src, size_t n);
void quant_q5_0_to_f32(float *dst, const void *src, size_t n);
void quant_q5_1_to_f32(float *dst, const void *src, size_t n);
void quant_q2_k_to_f32(float *dst, const void *src, size_t n);
void quant_q3_k_to_f32(float *dst, const void *src, size_t n);
void quant_q4_k_to_f32(float *dst, const void *src, size_t n);
void quant_q5_k_to_f32(float *dst, const void *src, size_t n);
void quant_q6_k_to_f32(float *dst, const void *src, size_t n);
void quant_mxfp4_to_f32(float *dst, const void *src, size_t n);

/* Decode reads each weight row once, rows one after another.  For the
 * block-quantized rows the hardware prefetcher does not stay far enough
 * ahead (the integer work per byte is several times f32's), and decode
 * spends much of its time waiting for memory.  So their kernels ask, row
 * by row, for the bytes STREAM_AHEAD further on: prefetches never fault,
 * and the address is formed as an integer so it may pass the mapping's
 * end. */
#define STREAM_AHEAD 4096
static inline void prefetch_ahead(const void *at, size_t bytes, size_t ahead) {
    uintptr_t p = (uintptr_t)at + ahead;
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch((const void *)(p + o));
}
static inline void stream_prefetch(const void *row, size_t row_bytes) {
    prefetch_ahead(row, row_bytes, STREAM_AHEAD);
}

/* A path's row functions for one type: its inline dot_any, mix_any and
 * to_f32_any (type last) with the type fixed, so that every load and
 * stride folds to a constant. */
#define KERNEL_DOT_ROWS(name, TYPE)                                                               \
    static void name(float *out, size_t ldo, const float *x, size_t ldx, const void *w,         \
                     size_t ldw, int n, int m, int k) {                                          \
        dot_any(out, ldo, x, ldx, w, ldw, n, m, k, TYPE);                                        \
    }
#define KERNEL_MIX_ROWS(name, TYPE)                                                               \
    static void name(float *out, size_t ldo, const float *p, size_t ldp, const void *v,         \
                     size_t ldv, int n, int cells, int hs) {                                     \
        mix_any(out, ldo, p, ldp, v, ldv, n, cells, hs, TYPE);                                   \
    }
#define KERNEL_TO_F32(name, TYPE) \
    static void name(float *dst, const void *src, size_t n) { to_f32_any(dst, src, n, TYPE); }

#endif
