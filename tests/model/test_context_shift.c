/* Context shift on a model of every architecture family (stories260K,
 * llama; the PE zoo, gpt2; tiny random qwen2, gptneox, bloom, starcoder,
 * phi2, mpt, gemma).  A shift keeps the first cells, drops some, and moves the
 * rest to lower positions; the logits that follow must equal a fresh
 * computation of the kept tokens at their new positions.
 *
 * Exactness: for rope, alibi and t5 a shift keeps each moved cell's keys and
 * values, which in layers >= 2 were computed while the dropped tokens were
 * still visible: the approximation every engine makes.  Layer 1's keys and
 * values depend only on the token and its position, so on a model's first
 * layer alone the equality is exact, and that is what is tested.  The
 * recompute path (sinusoidal, learned, and none, whose hidden states infer
 * position from the causal mask) is exact at any depth: it is tested on
 * all layers.  Global offsets are tested in test_cache_offsets.c. */
#include <stdlib.h>
#include <string.h>

#include "model/shift.h"
#include "tests/common.h"

/* Shifted keys are R(-d)R(p)k instead of R(p-d)k: float rounding of angles
 * below 30 rad is < 4e-6; logits (|l| < 15) agree to ~1e-5. */
#define LOGIT_TOL 1e-4f
/* Measured margins of the negative controls are > 0.05. */
#define BROKEN_MIN 1e-3f

static const int SEQ[] = {1,   403, 407, 261, 378, 432, 383, 286, 261, 301, 299, 350,
                          265, 319, 315, 283, 261, 404, 266, 262, 290, 303, 346, 270};
#define SEQ_N 24
#define KEEP 4
#define DISCARD 10
#define NEXT 330

static TestsModel models[TESTS_N_MODELS];
static Model first_layer[TESTS_N_MODELS]; /* same weights, first layer only */
static int ready;

static void setup(void) {
    ready = tests_load_models(models, "context-shift tests");
    for (int m = 0; ready && m < TESTS_N_MODELS; m++) {
        first_layer[m] = models[m].model;
        first_layer[m].config.n_layers = 1;
    }
}

static void teardown(void) {
    if (ready) tests_free_models(models);
    ready = 0;
}

/* (model, scheme, rope scaling): stories260K (llama) under every scheme it
 * can take, each zoo model (gpt2) under its own, rope with every scaling. */
typedef struct {
    int model;
    PeKind kind;
    PeRopeScaling scaling;
} Variant;

static const Variant VARIANTS[] = {
    {0, PE_ROPE, PE_ROPE_SCALING_NONE}, {0, PE_ROPE, PE_ROPE_SCALING_LINEAR},
    {0, PE_ROPE, PE_ROPE_SCALING_NTK},  {0, PE_ROPE, PE_ROPE_SCALING_YARN},
    {0, PE_ALIBI, PE_ROPE_SCALING_NONE}, {0, PE_NONE, PE_ROPE_SCALING_NONE},
    {0, PE_SINUSOIDAL, PE_ROPE_SCALING_NONE},
    {1, PE_SINUSOIDAL, PE_ROPE_SCALING_NONE}, {2, PE_LEARNED, PE_ROPE_SCALING_NONE},
    {3, PE_ROPE, PE_ROPE_SCALING_NONE}, {3, PE_ROPE, PE_ROPE_SCALING_LINEAR},
    {3, PE_ROPE, PE_ROPE_SCALING_NTK},  {3, PE_ROPE, PE_ROPE_SCALING_YARN},
    {4, PE_ALIBI, PE_ROPE_SCALING_NONE}, {5, PE_NONE, PE_ROPE_SCALING_NONE},
    {6, PE_T5, PE_ROPE_SCALING_NONE},
    /* qwen2, gptneox (partial rotary: only the rotated dims re-rotate),
     * bloom, starcoder, phi2, mpt, gemma, mistral (sliding window) under
     * their own scheme, and overrides across them */
    {7, PE_ROPE, PE_ROPE_SCALING_NONE}, {8, PE_ROPE, PE_ROPE_SCALING_NONE},
    {8, PE_ROPE, PE_ROPE_SCALING_YARN}, {9, PE_ALIBI, PE_ROPE_SCALING_NONE},
    {10, PE_LEARNED, PE_ROPE_SCALING_NONE}, {11, PE_ROPE, PE_ROPE_SCALING_NONE},
    {12, PE_ALIBI, PE_ROPE_SCALING_NONE}, {13, PE_ROPE, PE_ROPE_SCALING_NONE},
    {14, PE_ROPE, PE_ROPE_SCALING_NONE},
    {7, PE_ALIBI, PE_ROPE_SCALING_NONE}, {9, PE_ROPE, PE_ROPE_SCALING_NONE},
    /* per-layer tables (their first layer: a sliding RoPE layer; the NoPE
     * layer's shift is tested alone in test_layers.c); gpt-oss's with its
     * sinks and YaRN, the cells kept as --keep keeps them */
    {15, PE_ROPE, PE_ROPE_SCALING_NONE}, {16, PE_ROPE, PE_ROPE_SCALING_NONE},
    {17, PE_ROPE, PE_ROPE_SCALING_YARN},
};
#define N_VARIANTS ((int)(sizeof VARIANTS / sizeof VARIANTS[0]))

