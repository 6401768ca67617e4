/* stories260K against the independent NumPy reference (tools/reference.py,
 * float64): last-position logits for the native scheme and every --pe
 * override, and greedy text byte for byte (the rope texts are also
 * byte-identical to llama2.c's run, checked when the fixtures were made). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
#include "modes/generate.h"
#include "tests/common.h"
#include "tests/fixtures/stories260k_ref.h"

/* Float32 against float64 over 5 layers of width 64: measured error is
 * ~1e-5 (llama2.c itself is 8.1e-6 from the reference); 1e-4 is the
 * issue's bound and still 100x tighter than any scheme change. */
#define LOGIT_TOL 1e-4f

static Model model;
static Tokenizer tok;
static int ready;

static void setup(void) {
    const char *dir = tests_models_dir("stories260K reference logits and greedy text");
    if (!dir) return;
    tests_load_model(&model, tests_model_path(dir, "stories260K/stories260K.bin"));
    tests_load_tokenizer(&tok, tests_model_path(dir, "stories260K/tok512.bin"), 512);
    ready = 1;
}

static void teardown(void) {
    if (!ready) return;
    tokenizer_free(&tok);
    model_free(&model);
    ready = 0;
}

static PeParams params_for(const char *name, float theta, float max_bias) {
    PeParams p = model.pe;
    ck_assert_int_eq(pe_kind_from_name(name, &p.kind), 0);
    p.rope_theta = theta;
    p.alibi_max_bias = max_bias;
    return p;
}

static float logits_error(const Ref260kLogits *ref) {
    PeParams p = params_for(ref->pe, ref->rope_theta, ref->alibi_max_bias);
    Context ctx;
    tests_build_context(&ctx, &model, &p, 64);
    const float *l = context_forward(&ctx, REF260K_PROMPT_IDS, REF260K_N_PROMPT_IDS, 0, 0);
    float d = tests_max_abs_diff(l, ref->logits, 512);
    context_free(&ctx);
    return d;
}

START_TEST(prompt_ids_match_reference) {
    if (!ready) return;
    int ids[64], n = 0;
    PosencError err;
    ck_assert_int_eq(tokenizer_encode(&tok, REF260K_PROMPT, strlen(REF260K_PROMPT), 1, 0, ids, &n, &err), 0);
    ck_assert_int_eq(n, REF260K_N_PROMPT_IDS);
    for (int i = 0; i < n; i++) ck_assert_int_eq(ids[i], REF260K_PROMPT_IDS[i]);
}
END_TEST

START_TEST(logits_match_reference) {
    if (!ready) return;
    const Ref260kLogits *ref = &REF260K_LOGITS[_i];
    float d = logits_error(ref);
    ck_assert_msg(d <= LOGIT_TOL, "%s theta=%g max_bias=%g: max |logit error| %g", ref->pe,
                  (double)ref->rope_theta, (double)ref->alibi_max_bias, (double)d);
}
END_TEST

/* Negative control: every fixture is distinguishable from every other one,
 * so a scheme or parameter silently ignored would fail above. */
START_TEST(fixtures_are_distinguishable) {
    for (int a = 0; a < REF260K_N_LOGITS; a++)
        for (int b = a + 1; b < REF260K_N_LOGITS; b++) {
            float d = tests_max_abs_diff(REF260K_LOGITS[a].logits, REF260K_LOGITS[b].logits, 512);
            ck_assert_msg(d > 100 * LOGIT_TOL, "fixtures %d and %d differ by only %g", a, b, (double)d);
        }
}
END_TEST

START_TEST(greedy_text_matches_reference) {
    if (!ready) return;
    const Ref260kGreedy *ref = &REF260K_GREEDY[_i];
    PeParams p = params_for(ref->pe, 10000.0f, 8.0f);
    Context ctx;
    tests_build_context(&ctx, &model, &p, model.config.seq_len);
    Sampler sampler;
    sampler_build(&sampler, 512, 0.0f, 0.9f, 0, 1);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    GenerateOptions g = {.prompt = ref->prompt, .steps = ref->steps};
    GenerateStats stats;
    PosencError err;
    ck_assert_msg(generate_text(&ctx, &tok, &sampler, &g, out, &stats, &err) == 0, "%s", err.msg);
    fclose(out);
    ck_assert_msg(strcmp(text, ref->text) == 0, "%s '%s': got\n%s\nwant\n%s", ref->pe, ref->prompt,
                  text, ref->text);
    free(text);
    sampler_free(&sampler);
    context_free(&ctx);
}
END_TEST

int main(void) {
    Suite *s = suite_create("stories260k_reference");
    TCase *tc = tcase_create("numpy_reference");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, prompt_ids_match_reference);
    tcase_add_loop_test(tc, logits_match_reference, 0, REF260K_N_LOGITS);
    tcase_add_test(tc, fixtures_are_distinguishable);
    tcase_add_loop_test(tc, greedy_text_matches_reference, 0, REF260K_N_GREEDY);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
