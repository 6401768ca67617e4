/* Positional math against closed forms: rotation composition, relative
 * invariance, the two RoPE pairings, ALiBi slopes, sinusoids, T5's
 * buckets; and the
 * registry of schemes: names, shift actions, the positions each covers. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "positional/pe.h"
#include "tests/common.h"

#define HEAD 16
#define HEADS 3

/* Angles stay below 200 rad here; float rounding of pos*inv_freq is then
 * < 200 * 2^-24 ~ 1.2e-5 rad, so rotated unit-scale vectors agree to 1e-4. */
#define ROT_TOL 1e-4f

static PositionalEncoding make_rope(PeRopePairing pairing, PeRopeScaling scaling) {
    PeParams p = pe_params_default(PE_ROPE);
    p.rope_pairing = pairing;
    p.rope_scaling = scaling;
    p.rope_factor = scaling == PE_ROPE_SCALING_NONE ? 1.0f : 4.0f;
    PositionalEncoding pe;
    PosencError err;
    ck_assert_int_eq(pe_build(&pe, &p, HEAD * HEADS, HEADS, HEAD, 128, NULL, &err), 0);
    return pe;
}

static void fill(float *v, int n, unsigned seed) {
    srand(seed);
    for (int i = 0; i < n; i++) v[i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
}

static float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

START_TEST(rope_composition) {
    for (int pairing = 0; pairing < 2; pairing++)
        for (int sc = 0; sc <= PE_ROPE_SCALING_LLAMA3; sc++) {
            PositionalEncoding pe = make_rope((PeRopePairing)pairing, (PeRopeScaling)sc);
            float a[HEAD * HEADS], b[HEAD * HEADS], wrong[HEAD * HEADS];
            fill(a, HEAD * HEADS, 1);
            for (int i = 0; i < HEAD * HEADS; i++) b[i] = wrong[i] = a[i];
            pe_rope_rotate(&pe, a, HEADS, 37);
            pe_rope_rerotate(&pe, a, HEADS, 58); /* R(58) R(37), YaRN's factor once */
            pe_rope_rotate(&pe, b, HEADS, 95);   /* R(95) */
            pe_rope_rotate(&pe, wrong, HEADS, 96);
            ck_assert_float_le(tests_max_abs_diff(a, b, HEAD * HEADS), ROT_TOL);
            /* Negative control: one position off is far outside the tolerance. */
            ck_assert_float_gt(tests_max_abs_diff(a, wrong, HEAD * HEADS), 100 * ROT_TOL);
            pe_free(&pe);
        }
}
END_TEST

START_TEST(rope_relative) {
    PositionalEncoding pe = make_rope(PE_ROPE_INTERLEAVED, PE_ROPE_SCALING_NONE);
    float q0[HEAD], k0[HEAD];
    fill(q0, HEAD, 2);
    fill(k0, HEAD, 3);
    float ref = 0.0f;
    for (int shift = 0; shift <= 120; shift += 30) {
        float q[HEAD], k[HEAD];
        for (int i = 0; i < HEAD; i++) q[i] = q0[i], k[i] = k0[i];
        pe_rope_rotate(&pe, q, 1, 10 + shift);
        pe_rope_rotate(&pe, k, 1, 3 + shift);
        float d = dot(q, k, HEAD);
        if (shift == 0) ref = d;
        ck_assert_float_le(fabsf(d - ref), ROT_TOL);
    }
    /* A different distance gives a different score. */
    float q[HEAD], k[HEAD];
    for (int i = 0; i < HEAD; i++) q[i] = q0[i], k[i] = k0[i];
    pe_rope_rotate(&pe, q, 1, 10);
    pe_rope_rotate(&pe, k, 1, 4);
    ck_assert_float_gt(fabsf(dot(q, k, HEAD) - ref), 100 * ROT_TOL);
    pe_free(&pe);
}
END_TEST

/* Interleaved pair (2j, 2j+1) is NeoX pair (j, j+half) after permuting dims. */
START_TEST(rope_pairings_equivalent) {
    PositionalEncoding inter = make_rope(PE_ROPE_INTERLEAVED, PE_ROPE_SCALING_NONE);
    PositionalEncoding neox = make_rope(PE_ROPE_NEOX, PE_ROPE_SCALING_NONE);
    float v[HEAD * HEADS], u[HEAD * HEADS], vp[HEAD * HEADS];
    fill(v, HEAD * HEADS, 4);
    for (int h = 0; h < HEADS; h++)
        for (int j = 0; j < HEAD / 2; j++) {
            u[h * HEAD + j] = v[h * HEAD + 2 * j];
            u[h * HEAD + j + HEAD / 2] = v[h * HEAD + 2 * j + 1];
        }
    pe_rope_rotate(&inter, v, HEADS, 77);
    pe_rope_rotate(&neox, u, HEADS, 77);
    for (int h = 0; h < HEADS; h++)
        for (int j = 0; j < HEAD / 2; j++) {
            vp[h * HEAD + j] = v[h * HEAD + 2 * j];
            vp[h * HEAD + j + HEAD / 2] = v[h * HEAD + 2 * j + 1];
        }
    ck_assert_float_le(tests_max_abs_diff(vp, u, HEAD * HEADS), 1e-6f);
    /* Without the permutation the two pairings disagree. */
    float w[HEAD * HEADS];
    fill(w, HEAD * HEADS, 4);
    pe_rope_rotate(&neox, w, HEADS, 77);
    ck_assert_float_gt(tests_max_abs_diff(v, w, HEAD * HEADS), 1e-2f);
    pe_free(&inter);
    pe_free(&neox);
}
END_TEST

/* The ALiBi paper's get_slopes, written recursively as published. */
static void reference_slopes(double *out, int n) {
    int p2 = 1;
    while (p2 * 2 <= n) p2 *= 2;
    double start = pow(2.0, -pow(2.0, -(log2((double)p2) - 3)));
    for (int i = 0; i < p2; i++) out[i] = start * pow(start, i);
    if (p2 == n) return;
    double *extra = malloc(sizeof(double) * 2 * (size_t)p2);
    reference_slopes(extra, 2 * p2);
    for (int i = 0; i < n - p2; i++) out[p2 + i] = extra[2 * i];
    free(extra);
}

START_TEST(alibi_slopes_1_to_64) {
    for (int n = 1; n <= 64; n++) {
        float got[64];
        double want[64];
        pe_alibi_slopes(got, n, 8.0f);
        reference_slopes(want, n);
        for (int h = 0; h < n; h++)
            ck_assert_msg(fabs(got[h] - want[h]) <= 1e-6 * want[h], "n=%d h=%d: %g vs %g", n, h,
                          (double)got[h], want[h]);
    }
}
END_TEST

START_TEST(alibi_slopes_12_heads) {
    float s[12];
    pe_alibi_slopes(s, 12, 8.0f);
    for (int h = 0; h < 8; h++) ck_assert_float_eq_tol(s[h], powf(2.0f, -(float)(h + 1)), 1e-7f);
    const float tail[4] = {-0.5f, -1.5f, -2.5f, -3.5f};
    for (int h = 0; h < 4; h++) ck_assert_float_eq_tol(s[8 + h], powf(2.0f, tail[h]), 1e-7f);
}
END_TEST

START_TEST(alibi_bias_is_linear_in_distance) {
    PeParams p = pe_params_default(PE_ALIBI);
    PositionalEncoding pe;
    PosencError err;
    ck_assert_int_eq(pe_build(&pe, &p, 64, 4, 16, 128, NULL, &err), 0);
    int pos_k[3] = {0, 5, 10};
    float scores[3] = {0, 0, 0};
    pe_alibi_ops.bias(&pe, 1, 10, pos_k, scores, 3);
    ck_assert_float_eq_tol(scores[0], -0.0625f * 10, 1e-6f);
    ck_assert_float_eq_tol(scores[1], -0.0625f * 5, 1e-6f);
    ck_assert_float_eq_tol(scores[2], 0.0f, 1e-6f);
    pe_free(&pe);
}
END_TEST

START_TEST(sinusoidal_closed_forms) {
    for (int i = 0; i < 8; i++) ck_assert_float_eq(pe_sinusoid(0, i, 8), (i & 1) ? 1.0f : 0.0f);
    ck_assert_float_eq_tol(pe_sinusoid(1, 0, 4), sinf(1.0f), 1e-7f);
    ck_assert_float_eq_tol(pe_sinusoid(1, 1, 4), cosf(1.0f), 1e-7f);
    ck_assert_float_eq_tol(pe_sinusoid(1, 2, 4), sinf(0.01f), 1e-7f);   /* 1/10000^(2/4) */
    ck_assert_float_eq_tol(pe_sinusoid(1, 3, 4), cosf(0.01f), 1e-7f);
    ck_assert_float_eq_tol(pe_sinusoid(1000, 6, 128), (float)sin(1000.0 / pow(10000.0, 6.0 / 128)),
                           1e-6f);
    /* The embed hook adds exactly these values. */
    PeParams p = pe_params_default(PE_SINUSOIDAL);
    PositionalEncoding pe;
    PosencError err;
    ck_assert_int_eq(pe_build(&pe, &p, 4, 1, 4, 16, NULL, &err), 0);
    float x[4] = {1, 1, 1, 1};
    pe_sinusoidal_ops.embed(&pe, x, 1);
    ck_assert_float_eq_tol(x[0], 1.0f + sinf(1.0f), 1e-6f);
    ck_assert_float_eq_tol(x[3], 1.0f + cosf(0.01f), 1e-6f);
    pe_free(&pe);
}
END_TEST

START_TEST(learned_needs_a_table) {
    PeParams p = pe_params_default(PE_LEARNED);
    PositionalEncoding pe;
    PosencError err;
    ck_assert_int_eq(pe_build(&pe, &p, 4, 1, 4, 16, NULL, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "need a position embedding table"));
    float table[2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8};
    PeTables t = {.positions = table, .n_positions = 2};
    ck_assert_int_eq(pe_build(&pe, &p, 4, 1, 4, 16, &t, &err), 0);
    float x[4] = {0};
    pe_learned_ops.embed(&pe, x, 1);
    ck_assert_float_eq(x[0], 5.0f);
    ck_assert_int_eq(pe_position_limit(&pe), 2);
    pe_free(&pe);
}
END_TEST

/* The first distance q - k of every bucket, from the formula of Hugging
 * Face's T5Attention._relative_position_bucket (bidirectional=False),
 * evaluated in float32 NumPy (as torch does) over distances 0..399. */
static const int T5_FIRST_32_128[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                        11, 12, 13, 14, 15, 16, 19, 21, 24, 27, 31,
                                        35, 40, 46, 52, 59, 67, 77, 87, 99, 113};
static const int T5_FIRST_8_20[8] = {0, 1, 2, 3, 4, 6, 9, 14};

/* A bucket function under test: the bucket of key k for query q. */
typedef int (*BucketFn)(long long q, long long k, int n_buckets, int max_distance);

static int bucket_engine(long long q, long long k, int nb, int md) {
    return pe_t5_bucket(k - q, nb, md);
}
/* The sign bug: q - k where T5 takes k - q. */
static int bucket_reversed(long long q, long long k, int nb, int md) {
    return pe_t5_bucket(q - k, nb, md);
}
/* Log spacing from the wrong boundary: one exact bucket fewer. */
static int bucket_early_log(long long q, long long k, int nb, int md) {
    long long d = q - k;
    int exact = nb / 2 - 1;
    if (d < exact + 1) return (int)(d < 0 ? 0 : d);
    int b = exact + 1 + (int)(log((double)d / exact) / log((double)md / exact) * (nb - exact - 1));
    return b < nb - 1 ? b : nb - 1;
}

/* Distances 0..last whose bucket differs from the one `first` implies. */
static int bucket_mismatches(BucketFn f, const int *first, int nb, int md, int last) {
    int bad = 0, want = 0;
    for (int d = 0; d <= last; d++) {
        while (want + 1 < nb && d >= first[want + 1]) want++;
        bad += f(1000, 1000 - d, nb, md) != want;
    }
    return bad;
}

START_TEST(t5_buckets_match_t5) {
    ck_assert_int_eq(bucket_mismatches(bucket_engine, T5_FIRST_32_128, 32, 128, 399), 0);
    ck_assert_int_eq(bucket_mismatches(bucket_engine, T5_FIRST_8_20, 8, 20, 399), 0);
    /* Keys ahead of the query (masked by causality) are T5's bucket 0; far
     * keys stay in the last bucket. */
    ck_assert_int_eq(pe_t5_bucket(5, 32, 128), 0);
    ck_assert_int_eq(pe_t5_bucket(-1000000000LL, 32, 128), 31);
    /* Negative controls: the two bugs the issue names are told apart. */
    ck_assert_int_gt(bucket_mismatches(bucket_reversed, T5_FIRST_32_128, 32, 128, 399), 300);
    ck_assert_int_gt(bucket_mismatches(bucket_early_log, T5_FIRST_32_128, 32, 128, 399), 0);
    ck_assert_int_gt(bucket_mismatches(bucket_early_log, T5_FIRST_8_20, 8, 20, 399), 0);
}
END_TEST

/* A t5 scheme over 2 heads and 8 buckets whose bias is 10 * bucket + head,
 * max distance 20. */
static PositionalEncoding make_t5(float *table) {
    for (int b = 0; b < 8; b++)
        for (int h = 0; h < 2; h++) table[b * 2 + h] = (float)(10 * b + h);
    PeTables t = {.relative_bias = table, .n_buckets = 8};
    PeParams p = pe_params_default(PE_T5);
    p.t5_max_distance = 20;
    PositionalEncoding pe;
    PosencError err;
    ck_assert_msg(pe_build(&pe, &p, 8, 2, 4, 16, &t, &err) == 0, "%s", err.msg);
    return pe;
}

/* The bias hook adds table[bucket(k - q), head], whatever the positions'
 * origin; cells ahead of the query read bucket 0. */
START_TEST(t5_bias_hook_reads_the_bucket) {
    float table[16];
    PositionalEncoding pe = make_t5(table);
    const int dist[7] = {-3, 0, 4, 5, 13, 14, 500};
    const int bucket[7] = {0, 0, 4, 4, 6, 7, 7}; /* T5_FIRST_8_20 */
    for (int origin = 0; origin <= 100000; origin += 100000)
        for (int h = 0; h < 2; h++) {
            int pos_q = origin + 600, pos_k[7];
            float scores[7] = {0};
            for (int i = 0; i < 7; i++) pos_k[i] = pos_q - dist[i];
            pe_t5_ops.bias(&pe, h, pos_q, pos_k, scores, 7);
            for (int i = 0; i < 7; i++)
                ck_assert_msg(scores[i] == (float)(10 * bucket[i] + h),
                              "head %d distance %d: %g", h, dist[i], (double)scores[i]);
        }
    pe_free(&pe);
}
END_TEST

START_TEST(t5_refuses_what_it_cannot_run) {
    float table[16] = {0};
    PeParams p = pe_params_default(PE_T5);
    PositionalEncoding pe;
    PosencError err;
    ck_assert_int_eq(pe_build(&pe, &p, 8, 2, 4, 16, NULL, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "needs a bias table (blk.0.attn_rel_b.weight)"));
    PeTables t = {.relative_bias = table, .n_buckets = 8};
    const struct { int buckets, max_distance, bidirectional; const char *needle; } bad[] = {
        {-1, 128, 1, "bidirectional"},
        {16, 128, 0, "bucket count is 16 but the bias table has 8 rows"},
        {0, 128, 0, "bucket count is 0 but the bias table has 8 rows"},
        {-1, 4, 0, "max distance 4 must be in 5.."},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        p.t5_buckets = bad[i].buckets;
        p.t5_max_distance = bad[i].max_distance;
        p.t5_bidirectional = bad[i].bidirectional;
        ck_assert_int_eq(pe_build(&pe, &p, 8, 2, 4, 16, &t, &err), -1);
        ck_assert_msg(strstr(err.msg, bad[i].needle), "%s", err.msg);
    }
    /* Control: the same table with consistent parameters builds. */
    p = pe_params_default(PE_T5);
    p.t5_buckets = 8;
    p.t5_max_distance = 5;
    ck_assert_msg(pe_build(&pe, &p, 8, 2, 4, 16, &t, &err) == 0, "%s", err.msg);
    pe_free(&pe);
}
END_TEST

/* The table "what a shift does" of docs/positional.md, row by row. */
static const PeShiftAction DOCUMENTED_SHIFT[PE_COUNT] = {
    [PE_ROPE] = PE_SHIFT_REROTATE,       [PE_ALIBI] = PE_SHIFT_POSITIONS,
    [PE_SINUSOIDAL] = PE_SHIFT_RECOMPUTE, [PE_LEARNED] = PE_SHIFT_RECOMPUTE,
    [PE_NONE] = PE_SHIFT_RECOMPUTE,     [PE_T5] = PE_SHIFT_POSITIONS,
};

/* Schemes whose shift action differs from `expected`. */
static int shift_mismatches(const PeShiftAction *expected) {
    int n = 0;
    for (int k = 0; k < PE_COUNT; k++) n += pe_kind_ops((PeKind)k)->shift != expected[k];
    return n;
}

START_TEST(registry_describes_every_scheme) {
    float table[4 * 8] = {0};
    PeTables t = {.positions = table, .n_positions = 4, .relative_bias = table, .n_buckets = 4};
    for (int k = 0; k < PE_COUNT; k++) {
        const PeOps *ops = pe_kind_ops((PeKind)k);
        ck_assert_msg(ops != NULL, "PeKind %d has no descriptor in the registry", k);
        PeKind back;
        ck_assert_int_eq(pe_kind_from_name(ops->name, &back), 0);
        ck_assert_int_eq(back, k);
        /* A scheme that re-rotates needs the hook that does it. */
        ck_assert_int_eq(ops->shift == PE_SHIFT_REROTATE, ops->rerotate != NULL);
        /* Every scheme builds on a model that offers what it needs, and
         * frees what it built (ASan's leak check sees the rest). */
        PeParams p = pe_params_default((PeKind)k);
        PositionalEncoding pe;
        PosencError err;
        ck_assert_msg(pe_build(&pe, &p, 8, 2, 4, 16, &t, &err) == 0, "%s", err.msg);
        ck_assert_ptr_eq(pe_ops(&pe), ops);
        /* What -m inspect shows fits its buffer and is named. */
        PeField fields[PE_MAX_FIELDS];
        int n = ops->describe ? ops->describe(&p, 4, 16, &t, fields) : 0;
        ck_assert_int_le(n, PE_MAX_FIELDS);
        for (int i = 0; i < n; i++) ck_assert_ptr_nonnull(fields[i].key);
        pe_free(&pe);
    }
    ck_assert_int_eq(shift_mismatches(DOCUMENTED_SHIFT), 0);
    /* Negative control: NoPE "updating positions only", the tempting wrong
     * row (its hidden states infer position), is told apart. */
    PeShiftAction wrong[PE_COUNT];
    memcpy(wrong, DOCUMENTED_SHIFT, sizeof wrong);
    wrong[PE_NONE] = PE_SHIFT_POSITIONS;
    ck_assert_int_eq(shift_mismatches(wrong), 1);
    ck_assert_ptr_null(pe_kind_ops(PE_COUNT));
    PeKind dummy;
    ck_assert_int_eq(pe_kind_from_name("xpos", &dummy), -1);
    ck_assert_str_eq(pe_shift_action_name(PE_SHIFT_REROTATE), "keys re-rotated");
    ck_assert_str_eq(pe_shift_action_name(PE_SHIFT_POSITIONS), "positions updated");
    ck_assert_str_eq(pe_shift_action_name(PE_SHIFT_RECOMPUTE), "recomputed");
    /* Relative schemes, as test_cache_offsets relies on: rope, alibi, t5
     * and none; sinusoidal and learned are absolute. */
    ck_assert(pe_is_relative(PE_ROPE) && pe_is_relative(PE_ALIBI) && pe_is_relative(PE_NONE) &&
              pe_is_relative(PE_T5));
    ck_assert(!pe_is_relative(PE_SINUSOIDAL) && !pe_is_relative(PE_LEARNED));
}
END_TEST

/* rope's rerotate hook, as a shift calls it: a key cached at position 90
 * moved by -30 equals the key rotated at 60. */
START_TEST(rope_rerotate_hook_moves_a_key) {
    PositionalEncoding pe = make_rope(PE_ROPE_NEOX, PE_ROPE_SCALING_YARN);
    float k0[HEAD * HEADS], moved[HEAD * HEADS], fresh[HEAD * HEADS], off[HEAD * HEADS];
    fill(k0, HEAD * HEADS, 5);
    memcpy(moved, k0, sizeof k0);
    memcpy(fresh, k0, sizeof k0);
    memcpy(off, k0, sizeof k0);
    pe_ops(&pe)->rotate(&pe, moved, HEADS, 90);
    pe_ops(&pe)->rerotate(&pe, moved, HEADS, -30);
    pe_ops(&pe)->rotate(&pe, fresh, HEADS, 60);
    pe_ops(&pe)->rotate(&pe, off, HEADS, 61);
    ck_assert_float_le(tests_max_abs_diff(moved, fresh, HEAD * HEADS), ROT_TOL);
    ck_assert_float_gt(tests_max_abs_diff(moved, off, HEAD * HEADS), 100 * ROT_TOL); /* one position off */
    pe_free(&pe);
}
END_TEST

/* A scheme's parameters, the first position it does not cover (trained
 * context 512, a table of 128 rows), and the verdict and fact there. */
typedef struct {
    PeKind kind;
    PeRopeScaling scaling;
    float factor;
    int orig_ctx;
    PeOverflow overflow;
    int covered;
    PeRangeVerdict past;
    const char *fact;
} RangeCase;

#define EXTRAPOLATES(kind, words) \
    {kind, PE_ROPE_SCALING_NONE, 1, 0, PE_OVERFLOW_ERROR, 512, PE_RANGE_EXTRAPOLATES, \
     "positions up to 512 exceed the trained context 512; " words}

static const RangeCase RANGE_CASES[] = {
    EXTRAPOLATES(PE_ROPE, "the scheme extrapolates"),
    EXTRAPOLATES(PE_ALIBI, "the scheme extrapolates"),
    EXTRAPOLATES(PE_SINUSOIDAL, "the scheme extrapolates"),
    EXTRAPOLATES(PE_NONE, "the model never saw sequences this long"),
    EXTRAPOLATES(PE_T5, "the scheme extrapolates (distances from its max distance on share the "
                        "last bucket)"),
    /* scaled rope covers factor x the original context: 2 x 512 ... */
    {PE_ROPE, PE_ROPE_SCALING_NTK, 2, 0, PE_OVERFLOW_ERROR, 1024, PE_RANGE_EXTRAPOLATES,
     "positions up to 1024 exceed the scaled range 2 x 512 = 1024; it extrapolates"},
    /* ... or x --rope-orig-ctx, here 2.5 x 101 = 252.5: 252 is inside, 253 not */
    {PE_ROPE, PE_ROPE_SCALING_YARN, 2.5f, 101, PE_OVERFLOW_ERROR, 253, PE_RANGE_EXTRAPOLATES,
     "positions up to 253 exceed the scaled range 2.5 x 101 = 252; it extrapolates"},
    /* learned: its table of 128, whatever the trained context */
    {PE_LEARNED, PE_ROPE_SCALING_NONE, 1, 0, PE_OVERFLOW_ERROR, 128, PE_RANGE_REFUSED,
     "position 128 is past the table of 128 positions"},
    {PE_LEARNED, PE_ROPE_SCALING_NONE, 1, 0, PE_OVERFLOW_CLAMP, 128, PE_RANGE_CLAMPED,
     "positions past 127 reuse the last learned position"},
};

static PeRange range_at(const RangeCase *c, int last_pos) {
    PeParams p = pe_params_default(c->kind);
    p.rope_scaling = c->scaling;
    p.rope_factor = c->factor;
    p.rope_orig_ctx = c->orig_ctx;
    p.learned_overflow = c->overflow;
    return pe_position_range(&p, 512, 128, last_pos);
}

/* The verdict and fact at the first uncovered position; the last covered
 * one is the control that the boundary is where the scheme says. */
START_TEST(position_range_per_scheme) {
    const RangeCase *c = &RANGE_CASES[_i];
    PeRange in = range_at(c, c->covered - 1);
    ck_assert_msg(in.verdict == PE_RANGE_TRAINED, "%s at %d: %s", pe_kind_name(c->kind),
                  c->covered - 1, in.fact);
    PeRange out = range_at(c, c->covered);
    ck_assert_int_eq(out.verdict, c->past);
    ck_assert_str_eq(out.fact, c->fact);
}
END_TEST

/* The limit context_check_tokens enforces: the table under overflow policy
 * error, none otherwise. */
START_TEST(position_limit_follows_the_overflow_policy) {
    float table[3 * 4] = {0};
    PeTables t = {.positions = table, .n_positions = 3};
    PeParams p = pe_params_default(PE_LEARNED);
    PositionalEncoding pe;
    PosencError err;
    ck_assert_int_eq(pe_build(&pe, &p, 4, 1, 4, 16, &t, &err), 0);
    ck_assert_int_eq(pe_position_limit(&pe), 3);
    pe_free(&pe);
    p.learned_overflow = PE_OVERFLOW_CLAMP;
    ck_assert_int_eq(pe_build(&pe, &p, 4, 1, 4, 16, &t, &err), 0);
    ck_assert_int_eq(pe_position_limit(&pe), INT_MAX);
    pe_free(&pe);
    pe = make_rope(PE_ROPE_INTERLEAVED, PE_ROPE_SCALING_LINEAR);
    ck_assert_int_eq(pe_position_limit(&pe), INT_MAX);
    pe_free(&pe);
}
END_TEST

int main(void) {
    Suite *s = suite_create("positional");
    TCase *tc = tcase_create("math");
    tcase_add_test(tc, rope_composition);
    tcase_add_test(tc, rope_relative);
    tcase_add_test(tc, rope_pairings_equivalent);
    tcase_add_test(tc, alibi_slopes_1_to_64);
    tcase_add_test(tc, alibi_slopes_12_heads);
    tcase_add_test(tc, alibi_bias_is_linear_in_distance);
    tcase_add_test(tc, sinusoidal_closed_forms);
    tcase_add_test(tc, learned_needs_a_table);
    tcase_add_test(tc, t5_buckets_match_t5);
    tcase_add_test(tc, t5_bias_hook_reads_the_bucket);
    tcase_add_test(tc, t5_refuses_what_it_cannot_run);
    suite_add_tcase(s, tc);
    TCase *reg = tcase_create("registry");
    tcase_add_test(reg, registry_describes_every_scheme);
    tcase_add_test(reg, rope_rerotate_hook_moves_a_key);
    tcase_add_loop_test(reg, position_range_per_scheme, 0,
                        (int)(sizeof RANGE_CASES / sizeof *RANGE_CASES));
    tcase_add_test(reg, position_limit_follows_the_overflow_policy);
    suite_add_tcase(s, reg);
    return tests_run_suite(s);
}
