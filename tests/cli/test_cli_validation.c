/* The command line refuses before it wastes time and says what runs: a flag
 * the mode does not use is an error, every --pe variant is checked before
 * the first result, warnings name the variant, -f gives generate its prompt,
 * bench and inspect show the scheme that runs, and generate's summary and
 * --trace-positions say what happened.  Every refusal is one `error:` line,
 * exit 1 and nothing on stdout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common.h"

static const char *models;
static char model[1024], tok[1024], text[1024];

/* The first 2,000 bytes of a shared story text: enough for a few windows. */
static void setup(void) {
    models = tests_models_dir("CLI validation on stories260K");
    if (!models) return;
    snprintf(model, sizeof model, "%s", tests_model_path(models, "stories260K/stories260K.bin"));
    snprintf(tok, sizeof tok, "%s", tests_model_path(models, "stories260K/tok512.bin"));
    size_t n;
    char *all = tests_read_file(tests_text_path(models, "tinystories-valid-head.txt"), &n);
    snprintf(text, sizeof text, "%s", tests_write_temp(all, n < 2000 ? n : 2000, ".txt"));
    free(all);
}

START_TEST(flags_the_mode_does_not_use) {
    if (!models) return;
    const char *t_ppl[] = {model, "-z", tok, "-m", "ppl", "-f", text, "-t", "0", NULL};
    tests_expect_error(t_ppl, "-t is not used by -m ppl");
    const char *z_bench[] = {model, "-m", "bench", "-z", tok, NULL};
    tests_expect_error(z_bench, "-z is not used by -m bench");
    const char *pe_tok[] = {"-m", "tokenize", "-z", tok, "-i", "hi", "--pe", "alibi", NULL};
    tests_expect_error(pe_tok, "--pe is not used by -m tokenize");
    const char *n_inspect[] = {model, "-m", "inspect", "-n", "5", NULL};
    tests_expect_error(n_inspect, "-n is not used by -m inspect");
    const char *pp_gen[] = {model, "-z", tok, "--pp", "8", NULL};
    tests_expect_error(pp_gen, "--pp is not used by -m generate");
    const char *chunks[] = {model, "-z", tok, "-m", "ppl", "-f", text, "--stream", "--chunks", "2", NULL};
    tests_expect_error(chunks, "--chunks is not used by -m ppl --stream");
    const char *stride[] = {model, "-z", tok, "-m", "ppl", "-f", text, "--stream", "--stride", "8", NULL};
    tests_expect_error(stride, "--stride is not used by -m ppl --stream");
    const char *keep[] = {model, "-z", tok, "-m", "ppl", "-f", text, "--keep", "4", NULL};
    tests_expect_error(keep, "--keep applies to context shifts: use it with -m ppl --stream");
    const char *both[] = {model, "-z", tok, "-i", "a", "-f", text, NULL};
    tests_expect_error(both, "-i and -f both give the input text");
    /* a control character in a flag value cannot split the line or reach the terminal */
    const char *ctl[] = {model, "-m", "a\nb\x1b[31m", NULL};
    tests_expect_error(ctl, "-m: unknown mode 'a\\x0ab\\x1b[31m'");
    const char *twice[] = {model, "-z", tok, "-t", "0", "-t", "1", NULL};
    tests_expect_error(twice, "-t is given twice");
    /* scheme parameters that no variant that runs would use */
    const char *yarn_alibi[] = {model, "-m", "inspect", "--pe", "alibi", "--rope-scaling", "yarn", NULL};
    tests_expect_error(yarn_alibi, "--rope-scaling applies to rope and no scheme that runs is rope");
    const char *bias_rope[] = {model, "-z", tok, "--alibi-max-bias", "4", NULL};
    tests_expect_error(bias_rope, "--alibi-max-bias applies to alibi");
    const char *overflow[] = {model, "-z", tok, "--pe-overflow", "clamp", NULL};
    tests_expect_error(overflow, "--pe-overflow applies to learned");
    const char *sinks[] = {model, "-z", tok, "--sinks", "off", NULL};
    tests_expect_error(sinks, "--sinks off: the model has no learned attention sinks (architecture llama)");
    /* control: the same flags where they apply are accepted */
    const char *ok[] = {model, "-z", tok, "-m", "ppl", "-f", text, "--stream", "--keep", "4",
                        "--ctx", "64", "--pe", "rope,alibi", "--alibi-max-bias", "4", NULL};
    tests_expect_success(ok);
}
END_TEST

