/* The extrapolation study (-m ppl with several models and --ctx as a list of
 * windows), through the real binary on the PE zoo (../shared/models/zoo):
 *  - one run of all six models at W = 64..1024 (32 windows each; under ASan
 *    64..256, where 512 and 1024 took most of its ten minutes and the
 *    plain build has already held them to the reference) reproduces
 *    every model's PyTorch curve (reference.json val_nll_window{W}) within
 *    2e-3; learned is not scored past its table, with a note; control: each
 *    curve against the reference one window over is far outside;
 *  - the chart parses as XML: axis labels, one series per model with a point
 *    per window it ran at, log2 ticks, the trained-context marker; a cut-off
 *    chart does not parse; the CSV holds the JSON's means;
 *  - the text table: one column per window, "-" where a series did not run;
 *    --pe variants of one model become series of their own;
 *  - misuse is one error line before any work. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common.h"

/* The bound, as model/test_long_context holds the same curves:
 * per-token differences from PyTorch are ~1e-6 and average out; the gaps
 * between neighbouring windows are > 0.006 (alibi 256 vs 128) and mostly
 * far larger. */
#define NLL_TOL 2e-3
/* The CSV prints 6 decimals: half a unit of the last is 5e-7. */
#define CSV_TOL 1e-6
#define N_MODELS 6
#define N_WINDOWS 5
#ifdef __SANITIZE_ADDRESS__
static const int n_windows = 3;
static const char *const window_list = "64,128,256";
#else
static const int n_windows = N_WINDOWS;
static const char *const window_list = "64,128,256,512,1024";
#endif

static const char *const SCHEMES[N_MODELS] = {"sinusoidal", "learned", "rope", "alibi", "none",
                                              "t5"};
enum { ZOO_LEARNED = 1, ZOO_ROPE = 2, ZOO_ALIBI = 3 };
static const int WINDOWS[N_WINDOWS] = {64, 128, 256, 512, 1024};

static const char *models, *val_text, *gguf[N_MODELS];
static double ref[N_MODELS][N_WINDOWS]; /* NAN where reference.json has none */
enum { T_SVG, T_CSV, T_CUT_SVG, N_TEMPS };
static const char *temp[N_TEMPS];
static TestsRun study; /* the one run of all six models */

static void setup(void) {
    models = tests_models_dir("the extrapolation study on the PE zoo");
    if (!models) return;
    for (int m = 0; m < N_MODELS; m++) {
        char rel[64];
        snprintf(rel, sizeof rel, "zoo/%s", SCHEMES[m]);
        gguf[m] = tests_convert(models, rel, NULL);
        ck_assert_ptr_nonnull(gguf[m]);
        snprintf(rel, sizeof rel, "zoo/%s/reference.json", SCHEMES[m]);
        char *json = tests_read_file(tests_model_path(models, rel), NULL);
        for (int w = 0; w < n_windows; w++) {
            char key[32];
            snprintf(key, sizeof key, "val_nll_window%d", WINDOWS[w]);
            ref[m][w] = tests_json_number(json, key);
        }
        free(json);
    }
    size_t len;
    char *text = tests_read_file(tests_text_path(models, "tiny-shakespeare.txt"), &len);
    size_t val = (size_t)(0.9 * (double)len); /* the models' validation split */
    val_text = tests_write_temp(text + val, len - val, ".txt");
    free(text);
    for (int t = 0; t < N_TEMPS; t++) temp[t] = tests_write_temp("", 0, NULL);
    const char *args[] = {gguf[0], gguf[1], gguf[2], gguf[3], gguf[4], gguf[5], "-m", "ppl",
                          "-f", val_text, "--ctx", window_list, "--chunks", "32",
                          "--json", "--svg", temp[T_SVG], "--csv", temp[T_CSV], NULL};
    study = tests_run_engine_ok(args);
}

static void teardown(void) {
    if (models) tests_run_free(&study);
}

/* The "nll" of the JSON line for model path `model` at window C; NAN when
 * there is no such line. */
static double study_nll(const char *out, const char *model, int C) {
    char want[1100];
    snprintf(want, sizeof want, "{\"model\":\"%s\",", model);
    for (const char *line = out; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (!strncmp(line, want, strlen(want))) {
            char *copy = strndup(line, n);
            double ctx = tests_json_number(copy, "ctx"), nll = tests_json_number(copy, "nll");
            free(copy);
            if (ctx == C) return nll;
        }
        line += n + (end != NULL);
    }
    return NAN;
}

