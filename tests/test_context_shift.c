/* Context shift and global offsets on stories260K (llama).  A shift keeps
 * the first cells, drops some, and moves the rest to lower positions; the
 * logits that follow must equal a fresh computation of the kept tokens at
 * their new positions.
 *
 * Exactness: for rope/alibi/none a shift keeps each moved cell's keys and
 * values, which in layers >= 2 were computed while the dropped tokens were
 * still visible — an approximation every engine makes.  Layer 1's keys and
 * values depend only on the token and its position, so on the model's
 * first layer alone the equality is exact, and that is what is tested.
 * The recompute path (sinusoidal, and none, whose hidden states infer
 * position from the causal mask) is exact at any depth: it is tested on
 * all five layers. */
#include <math.h>
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

static Model full, one_layer;
static int ready;

static void setup(void) {
    const char *dir = tests_models_dir("stories260K context-shift tests");
    if (!dir) return;
    PosencError err;
    ck_assert_msg(model_load(&full, tests_model_path(dir, "stories260K/stories260K.bin"), &err) == 0,
                  "%s", err.msg);
    one_layer = full;               /* same weights, first layer only */
    one_layer.config.n_layers = 1;
    ready = 1;
}

static void teardown(void) {
    if (ready) model_free(&full);
    ready = 0;
}

typedef struct {
    PeKind kind;
    PeRopeScaling scaling;
} Variant;

static const Variant VARIANTS[] = {
    {PE_ROPE, PE_ROPE_SCALING_NONE}, {PE_ROPE, PE_ROPE_SCALING_LINEAR},
    {PE_ROPE, PE_ROPE_SCALING_NTK},  {PE_ROPE, PE_ROPE_SCALING_YARN},
    {PE_ALIBI, PE_ROPE_SCALING_NONE}, {PE_NONE, PE_ROPE_SCALING_NONE},
    {PE_SINUSOIDAL, PE_ROPE_SCALING_NONE},
};
#define N_VARIANTS 7

/* Recomputing schemes are exact at any depth: test them on all layers. */
static const Model *model_for(PeKind kind) {
    return kind == PE_SINUSOIDAL || kind == PE_NONE ? &full : &one_layer;
}

static void build(Context *ctx, const Variant *v, int n_ctx) {
    PeParams p = full.pe;
    p.kind = v->kind;
    p.rope_scaling = v->scaling;
    p.rope_factor = v->scaling == PE_ROPE_SCALING_NONE ? 1.0f : 4.0f;
    PosencError err;
    ck_assert_msg(context_build(ctx, model_for(v->kind), &p, n_ctx, n_ctx, &err) == 0, "%s", err.msg);
}

static float max_diff(const float *a, const float *b) {
    float m = 0.0f;
    for (int i = 0; i < 512; i++) m = fmaxf(m, fabsf(a[i] - b[i]));
    return m;
}

/* Fills the cache with SEQ, shifts, decodes NEXT at `pos_error` past the
 * right position; returns the logits (512 floats, caller frees). */
static float *after_shift(const Variant *v, ContextShiftMode mode, int pos_error) {
    Context ctx;
    build(&ctx, v, SEQ_N);
    context_forward(&ctx, SEQ, SEQ_N, 0, 0);
    PosencError err;
    ck_assert_int_eq(context_shift(&ctx, KEEP, DISCARD, mode, &err), 0);
    ck_assert_int_eq(ctx.cache.n_used, SEQ_N - DISCARD);
    ck_assert_int_eq(ctx.cache.pos[ctx.cache.n_used - 1], SEQ_N - DISCARD - 1);
    int tok = NEXT;
    float *out = malloc(512 * sizeof(float));
    memcpy(out, context_forward(&ctx, &tok, 1, SEQ_N - DISCARD + pos_error, 0), 512 * sizeof(float));
    context_free(&ctx);
    return out;
}