static int recomputes(PeKind kind) { return pe_kind_ops(kind)->shift == PE_SHIFT_RECOMPUTE; }

/* alibi and t5 keep no position in the cells: their stale shift is the
 * correct one. */
static int updates_positions_only(PeKind kind) {
    return pe_kind_ops(kind)->shift == PE_SHIFT_POSITIONS;
}

/* Recomputing schemes are exact at any depth: test them on all layers. */
static const Model *model_for(const Variant *v) {
    return recomputes(v->kind) ? &models[v->model].model : &first_layer[v->model];
}

static const char *variant_name(const Variant *v) {
    static char buf[96];
    snprintf(buf, sizeof buf, "%s/%s/%s", models[v->model].name, pe_kind_name(v->kind),
             pe_rope_scaling_name(v->scaling));
    return buf;
}

static int vocab(const Variant *v) { return model_for(v)->config.vocab_size; }

/* SEQ (and NEXT) folded into the model's vocabulary. */
static int token_at(const Variant *v, int i) { return (i < SEQ_N ? SEQ[i] : NEXT) % vocab(v); }

static void build(Context *ctx, const Variant *v, int n_ctx) {
    PeParams p = model_for(v)->pe;
    p.kind = v->kind;
    p.rope_scaling = v->scaling;
    p.rope_factor = v->scaling == PE_ROPE_SCALING_NONE ? 1.0f : 4.0f;
    tests_build_context(ctx, model_for(v), &p, n_ctx);
}

static float *copy_logits(const float *l, int n) {
    float *out = malloc((size_t)n * sizeof(float));
    memcpy(out, l, (size_t)n * sizeof(float));
    return out;
}

/* Fills the cache with SEQ, shifts, decodes NEXT `pos_error` positions
 * past the right one; returns the logits (caller frees). */
static float *after_shift(const Variant *v, ContextShiftMode mode, int pos_error) {
    Context ctx;
    build(&ctx, v, SEQ_N);
    int seq[SEQ_N];
    for (int i = 0; i < SEQ_N; i++) seq[i] = token_at(v, i);
    context_forward(&ctx, seq, SEQ_N, 0, 0);
    PosencError err;
    ck_assert_int_eq(context_shift(&ctx, KEEP, DISCARD, mode, &err), 0);
    ck_assert_int_eq(ctx.cache.n_used, SEQ_N - DISCARD);
    ck_assert_int_eq(ctx.cache.pos[ctx.cache.n_used - 1], SEQ_N - DISCARD - 1);
    int tok = token_at(v, SEQ_N);
    float *out = copy_logits(context_forward(&ctx, &tok, 1, SEQ_N - DISCARD + pos_error, 0), vocab(v));
    context_free(&ctx);
    return out;
}

