/* Perplexity bookkeeping on stories260K: which predictions each method
 * scores, that the methods agree where they must, and that streaming
 * through context shifts stays close to in-window quality while the
 * stale-key bug does not. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modes/perplexity.h"
#include "tokenizer/tokenizer.h"
#include "tests/common.h"

static Model model;
static int *ids, n_ids, ready;

static void setup(void) {
    const char *dir = tests_models_dir("stories260K perplexity tests");
    if (!dir) return;
    Tokenizer tok;
    tests_load_model(&model, tests_model_path(dir, "stories260K/stories260K.bin"));
    tests_load_tokenizer(&tok, tests_model_path(dir, "stories260K/tok512.bin"), 512);
    size_t len;
    char *text = tests_read_file(tests_text_path(dir, "tinystories-valid-head.txt"), &len);
    if (len > 6000) len = 6000; /* the first 6000 bytes */
    ids = malloc((len + 3) * sizeof(int));
    PosencError err;
    ck_assert_int_eq(tokenizer_encode(&tok, text, len, 1, 0, ids, &n_ids, &err), 0);
    free(text);
    tokenizer_free(&tok);
    ready = 1;
}

static void teardown(void) {
    if (!ready) return;
    free(ids);
    model_free(&model);
    ready = 0;
}

static PplResult score(PeKind kind, int n_ctx, PplOptions o, int n_tokens) {
    PeParams p = model.pe;
    p.kind = kind;
    Context ctx;
    tests_build_context(&ctx, &model, &p, n_ctx);
    PplResult r;
    PosencError err;
    ck_assert_msg(ppl_evaluate(&ctx, ids, n_tokens, &o, &r, NULL, NULL, &err) == 0, "%s", err.msg);
    context_free(&ctx);
    return r;
}

START_TEST(token_nll_closed_form) {
    /* logf(3) carries float rounding (~1e-7 relative): tolerances are 1e-6. */
    float logits[3] = {0.0f, logf(3.0f), -INFINITY};
    ck_assert_double_eq_tol(ppl_token_nll(logits, 3, 0), log(4.0), 1e-6);
    ck_assert_double_eq_tol(ppl_token_nll(logits, 3, 1), log(4.0 / 3.0), 1e-6);
    float big[2] = {1000.0f, 1000.0f}; /* log-sum-exp must not overflow */
    ck_assert_double_eq_tol(ppl_token_nll(big, 2, 1), log(2.0), 1e-9);
}
END_TEST

START_TEST(windows_score_each_token_once) {
    if (!ready) return;
    PplResult r = score(PE_ROPE, 64, (PplOptions){.window = 64, .max_chunks = 3}, n_ids);
    ck_assert_int_eq(r.n_scored, 3 * 64);
    long per_pos = 0;
    double sum = 0.0;
    for (int i = 0; i < r.n_pos; i++) {
        ck_assert_int_eq(r.count_by_pos[i], 3);
        per_pos += r.count_by_pos[i];
        sum += r.nll_by_pos[i];
    }
    ck_assert_int_eq(per_pos, r.n_scored);
    ck_assert_double_eq_tol(sum, r.nll_sum, 1e-6 * r.nll_sum);
    ppl_result_free(&r);
    /* All windows: floor((n-1)/C). */
    r = score(PE_ROPE, 64, (PplOptions){.window = 64}, n_ids);
    ck_assert_int_eq(r.n_scored, (long)(n_ids - 1) / 64 * 64);
    ppl_result_free(&r);
}
END_TEST

