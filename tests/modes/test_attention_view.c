/* -m attention through the real binary, against the float64 NumPy reference
 * forward passes (tools/reference.py --attention) on stories260K (llama,
 * under rope, alibi, sinusoidal and none side by side) and two zoo models
 * (t5 with its own buckets and with none; alibi):
 *  - every weight within 1e-5 of NumPy's, the same tokens; each row sums to
 *    1 and masked cells (keys after the query) weigh exactly 0; control:
 *    each variant's weights against another variant's reference are far off;
 *  - the entropy and the mass by distance of every head recomputed from
 *    NumPy's weights;
 *  - --layer/--head select the weights written (JSON, CSV) and drawn;
 *  - the charts parse as XML: a heatmap panel per selected head with the
 *    cells at or before the diagonal, one mass and one entropy series per
 *    variant, axis labels; a cut-off chart does not parse;
 *  - misuse is one error line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/common.h"

/* The engine's weights are float32 softmaxes of float32 scores whose
 * errors against float64 are ~1e-6 (the logits agree within 1e-4 after
 * every layer); 1e-5 is the bound. */
#define WEIGHT_TOL 1e-5
/* A row's float32 sum of up to 64 weights each within a few ulps: 1e-5. */
#define SUM_TOL 1e-5

static const char *models, *svg_dir, *stories, *tok512, *zoo_t5, *zoo_alibi;
static const char STORY[] = "Once upon a time, there was a little girl named Lily.";
static const char ROMEO[] = "ROMEO:\nWhat light through yonder window breaks?";
enum { T_ENGINE, T_REF0, T_REF1, T_REF2, T_REF3, T_CSV, T_CUT, N_TEMPS };
static const char *temp[N_TEMPS];

static void setup(void) {
    models = tests_models_dir("-m attention against the NumPy reference");
    if (!models) return;
    static char s[1024], t[1024];
    snprintf(s, sizeof s, "%s", tests_model_path(models, "stories260K/stories260K.bin"));
    snprintf(t, sizeof t, "%s", tests_model_path(models, "stories260K/tok512.bin"));
    stories = s;
    tok512 = t;
    zoo_t5 = tests_convert(models, "zoo/t5", NULL);
    zoo_alibi = tests_convert(models, "zoo/alibi", NULL);
    ck_assert(zoo_t5 && zoo_alibi);
    for (int i = 0; i < N_TEMPS; i++) temp[i] = tests_write_temp("", 0, NULL);
    svg_dir = tests_temp_dir();
}

/* argv: the engine's JSON, then one reference JSON per variant in order.
 * Prints per variant the largest weight difference, its control (against
 * the next variant's reference), row sums, masked cells, entropy and mass
 * differences recomputed from the reference. */
static const char COMPARE[] =
    "import json, sys\n"
    "import numpy as np\n"
    "eng = json.load(open(sys.argv[1]))\n"
    "refs = [json.load(open(p)) for p in sys.argv[2:]]\n"
    "print('tokens_equal=%d' % all(r['tokens'] == eng['tokens'] for r in refs))\n"
    "for i, v in enumerate(eng['variants']):\n"
    "    ref = np.array(refs[i]['weights'])\n"
    "    other = np.array(refs[(i + 1) % len(refs)]['weights'])\n"
    "    L, H, n = ref.shape[0], ref.shape[1], ref.shape[2]\n"
    "    w = np.zeros(ref.shape)\n"
    "    for e in v['weights']:\n"
    "        w[e['layer'], e['head']] = np.array(e['w'])\n"
    "    future = np.triu(np.ones((n, n), dtype=bool), k=1)\n"
    "    q, k = np.meshgrid(np.arange(n), np.arange(n), indexing='ij')\n"
    "    ent = -np.where(ref > 0, ref * np.log(np.where(ref > 0, ref, 1)), 0).sum(-1).mean(-1)\n"
    "    mass = np.zeros((L, H, n))\n"
    "    for d in range(n):\n"
    "        mass[:, :, d] = (ref * (q - k == d)).sum((-1, -2)) / n\n"
    "    print('%s heads=%d weights=%.3e control=%.3e sum=%.3e masked_nonzero=%d entropy=%.3e'\n"
    "          ' mass=%.3e' % (v['pe'], len(v['weights']), np.abs(w - ref).max(),\n"
    "          np.abs(w - other).max(), np.abs(w.sum(-1) - 1).max(),\n"
    "          int((w[:, :, future] != 0).sum()), np.abs(np.array(v['entropy']) - ent).max(),\n"
    "          np.abs(np.array(v['mass']) - mass).max()))\n";