/* Largest |engine - reference| over the windows the reference has, with the
 * reference read `shift` windows over (0: the same window); NAN when a
 * window the reference has is missing from the run (study_nll's NAN), which
 * tests_max_abs_diff keeps.  As floats: NLLs of 1.5 .. 3.4 round by < 3e-7,
 * far below NLL_TOL. */
static double curve_error(int m, int shift) {
    float engine[N_WINDOWS], reference[N_WINDOWS];
    size_t n = 0;
    for (int w = 0; w < n_windows; w++) {
        int r = w + shift;
        if (r < 0 || r >= n_windows || isnan(ref[m][r]) || isnan(ref[m][w])) continue;
        engine[n] = (float)study_nll(study.out, gguf[m], WINDOWS[w]);
        reference[n++] = (float)ref[m][r];
    }
    return tests_max_abs_diff(engine, reference, n);
}

START_TEST(curves_match_reference) {
    if (!models) return;
    for (int m = 0; m < N_MODELS; m++) {
        for (int w = 0; w < n_windows; w++)
            printf("%-10s W=%4d  nll %.4f  reference %.4f\n", SCHEMES[m], WINDOWS[w],
                   study_nll(study.out, gguf[m], WINDOWS[w]), ref[m][w]);
        double err = curve_error(m, 0);
        ck_assert_msg(err <= NLL_TOL, "%s: a window is %.5f off the reference", SCHEMES[m], err);
        /* Control: the reference of the next window (the previous for the
         * last) is far off, so a run that mixed windows up would fail. */
        double next = curve_error(m, 1), prev = curve_error(m, -1);
        double off = isnan(next) || isnan(prev) ? NAN : fmax(next, prev); /* a NaN stays */
        ck_assert_msg(off > 2 * NLL_TOL, "%s: shifted reference only %.5f off", SCHEMES[m], off);
    }
    /* learned has no position past its 128: not scored there, and said so */
    for (int w = 2; w < n_windows; w++)
        ck_assert(isnan(study_nll(study.out, gguf[ZOO_LEARNED], WINDOWS[w])));
    ck_assert_msg(strstr(study.err, "learned at --ctx 256: ") && strstr(study.err, "not scored"),
                  "%s", study.err);
}
END_TEST

START_TEST(chart_is_readable) {
    if (!models) return;
    const char *charts[] = {temp[T_SVG], NULL};
    TestsRun facts = tests_svg_facts(charts);
    const char *o = facts.out;
    ck_assert_msg(strstr(o, "series=6\n"), "%s", o);
    ck_assert_msg(strstr(o, "text=window (tokens, --ctx; log scale)\n"), "%s", o);
    ck_assert_msg(strstr(o, "text=mean NLL (nats/token)\n"), "%s", o);
    ck_assert_msg(strstr(o, "the first 32 windows of that size"), "%s", o);
    ck_assert_msg(strstr(o, "marker_above_plot=1\n"), "%s", o);
    for (int w = 0; w < n_windows; w++) {
        char tick[32];
        snprintf(tick, sizeof tick, "text=%d\n", WINDOWS[w]);
        ck_assert_msg(strstr(o, tick), "no tick %d: %s", WINDOWS[w], o);
    }
    for (int m = 0; m < N_MODELS; m++) {
        char want[1200];
        snprintf(want, sizeof want, "legend=%s|%s, trained context 128\n", gguf[m], SCHEMES[m]);
        ck_assert_msg(strstr(o, want), "missing '%s' in %s", want, o);
        snprintf(want, sizeof want, "points=%s|%d\n", gguf[m], m == ZOO_LEARNED ? 2 : n_windows);
        ck_assert_msg(strstr(o, want), "missing '%s' in %s", want, o);
    }
    tests_run_free(&facts);
    tests_expect_cut_file_rejected(temp[T_SVG], temp[T_CUT_SVG], "tests/modes/svg_facts.py");
}
END_TEST

