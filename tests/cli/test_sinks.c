/* Attention sinks compared in one -m ppl run (--sinks LIST, issue 32), on
 * tools/hf_tiny.py's gpt_oss (learned sinks, a window of 8 on alternate
 * layers) streaming 600 bytes of TinyStories through a cache of 32 cells:
 *  - each setting's row is the setting run alone, to the printed digit
 *    (--json's 9 significant digits), wherever running alone discards as
 *    many cells at each shift: every setting of a list discards as many as
 *    the one that keeps most, so that all score the same tokens. A list
 *    without kept cells (learned,off) against -m ppl --stream and --sinks
 *    off; a list of keep:4 settings against --keep 4 with and without
 *    --sinks off;
 *  - controls: learned and off differ, keep:4 and off differ (the kept cells
 *    change what the model sees after a shift);
 *  - on a model without learned sinks (stories260K), off and keep:4 compare
 *    (keep:4 as --keep 4 alone; off otherwise), and learned is refused
 *    naming its architecture;
 *  - bad settings are one error line before any work: an unknown setting,
 *    the same setting twice, keep:N past --ctx - 2, kept cells without
 *    --stream or beside --keep, a list beside two --pe variants or in a
 *    study, a list outside -m ppl, --baseline naming no setting. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common.h"

static const char *models, *gpt_oss;
static char text[1024];

static void setup(void) {
    models = tests_models_dir("attention sinks compared");
    if (!models) return;
    gpt_oss = tests_make_hf_case("gpt_oss");
    size_t n;
    char *all = tests_read_file(tests_text_path(models, "tinystories-valid-head.txt"), &n);
    snprintf(text, sizeof text, "%s", tests_write_temp(all, n < 600 ? n : 600, ".txt"));
    free(all);
}

/* The --json line of `label` in a run's output, copied into line[size]. */
static void row_of(const char *out, const char *label, char *line, size_t size) {
    char needle[64];
    snprintf(needle, sizeof needle, "{\"pe\":\"%s\",", label);
    const char *at = strstr(out, needle);
    ck_assert_msg(at, "no row '%s' in:\n%s", label, out);
    size_t len = strcspn(at, "\n");
    ck_assert(len < size);
    memcpy(line, at, len);
    line[len] = '\0';
}