/* Runs -m attention --json on `model` with the variants and each variant's
 * reference, and holds every line of COMPARE to its bound. */
static void compare(const char *model, const char *tokenizer, const char *text, const char *zoo_dir,
                    const char *const *variants, int n) {
    char list[256] = "";
    for (int i = 0; i < n; i++) {
        strcat(list, i ? "," : "");
        strcat(list, variants[i]);
    }
    const char *args[16] = {model, "-m", "attention", "-i", text, "--pe", list, "--json"};
    int a = 8;
    if (tokenizer) args[a++] = "-z", args[a++] = tokenizer;
    args[a] = NULL;
    TestsRun e = tests_run_engine_ok(args);
    tests_write_file(temp[T_ENGINE], e.out, e.out_len);
    tests_run_free(&e);
    for (int i = 0; i < n; i++) {
        TestsRun r;
        if (zoo_dir) {
            char dir[1024];
            snprintf(dir, sizeof dir, "%s", tests_model_path(models, zoo_dir));
            const char *py[] = {"tools/reference.py", "--zoo", dir, "--attention", text, "--pe",
                                variants[i], NULL};
            r = tests_run_python_ok(py);
        } else {
            const char *py[] = {"tools/reference.py", model, tokenizer, "-i", text, "--attention",
                                "--pe", variants[i], NULL};
            r = tests_run_python_ok(py);
        }
        tests_write_file(temp[T_REF0 + i], r.out, r.out_len);
        tests_run_free(&r);
    }
    const char *py[8] = {"-c", COMPARE, temp[T_ENGINE]};
    for (int i = 0; i < n; i++) py[3 + i] = temp[T_REF0 + i];
    py[3 + n] = NULL;
    TestsRun c = tests_run_python_ok(py);
    printf("%s", c.out);
    ck_assert_msg(strstr(c.out, "tokens_equal=1\n"), "%s", c.out);
    int lines = 0;
    for (char *line = strchr(c.out, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        char pe[32];
        int heads, masked;
        double w, control, sum, entropy, mass;
        ck_assert_int_eq(sscanf(line, "%31s heads=%d weights=%lf control=%lf sum=%lf "
                                "masked_nonzero=%d entropy=%lf mass=%lf", pe, &heads, &w,
                                &control, &sum, &masked, &entropy, &mass), 8);
        ck_assert_msg(w <= WEIGHT_TOL, "%s: weights %g off NumPy's", pe, w);
        ck_assert_msg(control > 100 * WEIGHT_TOL, "%s: control only %g off", pe, control);
        ck_assert_msg(sum <= SUM_TOL, "%s: a row sums to 1 +- %g", pe, sum);
        ck_assert_msg(masked == 0, "%s: %d masked cells weigh something", pe, masked);
        ck_assert_msg(entropy <= WEIGHT_TOL * 10 && mass <= WEIGHT_TOL, "%s: entropy %g, mass %g",
                      pe, entropy, mass);
        lines++;
    }
    ck_assert_int_eq(lines, n);
    tests_run_free(&c);
}

START_TEST(stories260k_matches_numpy) {
    if (!models) return;
    const char *variants[] = {"rope", "alibi", "sinusoidal", "none"};
    compare(stories, tok512, STORY, NULL, variants, 4);
}
END_TEST

START_TEST(zoo_matches_numpy) {
    if (!models) return;
    const char *t5[] = {"t5", "none"};
    compare(zoo_t5, NULL, ROMEO, "zoo/t5", t5, 2);
    const char *alibi[] = {"alibi", "none"};
    compare(zoo_alibi, NULL, ROMEO, "zoo/alibi", alibi, 2);
}
END_TEST

START_TEST(selection_csv_and_charts) {
    if (!models) return;
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/att", svg_dir);
    const char *args[] = {zoo_t5, "-m", "attention", "-i", "ROMEO: hi", "--pe", "t5,none",
                          "--layer", "1", "--json", "--csv", temp[T_CSV], "--svg", prefix, NULL};
    TestsRun r = tests_run_engine_ok(args);
    /* 9 characters: the selected layer's 4 heads per variant, 45 cells each */
    ck_assert_msg(strstr(r.out, "{\"layer\":1,\"head\":3,") && !strstr(r.out, "{\"layer\":0,"),
                  "%s", r.out);
    tests_run_free(&r);
    char *csv = tests_read_file(temp[T_CSV], NULL);
    int rows = 0;
    for (char *c = csv; *c; c++) rows += *c == '\n';
    ck_assert_int_eq(rows, 1 + 2 * 4 * 45);
    ck_assert_msg(strstr(csv, "\nnone,1,0,8,8,"), "%s", csv);
    free(csv);
    char files[4][300];
    const char *const names[4] = {"t5-weights", "none-weights", "mass", "entropy"};
    for (int i = 0; i < 4; i++) snprintf(files[i], sizeof files[i], "%s-%s.svg", prefix, names[i]);
    const char *charts[] = {files[0], files[1], files[2], files[3], NULL};
    TestsRun f = tests_svg_facts(charts);
    const char *o = f.out;
    ck_assert_msg(strstr(o, "att-t5-weights.svg panel=layer 1, head 0 cells=45\n") &&
                  strstr(o, "att-t5-weights.svg panel=layer 1, head 3 cells=45\n") &&
                  !strstr(o, "panel=layer 0"), "%s", o);
    /* the axes named by position and token: "ROMEO: hi" is R O M E O : ␣ h i, a space
     * shown as '_' */
    ck_assert_msg(strstr(o, "att-none-weights.svg text=key (position, token)\n") &&
                  strstr(o, "att-none-weights.svg text=query (position, token)\n") &&
                  strstr(o, "att-none-weights.svg text=0 R\n") &&
                  strstr(o, "att-none-weights.svg text=6 _\n"), "%.3000s", o);
    ck_assert_msg(strstr(o, "att-mass.svg legend=t5|") && strstr(o, "att-mass.svg legend=none|"),
                  "%s", o);
    ck_assert_msg(strstr(o, "att-mass.svg text=layer 1, every head\n") &&
                  strstr(o, "att-mass.svg text=attention mass\n"), "%s", o);
    ck_assert_msg(strstr(o, "att-entropy.svg legend=t5|") &&
                  strstr(o, "att-entropy.svg text=entropy (nats)\n"), "%s", o);
    tests_run_free(&f);
    tests_expect_cut_file_rejected(files[0], temp[T_CUT], "tests/modes/svg_facts.py");
}
END_TEST

START_TEST(misuse_is_one_error) {
    if (!models) return;
    const char *a1[] = {zoo_t5, "-m", "attention", NULL};
    tests_expect_error(a1, "-m attention needs a text: -i TEXT or -f FILE");
    const char *a2[] = {zoo_t5, "-m", "attention", "-i", "x", "--layer", "4", NULL};
    tests_expect_error(a2, "--layer 4: the model has 4 layers (0..3)");
    const char *a3[] = {zoo_t5, "-m", "attention", "-i", "x", "--head", "9", NULL};
    tests_expect_error(a3, "--head 9: the model has 4 heads (0..3)");
    const char *a4[] = {zoo_t5, "-i", "x", "--layer", "1", NULL};
    tests_expect_error(a4, "--layer is not used by -m generate");
    const char *a5[] = {zoo_t5, "-m", "attention", "-i", "x", "--kv-type", "f16", NULL};
    tests_expect_error(a5, "--kv-type is not used by -m attention");
    /* control: the last layer and head are fine */
    const char *ok[] = {zoo_t5, "-m", "attention", "-i", "x", "--layer", "3", "--head", "3", NULL};
    tests_expect_success(ok);
}
END_TEST

int main(void) {
    Suite *s = suite_create("attention_view");
    TCase *tc = tcase_create("models");
    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, stories260k_matches_numpy);
    tcase_add_test(tc, zoo_matches_numpy);
    tcase_add_test(tc, selection_csv_and_charts);
    tcase_add_test(tc, misuse_is_one_error);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