START_TEST(stride_scores_last_predictions) {
    if (!ready) return;
    PplResult r = score(PE_ROPE, 64, (PplOptions){.window = 64, .stride = 16, .max_chunks = 4}, n_ids);
    ck_assert_int_eq(r.n_scored, 64 + 3 * 16);
    ck_assert_int_eq(r.count_by_pos[0], 1);   /* only the first window scores early positions */
    ck_assert_int_eq(r.count_by_pos[63], 4);
    ppl_result_free(&r);
    /* Stride = window is the consecutive method. */
    PplResult a = score(PE_ROPE, 64, (PplOptions){.window = 64, .stride = 64, .max_chunks = 3}, n_ids);
    PplResult b = score(PE_ROPE, 64, (PplOptions){.window = 64, .max_chunks = 3}, n_ids);
    ck_assert_double_eq_tol(a.nll_sum, b.nll_sum, 1e-9);
    ppl_result_free(&a);
    ppl_result_free(&b);
}
END_TEST

/* Streaming 65 tokens through 64 cells never shifts: it is one window. */
START_TEST(stream_without_shift_equals_one_window) {
    if (!ready) return;
    PplResult w = score(PE_ROPE, 64, (PplOptions){.window = 64, .max_chunks = 1}, n_ids);
    PplResult s = score(PE_ROPE, 64, (PplOptions){.window = 64, .stream = 1}, 65);
    ck_assert_int_eq(s.n_scored, 64);
    ck_assert_double_eq_tol(s.nll_sum, w.nll_sum, 1e-4);
    ppl_result_free(&w);
    ppl_result_free(&s);
}
END_TEST

/* Through ~15 shifts of a 64-cell cache the rope model stays within 10% of
 * its in-window NLL; without re-rotation it is clearly worse. */
START_TEST(stream_with_shifts_stays_coherent) {
    if (!ready) return;
    PplResult w = score(PE_ROPE, 64, (PplOptions){.window = 64}, n_ids);
    PplResult s = score(PE_ROPE, 64, (PplOptions){.window = 64, .stream = 1, .keep = 4}, n_ids);
    PplResult bug = score(PE_ROPE, 64, (PplOptions){.window = 64, .stream = 1, .keep = 4,
                                                    .shift = CONTEXT_SHIFT_NO_REROTATE}, n_ids);
    double nw = w.nll_sum / w.n_scored, ns = s.nll_sum / s.n_scored, nb = bug.nll_sum / bug.n_scored;
    printf("stories260K rope ctx 64: window NLL %.4f, stream %.4f, stream without re-rotation %.4f "
           "(%ld tokens)\n", nw, ns, nb, s.n_scored);
    ck_assert_int_eq(s.n_scored, n_ids - 1);
    ck_assert_msg(fabs(ns - nw) <= 0.10 * nw, "stream %g vs window %g", ns, nw);
    ck_assert_msg(nb > ns + 0.1, "no-rerotate %g is not worse than %g", nb, ns);
    ppl_result_free(&w);
    ppl_result_free(&s);
    ppl_result_free(&bug);
}
END_TEST

START_TEST(bad_options) {
    if (!ready) return;
    Context ctx;
    tests_build_context(&ctx, &model, &model.pe, 64);
    PosencError err;
    PplResult r;
    PplOptions too_big = {.window = 128};
    ck_assert_int_eq(ppl_evaluate(&ctx, ids, n_ids, &too_big, &r, NULL, NULL, &err), -1);
    PplOptions bad_stride = {.window = 64, .stride = 65};
    ck_assert_int_eq(ppl_evaluate(&ctx, ids, n_ids, &bad_stride, &r, NULL, NULL, &err), -1);
    PplOptions ok = {.window = 64};
    ck_assert_int_eq(ppl_evaluate(&ctx, ids, 10, &ok, &r, NULL, NULL, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "too few"));
    context_free(&ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ppl");
    TCase *tc = tcase_create("stories260K");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, token_nll_closed_form);
    tcase_add_test(tc, windows_score_each_token_once);
    tcase_add_test(tc, stride_scores_last_predictions);
    tcase_add_test(tc, stream_without_shift_equals_one_window);
    tcase_add_test(tc, stream_with_shifts_stays_coherent);
    tcase_add_test(tc, bad_options);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
