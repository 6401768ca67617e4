/* Cache and position bookkeeping on a model of every architecture family:
 * decoding token by token must equal recomputing the whole sequence, and
 * chunked prefill must equal one-shot prefill, for every scheme; a token at
 * a wrong position must be caught; a global offset must leave relative
 * schemes unchanged and move absolute ones. */
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
#include "tests/common.h"

/* Prefill and decode compute the same dot products; the SIMD kernels may
 * block a prefill's sums differently from a decode's.  float32 reassociation
 * over rows of <= 512 terms moves logits (|l| < 25) by ~1e-5. */
#define LOGIT_TOL 1e-4f
/* A wrong position moves logits by far more (the smallest measured margin
 * is reported by each check's message when it fails). */
#define WRONG_POS_MIN 1e-3f

static const int SEQ[] = {1, 403, 407, 261, 378, 442, 280, 283, 261, 301, 299, 350, 265, 319, 315};
#define SEQ_N ((int)(sizeof SEQ / sizeof SEQ[0]))

/* (model, scheme): stories260K under every scheme it can take, each zoo
 * model under its own, and the other families (below). */
typedef struct {
    int model;
    PeKind kind;
} Case;
static const Case CASES[] = {
    {0, PE_ROPE}, {0, PE_ALIBI}, {0, PE_SINUSOIDAL}, {0, PE_NONE},
    {1, PE_SINUSOIDAL}, {2, PE_LEARNED}, {3, PE_ROPE}, {4, PE_ALIBI}, {5, PE_NONE}, {6, PE_T5},
    /* the other families under their own scheme (gptneox: partial rotary),
     * and two overrides across families */
    {7, PE_ROPE}, {8, PE_ROPE}, {9, PE_ALIBI}, {10, PE_LEARNED}, {11, PE_ROPE}, {12, PE_ALIBI},
    {13, PE_ROPE}, {14, PE_ROPE}, {7, PE_ALIBI}, {9, PE_ROPE},
    /* per-layer tables: gemma3 (local/global theta, windows), cohere2
     * (sliding RoPE, global NoPE), gpt-oss (learned sinks in the online
     * softmax of prefill and decode alike) */
    {15, PE_ROPE}, {16, PE_ROPE}, {17, PE_ROPE},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

static TestsModel models[TESTS_N_MODELS];
static int ready;
static int seq[SEQ_N];

static void setup(void) { ready = tests_load_models(models, "cache-offset tests"); }
static void teardown(void) {
    if (ready) tests_free_models(models);
    ready = 0;
}

static const Model *case_model(const Case *c) { return &models[c->model].model; }

static const char *case_name(const Case *c) {
    static char buf[64];
    snprintf(buf, sizeof buf, "%s/%s", models[c->model].name, pe_kind_name(c->kind));
    return buf;
}

/* SEQ folded into the model's vocabulary. */
static const int *case_seq(const Case *c) {
    for (int i = 0; i < SEQ_N; i++) seq[i] = SEQ[i] % case_model(c)->config.vocab_size;
    return seq;
}

static void build(Context *ctx, const Case *c) {
    PeParams p = case_model(c)->pe;
    p.kind = c->kind;
    tests_build_context(ctx, case_model(c), &p, 64);
}

/* Logits of every position from one prefill of the whole sequence. */
static float *full_logits(const Case *c, int pos0) {
    Context ctx;
    build(&ctx, c);
    size_t v = (size_t)case_model(c)->config.vocab_size;
    float *out = malloc(sizeof(float) * v * SEQ_N);
    memcpy(out, context_forward(&ctx, case_seq(c), SEQ_N, pos0, 1), sizeof(float) * v * SEQ_N);
    context_free(&ctx);
    return out;
}

/* Feeds the sequence in chunks of the given sizes (cycled); the last token
 * alone may be placed `last_pos_error` positions off.  Returns the largest
 * difference of the last logits from `want`. */
static float incremental_last(const Case *c, const int *chunks, int n_chunks, int last_pos_error,
                              const float *want) {
    Context ctx;
    build(&ctx, c);
    const int *s = case_seq(c);
    int v = case_model(c)->config.vocab_size;
    const float *logits = NULL;
    for (int at = 0, k = 0; at < SEQ_N; k++) {
        int n = chunks[k % n_chunks];
        if (n > SEQ_N - at) n = SEQ_N - at;
        if (at + n == SEQ_N && n > 1) { /* the last token goes alone */
            context_forward(&ctx, s + at, n - 1, at, 0);
            at += n - 1;
            n = 1;
        }
        int pos0 = at + (at + n == SEQ_N ? last_pos_error : 0);
        logits = context_forward(&ctx, s + at, n, pos0, 0);
        at += n;
    }
    float d = tests_max_abs_diff(logits, want + (size_t)(SEQ_N - 1) * v, v);
    context_free(&ctx);
    return d;
}

START_TEST(incremental_equals_full) {
    if (!ready) return;
    const Case *c = &CASES[_i];
    float *full = full_logits(c, 0);
    Context ctx;
    build(&ctx, c);
    const int *s = case_seq(c);
    int v = case_model(c)->config.vocab_size;
    for (int t = 0; t < SEQ_N; t++) {
        const float *l = context_forward(&ctx, s + t, 1, t, 0);
        float d = tests_max_abs_diff(l, full + (size_t)t * v, v);
        ck_assert_msg(d <= LOGIT_TOL, "%s: position %d differs by %g", case_name(c), t, (double)d);
    }
    context_free(&ctx);
    free(full);
}
END_TEST

START_TEST(chunked_prefill_equals_one_shot) {
    if (!ready) return;
    const Case *c = &CASES[_i];
    float *full = full_logits(c, 0);
    const int sizes[][3] = {{2, 5, 3}, {7, 1, 4}, {4, 4, 4}, {13, 1, 1}};
    for (int s = 0; s < 4; s++) {
        float d = incremental_last(c, sizes[s], 3, 0, full);
        ck_assert_msg(d <= LOGIT_TOL, "%s: chunks {%d,%d,%d} differ by %g", case_name(c),
                      sizes[s][0], sizes[s][1], sizes[s][2], (double)d);
    }
    free(full);
}
END_TEST

/* Negative control: the same comparison with the last token one position
 * off must fail for every scheme that encodes positions at all. */
START_TEST(wrong_position_is_detected) {
    if (!ready) return;
    const Case *c = &CASES[_i];
    float *full = full_logits(c, 0);
    const int one[] = {1};
    float d_right = incremental_last(c, one, 1, 0, full);
    float d_wrong = incremental_last(c, one, 1, 1, full);
    ck_assert_float_le(d_right, LOGIT_TOL);
    if (c->kind == PE_NONE) /* NoPE has no positions to get wrong */
        ck_assert_float_le(d_wrong, LOGIT_TOL);
    else
        ck_assert_msg(d_wrong > WRONG_POS_MIN, "%s: off-by-one position went unnoticed (%g)",
                      case_name(c), (double)d_wrong);
    free(full);
}
END_TEST

/* --pos-offset: relative schemes see only differences, absolute ones move. */
START_TEST(global_offset) {
    if (!ready) return;
    const Case *c = &CASES[_i];
    float *base = full_logits(c, 0), *moved = full_logits(c, 50);
    float d = tests_max_abs_diff(base, moved, case_model(c)->config.vocab_size * SEQ_N);
    if (pe_is_relative(c->kind))
        ck_assert_msg(d <= LOGIT_TOL, "%s: offset 50 changed logits by %g", case_name(c), (double)d);
    else
        ck_assert_msg(d > WRONG_POS_MIN, "%s: offset 50 left logits unchanged (%g)", case_name(c),
                      (double)d);
    free(base);
    free(moved);
}
END_TEST

START_TEST(chunk_checks) {
    if (!ready) return;
    Context ctx;
    build(&ctx, &CASES[0]);
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
    /* learned: positions past the 128-row table are refused ... */
    build(&ctx, &CASES[5]);
    const int *s = case_seq(&CASES[5]);
    ck_assert_int_eq(context_check_chunk(&ctx, s, 3, 126, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "past the learned table of 128 positions"));
    context_free(&ctx);
    /* ... unless clamped */
    PeParams p = case_model(&CASES[5])->pe;
    p.learned_overflow = PE_OVERFLOW_CLAMP;
    tests_build_context(&ctx, case_model(&CASES[5]), &p, 64);
    ck_assert_int_eq(context_check_chunk(&ctx, s, 3, 126, &err), 0);
    context_free(&ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cache_offsets");
    TCase *tc = tcase_create("llama_and_gpt");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, incremental_equals_full, 0, N_CASES);
    tcase_add_loop_test(tc, chunked_prefill_equals_one_shot, 0, N_CASES);
    tcase_add_loop_test(tc, wrong_position_is_detected, 0, N_CASES);
    tcase_add_loop_test(tc, global_offset, 0, N_CASES);
    tcase_add_test(tc, chunk_checks);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