START_TEST(csv_agrees_with_json) {
    if (!models) return;
    char *csv = tests_read_file(temp[T_CSV], NULL);
    ck_assert_msg(!strncmp(csv, "series,ctx,tokens,nll,se\n", 25), "%s", csv);
    int rows = 0;
    for (char *line = strchr(csv, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        char path[1024];
        int C;
        long tokens;
        double nll, se;
        ck_assert_int_eq(sscanf(line, "%1023[^,],%d,%ld,%lf,%lf", path, &C, &tokens, &nll, &se), 5);
        double json = study_nll(study.out, path, C);
        ck_assert_msg(fabs(nll - json) <= CSV_TOL, "%s ctx %d: csv %.6f, json %.9f", path, C, nll,
                      json);
        ck_assert_int_eq(tokens, 32L * C); /* 32 windows of C scored predictions */
        rows++;
    }
    ck_assert_int_eq(rows, 5 * n_windows + 2); /* learned: 64 and 128 only */
    free(csv);
}
END_TEST

/* The text table, and --pe variants of one model as series of their own:
 * cheap runs of two windows. */
START_TEST(table_and_variant_series) {
    if (!models) return;
    const char *a1[] = {gguf[ZOO_ROPE], gguf[ZOO_LEARNED], "-m", "ppl", "-f", val_text, "--ctx",
                        "64,256", "--chunks", "2", NULL};
    TestsRun r = tests_run_engine_ok(a1);
    const char *table = strstr(r.out, "# mean NLL (nats/token) by window (--ctx)\n");
    ck_assert_msg(table != NULL, "%s", r.out);
    char want[1200];
    snprintf(want, sizeof want, "%s ", gguf[ZOO_LEARNED]);
    const char *row = strstr(table, want);
    ck_assert_msg(row != NULL, "%s", table);
    double w64;
    char w256[8];
    ck_assert_int_eq(sscanf(row + strlen(want), "%lf %7s", &w64, w256), 2);
    ck_assert_str_eq(w256, "-");
    tests_run_free(&r);

    const char *a2[] = {gguf[ZOO_ROPE], "-m", "ppl", "-f", val_text, "--ctx", "64,256",
                        "--chunks", "2", "--pe", "rope,rope:ntk:4", "--json", NULL};
    r = tests_run_engine_ok(a2);
    int lines = 0;
    for (const char *c = r.out; *c; c++) lines += *c == '\n';
    ck_assert_int_eq(lines, 4); /* two variants at two windows */
    ck_assert_msg(strstr(r.out, "\"pe\":\"rope:ntk:4\",\"ctx\":256"), "%s", r.out);
    tests_run_free(&r);

    const char *a3[] = {gguf[ZOO_ROPE], gguf[ZOO_ALIBI], "-m", "ppl", "-f", val_text, "--ctx",
                        "64", "--chunks", "2", "--pe", "rope,alibi", NULL};
    r = tests_run_engine_ok(a3);
    snprintf(want, sizeof want, "\n%s alibi ", gguf[ZOO_ROPE]);
    ck_assert_msg(strstr(r.out, want), "no series '%s' in %s", want, r.out);
    tests_run_free(&r);
}
END_TEST

START_TEST(misuse_is_one_error) {
    if (!models) return;
    const char *m0 = gguf[ZOO_ROPE], *m1 = gguf[ZOO_ALIBI];
    const char *a1[] = {m0, m1, "-i", "x", NULL};
    tests_expect_error(a1, "only -m ppl compares several models");
    const char *a2[] = {m0, "--ctx", "64,128", NULL};
    tests_expect_error(a2, "--ctx: a list of windows needs -m ppl");
    const char *a3[] = {m0, "-m", "ppl", "-f", val_text, "--ctx", "128,64", NULL};
    tests_expect_error(a3, "--ctx: the windows must increase, got 64 after 128");
    const char *a4[] = {m0, "-m", "ppl", "-f", val_text, "--ctx", "64,128", "--logits-out",
                        temp[T_CUT_SVG], NULL};
    tests_expect_error(a4, "--logits-out writes one run's tokens");
    const char *a5[] = {m0, m0, "-m", "ppl", "-f", val_text, "--ctx", "64", NULL};
    tests_expect_error(a5, "is given twice");
    const char *a6[] = {m0, m1, "-m", "ppl", "-f", val_text, "--ctx", "64,128", "--stride", "100",
                        NULL};
    tests_expect_error(a6, "--stride 100 must be in 1..64 (the smallest --ctx)");
    const char *a7[] = {m0, m1, "-m", "ppl", "-f", val_text, NULL};
    tests_expect_error(a7, "several models need --ctx");
    const char *a8[] = {m0, "-m", "ppl", "-f", val_text, "--ctx", "64,", NULL};
    tests_expect_error(a8, "--ctx: an empty window in '64,'");
    /* control: the same command with one window runs */
    const char *ok[] = {m0, "-m", "ppl", "-f", val_text, "--ctx", "64", "--chunks", "1", NULL};
    tests_expect_success(ok);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ppl_study");
    TCase *tc = tcase_create("zoo");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 1800);
    tcase_add_test(tc, curves_match_reference);
    tcase_add_test(tc, chart_is_readable);
    tcase_add_test(tc, csv_agrees_with_json);
    tcase_add_test(tc, table_and_variant_series);
    tcase_add_test(tc, misuse_is_one_error);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