/* The kept tokens computed from scratch at positions 0.., then NEXT. */
static float *fresh(const Variant *v) {
    int kept[SEQ_N - DISCARD + 1];
    memcpy(kept, SEQ, KEEP * sizeof(int));
    memcpy(kept + KEEP, SEQ + KEEP + DISCARD, (SEQ_N - KEEP - DISCARD) * sizeof(int));
    kept[SEQ_N - DISCARD] = NEXT;
    Context ctx;
    build(&ctx, v, SEQ_N);
    float *out = malloc(512 * sizeof(float));
    memcpy(out, context_forward(&ctx, kept, SEQ_N - DISCARD + 1, 0, 0), 512 * sizeof(float));
    context_free(&ctx);
    return out;
}

START_TEST(shift_equals_fresh_computation) {
    if (!ready) return;
    const Variant *v = &VARIANTS[_i];
    float *want = fresh(v), *got = after_shift(v, CONTEXT_SHIFT_ON, 0);
    float d = max_diff(got, want);
    ck_assert_msg(d <= LOGIT_TOL, "%s/%s: shifted differs from fresh by %g", pe_kind_name(v->kind),
                  pe_rope_scaling_name(v->scaling), (double)d);
    free(want);
    free(got);
}
END_TEST

/* Negative controls: positions moved without fixing what depends on them
 * (keys for rope, the residual stream for sinusoidal and none), and a query
 * one position off (NoPE cannot tell).  ALiBi keeps no position in the
 * cells, so its stale shift is its correct one. */
START_TEST(broken_shifts_are_detected) {
    if (!ready) return;
    const Variant *v = &VARIANTS[_i];
    float *want = fresh(v);
    float *stale = after_shift(v, CONTEXT_SHIFT_NO_REROTATE, 0);
    float *off = after_shift(v, CONTEXT_SHIFT_ON, 1);
    float d_stale = max_diff(stale, want), d_off = max_diff(off, want);
    if (v->kind != PE_ALIBI)
        ck_assert_msg(d_stale > BROKEN_MIN, "%s: stale keys went unnoticed (%g)",
                      pe_kind_name(v->kind), (double)d_stale);
    else
        ck_assert_float_le(d_stale, LOGIT_TOL);
    if (v->kind != PE_NONE)
        ck_assert_msg(d_off > BROKEN_MIN, "%s/%s: off-by-one query position went unnoticed (%g)",
                      pe_kind_name(v->kind), pe_rope_scaling_name(v->scaling), (double)d_off);
    free(want);
    free(stale);
    free(off);
}
END_TEST

/* A global offset leaves relative schemes unchanged and moves absolute ones. */
START_TEST(global_offset) {
    if (!ready) return;
    const Variant *v = &VARIANTS[_i];
    Context a, b;
    build(&a, v, SEQ_N);
    build(&b, v, SEQ_N);
    float base[512];
    memcpy(base, context_forward(&a, SEQ, SEQ_N, 0, 0), sizeof base);
    const float *moved = context_forward(&b, SEQ, SEQ_N, 100, 0);
    float d = max_diff(base, moved);
    if (pe_is_relative(v->kind))
        ck_assert_msg(d <= LOGIT_TOL, "%s/%s: offset 100 changed logits by %g", pe_kind_name(v->kind),
                      pe_rope_scaling_name(v->scaling), (double)d);
    else
        ck_assert_msg(d > BROKEN_MIN, "%s: offset 100 left logits unchanged (%g)",
                      pe_kind_name(v->kind), (double)d);
    context_free(&a);
    context_free(&b);
}
END_TEST

START_TEST(shift_bookkeeping) {
    if (!ready) return;
    Context ctx;
    build(&ctx, &VARIANTS[0], SEQ_N);
    context_forward(&ctx, SEQ, SEQ_N, 7, 0);
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
    TCase *tc = tcase_create("stories260K");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, shift_equals_fresh_computation, 0, N_VARIANTS);
    tcase_add_loop_test(tc, broken_shifts_are_detected, 0, N_VARIANTS);
    tcase_add_loop_test(tc, global_offset, 0, N_VARIANTS);
    tcase_add_test(tc, shift_bookkeeping);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