/* The kept tokens computed from scratch at positions 0.., then NEXT. */
static float *fresh(const Variant *v) {
    int kept[SEQ_N - DISCARD + 1], n = 0;
    for (int i = 0; i <= SEQ_N; i++)
        if (i < KEEP || i >= KEEP + DISCARD) kept[n++] = token_at(v, i);
    Context ctx;
    build(&ctx, v, SEQ_N);
    float *out = copy_logits(context_forward(&ctx, kept, n, 0, 0), vocab(v));
    context_free(&ctx);
    return out;
}

START_TEST(shift_equals_fresh_computation) {
    if (!ready) return;
    const Variant *v = &VARIANTS[_i];
    float *want = fresh(v), *got = after_shift(v, CONTEXT_SHIFT_ON, 0);
    float d = tests_max_abs_diff(got, want, vocab(v));
    ck_assert_msg(d <= LOGIT_TOL, "%s: shifted differs from fresh by %g", variant_name(v), (double)d);
    free(want);
    free(got);
}
END_TEST

/* Negative controls: positions moved without fixing what depends on them
 * (keys for rope, the residual stream for sinusoidal and none), and a query
 * one position off (NoPE cannot tell; for t5 the distances 14..23 span
 * exact and log-spaced buckets).  ALiBi and t5 keep no position in the
 * cells, so their stale shift is their correct one. */
START_TEST(broken_shifts_are_detected) {
    if (!ready) return;
    const Variant *v = &VARIANTS[_i];
    float *want = fresh(v);
    float *stale = after_shift(v, CONTEXT_SHIFT_NO_REROTATE, 0);
    float *off = after_shift(v, CONTEXT_SHIFT_ON, 1);
    float d_stale = tests_max_abs_diff(stale, want, vocab(v));
    float d_off = tests_max_abs_diff(off, want, vocab(v));
    if (!updates_positions_only(v->kind))
        ck_assert_msg(d_stale > BROKEN_MIN, "%s: stale keys went unnoticed (%g)", variant_name(v),
                      (double)d_stale);
    else
        ck_assert_float_le(d_stale, LOGIT_TOL);
    if (v->kind != PE_NONE)
        ck_assert_msg(d_off > BROKEN_MIN, "%s: off-by-one query position went unnoticed (%g)",
                      variant_name(v), (double)d_off);
    free(want);
    free(stale);
    free(off);
}
END_TEST

START_TEST(shift_bookkeeping) {
    if (!ready) return;
    Context ctx;
    build(&ctx, &VARIANTS[0], SEQ_N);
    context_forward(&ctx, SEQ, SEQ_N, 7, 0); /* stories260K: SEQ is in its vocabulary */
    PosencError err;
    ck_assert_int_eq(context_shift(&ctx, KEEP, DISCARD, CONTEXT_SHIFT_ON, &err), 0);
    for (int c = 0; c < ctx.cache.n_used; c++) {
        ck_assert_int_eq(ctx.cache.pos[c], 7 + c);
        ck_assert_int_eq(ctx.cache.token[c], c < KEEP ? SEQ[c] : SEQ[c + DISCARD]);
    }
    char ranges[64];
    kv_cache_format_positions(&ctx.cache, ranges, sizeof ranges);
    ck_assert_str_eq(ranges, "7-20");
    ck_assert_int_eq(context_shift(&ctx, 10, 5, CONTEXT_SHIFT_ON, &err), -1);
    ck_assert_int_eq(context_shift(&ctx, 0, 0, CONTEXT_SHIFT_ON, &err), -1);
    ck_assert_int_eq(context_shift_discard(&ctx, 4), 5);
    context_free(&ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("context_shift");
    TCase *tc = tcase_create("llama_and_gpt");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, shift_equals_fresh_computation, 0, N_VARIANTS);
    tcase_add_loop_test(tc, broken_shifts_are_detected, 0, N_VARIANTS);
    tcase_add_test(tc, shift_bookkeeping);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