/* A list whose fourth variant cannot run fails before the first result. */
START_TEST(every_variant_checked_before_work) {
    if (!models) return;
    const char *args[] = {model, "-z", tok, "-m", "ppl", "-f", text, "--ctx", "64", "--chunks", "2",
                          "--pe", "rope,alibi,none,learned,sinusoidal", NULL};
    tests_expect_error(args, "--pe learned: learned positions need a position embedding table");
    /* control: without it, all four run */
    args[12] = "rope,alibi,none,sinusoidal";
    TestsRun r = tests_run_engine_ok(args);
    ck_assert(strstr(r.out, "\nrope ") && strstr(r.out, "\nsinusoidal "));
    tests_run_free(&r);
}
END_TEST

/* -f is the prompt in generate (one trailing newline dropped): the same
 * text as -i with that prompt. */
START_TEST(prompt_from_file) {
    if (!models) return;
    const char *p = "Once upon a time\n";
    const char *file = tests_write_temp(p, strlen(p), ".txt");
    const char *with_f[] = {model, "-z", tok, "-t", "0", "-n", "40", "-f", file, NULL};
    const char *with_i[] = {model, "-z", tok, "-t", "0", "-n", "40", "-i", "Once upon a time", NULL};
    const char *other[] = {model, "-z", tok, "-t", "0", "-n", "40", "-i", "The dog", NULL};
    TestsRun a = tests_run_engine(with_f), b = tests_run_engine(with_i), c = tests_run_engine(other);
    ck_assert_msg(a.status == 0, "%s", a.err);
    ck_assert_str_eq(a.out, b.out);
    ck_assert_str_ne(a.out, c.out); /* control: the prompt matters */
    ck_assert_msg(strncmp(a.out, "Once upon a time", 16) == 0, "%s", a.out);
    tests_run_free(&a);
    tests_run_free(&b);
    tests_run_free(&c);
    const char *missing[] = {model, "-z", tok, "-f", "/nonexistent/prompt.txt", NULL};
    tests_expect_error(missing, "/nonexistent/prompt.txt");
}
END_TEST

/* Warnings name the variant; scaled RoPE warns only past factor x context. */
START_TEST(warnings_name_the_variant) {
    if (!models) return;
    const char *ntk_in[] = {model, "-z", tok, "-t", "0", "-n", "20", "--pos-offset", "600", "--pe",
                            "rope:ntk:2", NULL};
    TestsRun r = tests_run_engine_ok(ntk_in);
    ck_assert_msg(!strstr(r.err, "warning"), "%s", r.err);
    tests_run_free(&r);
    const char *ntk_out[] = {model, "-z", tok, "-t", "0", "-n", "20", "--pos-offset", "1020", "--pe",
                             "rope:ntk:2", NULL};
    r = tests_run_engine(ntk_out);
    ck_assert_msg(strstr(r.err, "warning: rope:ntk:2: positions up to 1039 exceed the scaled range "
                                "2 x 512 = 1024"), "%s", r.err);
    tests_run_free(&r);
    const char *none[] = {model, "-z", tok, "-t", "0", "-n", "20", "--pos-offset", "500", "--pe",
                          "none", NULL};
    r = tests_run_engine(none);
    ck_assert_msg(strstr(r.err, "warning: none: positions up to 519 exceed the trained context 512; "
                                "the model never saw sequences this long"), "%s", r.err);
    tests_run_free(&r);
}
END_TEST