/* The run's rows: "label" and the mean NLL, for each label. */
static void ppl_rows(const char *model, const char *const *extra, int n_labels,
                     const char *const *labels, double *nll) {
    const char *args[24] = {model, "-m", "ppl", "-f", text, "--stream", "--ctx", "32", "--json"};
    int n = 9;
    for (int i = 0; extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    TestsRun r = tests_run_engine_ok(args);
    for (int i = 0; i < n_labels; i++) {
        char line[1024];
        row_of(r.out, labels[i], line, sizeof line);
        nll[i] = tests_json_number(line, "nll");
        ck_assert_msg(!isnan(nll[i]), "%s", line);
    }
    tests_run_free(&r);
}

/* The mean NLL of a run of one variant (its label: the scheme or setting). */
static double ppl_alone(const char *model, const char *label, const char *const *extra) {
    double nll;
    ppl_rows(model, extra, 1, (const char *[]){label}, &nll);
    return nll;
}

START_TEST(test_learned_and_off_as_alone) {
    if (!models) return;
    double nll[2];
    ppl_rows(gpt_oss, (const char *[]){"--sinks", "learned,off", NULL}, 2,
             (const char *[]){"learned", "off"}, nll);
    double learned = ppl_alone(gpt_oss, "rope", (const char *[]){NULL});
    double off = ppl_alone(gpt_oss, "rope", (const char *[]){"--sinks", "off", NULL});
    printf("learned %.9g (alone %.9g), off %.9g (alone %.9g)\n", nll[0], learned, nll[1], off);
    ck_assert(nll[0] == learned && nll[1] == off);
    ck_assert_msg(fabs(learned - off) > 1e-4, "control: the learned sinks change nothing");
}
END_TEST

START_TEST(test_kept_cells_as_alone) {
    if (!models) return;
    double nll[2];
    ppl_rows(gpt_oss, (const char *[]){"--sinks", "keep:4,learned+keep:4", NULL}, 2,
             (const char *[]){"keep:4", "learned+keep:4"}, nll);
    double kept = ppl_alone(gpt_oss, "rope", (const char *[]){"--sinks", "off", "--keep", "4", NULL});
    double both = ppl_alone(gpt_oss, "rope", (const char *[]){"--keep", "4", NULL});
    double off = ppl_alone(gpt_oss, "rope", (const char *[]){"--sinks", "off", NULL});
    printf("keep:4 %.9g (alone %.9g), learned+keep:4 %.9g (alone %.9g), off %.9g\n", nll[0], kept,
           nll[1], both, off);
    ck_assert(nll[0] == kept && nll[1] == both);
    ck_assert_msg(fabs(kept - off) > 1e-4, "control: the kept cells change nothing");
}
END_TEST

START_TEST(test_model_without_learned_sinks) {
    if (!models) return;
    char stories[1024], tok[1024];
    snprintf(stories, sizeof stories, "%s", tests_model_path(models, "stories260K/stories260K.bin"));
    snprintf(tok, sizeof tok, "%s", tests_model_path(models, "stories260K/tok512.bin"));
    double nll[2];
    ppl_rows(stories, (const char *[]){"-z", tok, "--sinks", "off,keep:4", NULL}, 2,
             (const char *[]){"off", "keep:4"}, nll);
    double kept = ppl_alone(stories, "rope", (const char *[]){"-z", tok, "--keep", "4", NULL});
    printf("stories260K: off %.9g, keep:4 %.9g (alone %.9g)\n", nll[0], nll[1], kept);
    ck_assert(nll[1] == kept && nll[0] != nll[1]);
    tests_expect_error((const char *[]){stories, "-z", tok, "-m", "ppl", "-f", text, "--stream", "--ctx",
                                        "32", "--sinks", "off,learned", NULL},
                       "--sinks learned: the model has no learned attention sinks (architecture llama)");
}
END_TEST

START_TEST(test_bad_settings) {
    if (!models) return;
    static const struct { const char *sinks, *extra, *needle; } bad[] = {
        {"learned,of", NULL, "--sinks: 'of' is not a setting"},
        {"learned,learned+keep:x", NULL, "'learned+keep:x' is not a setting"},
        {"off,off", NULL, "'off' and 'off' are the same setting"},
        {"off,keep:31", NULL, "--sinks keep:31: keeping 31 of 32 cells"},
        {"off,keep:4", "--keep", "--keep and --sinks keep:N both set the kept cells"},
        {"off,learned", "--pe", "a list compares settings of one --pe variant; --pe lists 2"},
        {"off,learned", "--baseline", "--baseline: 'none' is not one of the --sinks settings"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *args[16] = {gpt_oss, "-m", "ppl", "-f", text, "--stream", "--ctx", "32",
                                "--sinks", bad[i].sinks};
        int n = 10;
        if (bad[i].extra && !strcmp(bad[i].extra, "--keep")) args[n++] = "--keep", args[n++] = "2";
        if (bad[i].extra && !strcmp(bad[i].extra, "--pe")) args[n++] = "--pe", args[n++] = "rope,none";
        if (bad[i].extra && !strcmp(bad[i].extra, "--baseline")) args[n++] = "--baseline", args[n++] = "none";
        args[n] = NULL;
        tests_expect_error(args, bad[i].needle);
    }
    tests_expect_error((const char *[]){gpt_oss, "-m", "ppl", "-f", text, "--ctx", "32", "--sinks",
                                        "off,keep:4", NULL},
                       "kept cells (keep:N) matter only where a context shift discards cells: add --stream");
    tests_expect_error((const char *[]){gpt_oss, "-m", "ppl", "-f", text, "--ctx", "16,32", "--sinks",
                                        "off,learned", NULL},
                       "a list is compared in one -m ppl run, not in a study");
    tests_expect_error((const char *[]){gpt_oss, "-m", "generate", "-i", "a", "-n", "2", "--sinks",
                                        "off,learned", NULL},
                       "is compared by -m ppl; here --sinks takes off");
    /* control: a good list is no error */
    tests_expect_success((const char *[]){gpt_oss, "-m", "ppl", "-f", text, "--stream", "--ctx", "32",
                                          "--sinks", "off,learned", "--baseline", "off", NULL});
}
END_TEST

int main(void) {
    Suite *s = suite_create("sinks");
    TCase *tc = tcase_create("compare");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, setup, NULL); /* in each test's process: it asserts */
    tcase_add_test(tc, test_learned_and_off_as_alone);
    tcase_add_test(tc, test_kept_cells_as_alone);
    tcase_add_test(tc, test_model_without_learned_sinks);
    tcase_add_test(tc, test_bad_settings);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
