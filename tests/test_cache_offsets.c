/* Cache and position bookkeeping on a real model (stories260K): decoding
 * token by token must equal recomputing the whole sequence, chunked prefill
 * must equal one-shot prefill, for every scheme; a wrong position must be
 * caught. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
#include "tests/common.h"

/* Prefill and decode run the same per-row dot products in the same order
 * today, so they agree bit for bit; the tolerance leaves room for kernels
 * that block the sums differently (float32 reassociation over rows of 64
 * to 172 terms moves logits of magnitude ~10 by ~1e-5). */
#define LOGIT_TOL 1e-4f
/* A wrong position moves logits by far more (measured: rope 4.7, alibi 0.47,
 * sinusoidal 2.3 on this sequence). */
#define WRONG_POS_MIN 1e-3f

static const int SEQ[] = {1, 403, 407, 261, 378, 442, 280, 283, 261, 301, 299, 350, 265, 319, 315};
#define SEQ_N ((int)(sizeof SEQ / sizeof SEQ[0]))

static Model model;
static int have_model;

static void setup(void) {
    const char *dir = tests_models_dir("stories260K cache-offset tests");
    if (!dir) return;
    PosencError err;
    ck_assert_msg(model_load(&model, tests_model_path(dir, "stories260K/stories260K.bin"), &err) == 0,
                  "%s", err.msg);
    have_model = 1;
}

static void teardown(void) {
    if (have_model) model_free(&model);
    have_model = 0;
}

static const PeKind SCHEMES[] = {PE_ROPE, PE_ALIBI, PE_SINUSOIDAL, PE_NONE};
#define N_SCHEMES 4

static void build(Context *ctx, PeKind kind) {
    PeParams p = model.pe;
    p.kind = kind;
    PosencError err;
    ck_assert_msg(context_build(ctx, &model, &p, 64, 64, &err) == 0, "%s", err.msg);
}

static float max_abs_diff(const float *a, const float *b, int n) {
    float m = 0.0f;
    for (int i = 0; i < n; i++) m = fmaxf(m, fabsf(a[i] - b[i]));
    return m;
}

/* Logits of every position from one prefill of the whole sequence. */
static float *full_logits(PeKind kind, int pos0) {
    Context ctx;
    build(&ctx, kind);
    int v = model.config.vocab_size;
    float *out = malloc(sizeof(float) * (size_t)v * SEQ_N);
    memcpy(out, context_forward(&ctx, SEQ, SEQ_N, pos0, 1), sizeof(float) * (size_t)v * SEQ_N);
    context_free(&ctx);
    return out;
}

/* Feeds SEQ in chunks of the given sizes (cycled); the last token may be
 * placed at a deliberately wrong position.  Returns the last logits. */
static float incremental_last(PeKind kind, const int *chunks, int n_chunks, int last_pos_error,
                              const float *want) {
    Context ctx;
    build(&ctx, kind);
    int v = model.config.vocab_size;
    const float *logits = NULL;
    for (int at = 0, c = 0; at < SEQ_N; c++) {
        int n = chunks[c % n_chunks];
        if (n > SEQ_N - at) n = SEQ_N - at;
        int pos0 = at + (at + n == SEQ_N ? last_pos_error : 0);
        if (at + n == SEQ_N && last_pos_error && n > 1) {
            /* Keep the error on the last token alone. */
            context_forward(&ctx, SEQ + at, n - 1, at, 0);
            at += n - 1;
            n = 1;
            pos0 = at + last_pos_error;
        }
        logits = context_forward(&ctx, SEQ + at, n, pos0, 0);
        at += n;
    }
    float d = max_abs_diff(logits, want + (size_t)(SEQ_N - 1) * v, v);
    context_free(&ctx);
    return d;
}

START_TEST(incremental_equals_full) {
    if (!have_model) return;
    PeKind kind = SCHEMES[_i];
    float *full = full_logits(kind, 0);
    const int one[] = {1};
    float d = incremental_last(kind, one, 1, 0, full);
    ck_assert_msg(d <= LOGIT_TOL, "%s: token-by-token differs from full by %g", pe_kind_name(kind),
                  (double)d);
    /* Also every intermediate position, not only the last. */
    Context ctx;
    build(&ctx, kind);
    int v = model.config.vocab_size;
    for (int t = 0; t < SEQ_N; t++) {
        const float *l = context_forward(&ctx, SEQ + t, 1, t, 0);
        float dt = max_abs_diff(l, full + (size_t)t * v, v);
        ck_assert_msg(dt <= LOGIT_TOL, "%s: position %d differs by %g", pe_kind_name(kind), t,
                      (double)dt);
    }
    context_free(&ctx);
    free(full);
}
END_TEST

START_TEST(chunked_prefill_equals_one_shot) {
    if (!have_model) return;
    PeKind kind = SCHEMES[_i];
    float *full = full_logits(kind, 0);
    const int sizes[][3] = {{2, 5, 3}, {7, 1, 4}, {4, 4, 4}, {13, 1, 1}};
    for (int s = 0; s < 4; s++) {
        float d = incremental_last(kind, sizes[s], 3, 0, full);
        ck_assert_msg(d <= LOGIT_TOL, "%s: chunks {%d,%d,%d} differ by %g", pe_kind_name(kind),
                      sizes[s][0], sizes[s][1], sizes[s][2], (double)d);
    }
    free(full);
}
END_TEST

/* Negative control: the same comparison with the last token one position
 * off must fail for every scheme that encodes positions at all. */
START_TEST(wrong_position_is_detected) {
    if (!have_model) return;
    PeKind kind = SCHEMES[_i];
    float *full = full_logits(kind, 0);
    const int one[] = {1};
    float d_right = incremental_last(kind, one, 1, 0, full);
    float d_wrong = incremental_last(kind, one, 1, 1, full);
    ck_assert_float_le(d_right, LOGIT_TOL);
    if (kind == PE_NONE)   /* NoPE has no positions to get wrong */
        ck_assert_float_le(d_wrong, LOGIT_TOL);
    else
        ck_assert_msg(d_wrong > WRONG_POS_MIN, "%s: off-by-one position went unnoticed (%g)",
                      pe_kind_name(kind), (double)d_wrong);
    free(full);
}
END_TEST

START_TEST(chunk_checks) {
    if (!have_model) return;
    Context ctx;
    build(&ctx, PE_ROPE);
    PosencError err;
    int bad[] = {1, 512};
    ck_assert_int_eq(context_check_chunk(&ctx, bad, 2, 0, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "out of range"));
    int neg[] = {-1};
    ck_assert_int_eq(context_check_chunk(&ctx, neg, 1, 0, &err), -1);
    int *many = calloc(65, sizeof(int));
    ck_assert_int_eq(context_check_chunk(&ctx, many, 65, 0, &err), -1);
    ck_assert_int_eq(context_check_chunk(&ctx, SEQ, 3, -1, &err), -1);
    free(many);
    ck_assert_int_eq(context_check_chunk(&ctx, SEQ, SEQ_N, 0, &err), 0);
    context_free(&ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cache_offsets");
    TCase *tc = tcase_create("stories260K");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, incremental_equals_full, 0, N_SCHEMES);
    tcase_add_loop_test(tc, chunked_prefill_equals_one_shot, 0, N_SCHEMES);
    tcase_add_loop_test(tc, wrong_position_is_detected, 0, N_SCHEMES);
    tcase_add_test(tc, chunk_checks);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