/* bench runs the scheme --pe names and says so; inspect shows the scheme
 * that would run and where it came from, and reads vocab-only files. */
START_TEST(bench_and_inspect_show_the_scheme) {
    if (!models) return;
    const char *bench[] = {model, "-m", "bench", "--pp", "8", "--tg", "0", "-r", "1", "--pe", "alibi",
                           "--json", NULL};
    TestsRun r = tests_run_engine_ok(bench);
    ck_assert_msg(strstr(r.out, "\"pe\": \"alibi\""), "%s%s", r.out, r.err);
    tests_run_free(&r);
    const char *bench_default[] = {model, "-m", "bench", "--pp", "8", "--tg", "0", "-r", "1", NULL};
    r = tests_run_engine_ok(bench_default);
    ck_assert_msg(strstr(r.out, "positions rope,"), "%s%s", r.out, r.err);
    tests_run_free(&r);

    const char *insp[] = {model, "-m", "inspect", "--pe", "rope", "--rope-scaling", "yarn",
                          "--rope-factor", "4", "--json", NULL};
    r = tests_run_engine_ok(insp);
    ck_assert_msg(strstr(r.out, "\"scheme\":\"rope\",\"source\":\"command line\",\"checkpoint\":\"rope\"") &&
                  strstr(r.out, "\"rope_scaling\":\"yarn\",\"rope_factor\":4"), "%s", r.out);
    tests_run_free(&r);
    const char *plain[] = {model, "-m", "inspect", "--json", NULL};
    r = tests_run_engine(plain);
    ck_assert_msg(strstr(r.out, "\"source\":\"checkpoint\"") && strstr(r.out, "\"rope_scaling\":\"none\""),
                  "%s", r.out);
    tests_run_free(&r);

    const char *vocab = tests_convert(models, "spm/tinystories-unigram-1k.model",
                                      (const char *const[]){"--vocab-only", NULL});
    ck_assert_ptr_nonnull(vocab);
    const char *v[] = {vocab, "-m", "inspect", "--json", NULL};
    r = tests_run_engine_ok(v);
    ck_assert_msg(strstr(r.out, "\"contents\":\"vocabulary only (no tensors)\"") &&
                  strstr(r.out, "\"n_tokens\":1000"), "%s%s", r.out, r.err);
    tests_run_free(&r);
    const char *v_pe[] = {vocab, "-m", "inspect", "--pe", "alibi", NULL};
    tests_expect_error(v_pe, "holds no tensors");
}
END_TEST

/* The summary gives every count beside its rate; a prefill at an offset is
 * traced as its position range and text, on a line of its own. */
START_TEST(summary_and_trace) {
    if (!models) return;
    const char *args[] = {model, "-z", tok, "-t", "0", "-n", "12", "-i", "Once upon a time",
                          "--pos-offset", "100", "--trace-positions", NULL};
    TestsRun r = tests_run_engine_ok(args);
    ck_assert_msg(strstr(r.err, "[pos] q=100-104 (5 tokens) BOS 'Once upon a time' cache=empty (0/512 cells)\n"),
                  "%s", r.err);
    ck_assert_msg(strstr(r.err, "[pos] q=105 ',' cache=100-104 (5/512 cells)\n"), "%s", r.err);
    const char *sum = strstr(r.err, "load ");
    ck_assert_msg(sum && strstr(sum, "; prompt 5 tokens in ") && strstr(sum, "; first token after ") &&
                  strstr(sum, "; 8 tokens generated in "), "%s", r.err);
    tests_run_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli_validation");
    TCase *tc = tcase_create("cli_validation");
    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, flags_the_mode_does_not_use);
    tcase_add_test(tc, every_variant_checked_before_work);
    tcase_add_test(tc, prompt_from_file);
    tcase_add_test(tc, warnings_name_the_variant);
    tcase_add_test(tc, bench_and_inspect_show_the_scheme);
    tcase_add_test(tc, summary_and_trace);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
