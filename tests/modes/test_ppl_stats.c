/* -m ppl's statistics and the per-token outputs, through the real binary on
 * the PE zoo's RoPE model (character level, 65 tokens, trained context 128)
 * and slices of tiny-shakespeare's validation part (the models' held-out
 * 10%):
 *  - mean NLL and its standard error, the paired NLL difference and its
 *    standard error, mean KL(baseline || variant) and top-1 agreement equal
 *    an independent recomputation (tools/ppl_stats_reference.py, Python's
 *    math.fsum, two-pass variances) from the --logits-out file, in window,
 *    stride and stream modes; a perturbed file makes exactly the statistic
 *    it touches disagree;
 *  - a variant identical to the baseline gives difference 0, KL 0 and
 *    agreement 1 exactly, a slightly different one does not;
 *  - the baseline defaults to the checkpoint's scheme, run too when --pe
 *    does not list it; misuse of the new flags is one error line;
 *  - the SVG parses as XML with its axis labels, smoothing, one series per
 *    variant with its mean NLL in the legend, the trained-context label above
 *    the plot and faint sparse positions; the CSV agrees with the JSON means;
 *  - generate --json and --logits-out: one JSON object per token, a summary
 *    with the plain run's text, and log-probabilities that match PyTorch's
 *    logits for the same prompt (the zoo's reference.json). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common.h"

/* The engine's statistics are double sums over the same per-token values
 * the file holds to 9 significant digits (~5e-9 relative each), so the two
 * computations differ by < 1e-7; 1e-6 is the bound. */
#define STATS_TOL 1e-6
/* The zoo's logits are within 1e-4 of PyTorch's (test_models); a
 * log-probability is a logit minus the log-normalizer, which moves by at
 * most the largest logit error. */
#define LOGPROB_TOL 2e-4

static const char *models, *model_gguf, *small_text, *large_text;
static char ref_json[1024], alibi_ref_json[1024];

/* Scratch files, made by the fixture: Check runs each test in a child
 * process, and only the process that made a temporary file removes it. */
enum { T_LOGITS, T_DAMAGED = T_LOGITS + 3, T_SVG = T_DAMAGED + 3, T_CSV, T_CUT_SVG, T_GEN_OUT,
       T_GEN_LOGITS, T_BAD_JSON, N_TEMPS };
static const char *temp[N_TEMPS];

static char *slice(const char *text, size_t len, size_t start, size_t n) {
    ck_assert(start + n <= len);
    char *s = malloc(n + 1);
    memcpy(s, text + start, n);
    s[n] = '\0';
    return s;
}

static void setup(void) {
    models = tests_models_dir("ppl statistics tests on the PE zoo");
    if (!models) return;
    model_gguf = tests_convert(models, "zoo/rope", NULL);
    ck_assert_ptr_nonnull(model_gguf);
    snprintf(ref_json, sizeof ref_json, "%s", tests_model_path(models, "zoo/rope/reference.json"));
    snprintf(alibi_ref_json, sizeof alibi_ref_json, "%s",
             tests_model_path(models, "zoo/alibi/reference.json"));
    size_t len;
    char *text = tests_read_file(tests_text_path(models, "tiny-shakespeare.txt"), &len);
    size_t val = (size_t)(0.9 * (double)len);
    char *small = slice(text, len, val, 1500), *large = slice(text, len, val, 6000);
    small_text = tests_write_temp(small, strlen(small), ".txt");
    large_text = tests_write_temp(large, strlen(large), ".txt");
    free(small);
    free(large);
    free(text);
    for (int t = 0; t < N_TEMPS; t++) temp[t] = tests_write_temp("", 0, NULL);
}

static void teardown(void) {}

/* The line of a JSON-lines text whose "pe" is `pe` (malloc'd), or NULL. */
static char *pe_line(const char *text, const char *pe) {
    char want[128];
    snprintf(want, sizeof want, "\"%s\"", pe);
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        const char *at = strstr(line, "\"pe\":");
        if (at && at < line + n) {
            at += 5;
            while (*at == ' ') at++;
            if (!strncmp(at, want, strlen(want))) {
                char *copy = malloc(n + 1);
                memcpy(copy, line, n);
                copy[n] = '\0';
                return copy;
            }
        }
        line += n + (end != NULL);
    }
    return NULL;
}

/* The number `key` of variant `pe`; fails the test when absent. */
static double stat(const char *text, const char *pe, const char *key) {
    char *line = pe_line(text, pe);
    ck_assert_msg(line != NULL, "no line for %s in:\n%s", pe, text);
    double v = tests_json_number(line, key);
    free(line);
    ck_assert_msg(!isnan(v), "no number \"%s\" for %s", key, pe);
    return v;
}

/* ---- statistics against the independent recomputation ------------------- */

#define N_VARIANTS 4
static const char *const VARIANTS = "rope,alibi,none,rope:ntk:2";
static const char *const NAMES[N_VARIANTS] = {"rope", "alibi", "none", "rope:ntk:2"};
#define N_STATS 6
static const char *const STATS[N_STATS] = {"nll", "nll_se", "nll_diff", "nll_diff_se", "kl",
                                           "top1_agree"};

#define N_MODES 3
static const char *const MODE_NAMES[N_MODES] = {"windows", "stride 16", "stream"};

/* -m ppl --json of `pe` on the small slice in mode m (windows of 64),
 * baseline rope; with logits_out, every prediction's full distribution
 * (--logits-top 65 = the vocabulary) goes there. */
static TestsRun ppl_json(int m, const char *pe, const char *logits_out) {
    const char *args[32] = {model_gguf, "-m", "ppl", "-f", small_text, "--ctx", "64",
                            "--threads", "1", "--pe", pe, "--baseline", "rope", "--json"};
    int n = 14;
    if (m == 1) args[n++] = "--stride", args[n++] = "16";
    if (m == 2) args[n++] = "--stream";
    if (logits_out) {
        args[n++] = "--logits-out", args[n++] = logits_out;
        args[n++] = "--logits-top", args[n++] = "65";
    }
    args[n] = NULL;
    return tests_run_engine_ok(args);
}

static TestsRun reference_stats(const char *logits_path) {
    const char *args[] = {"tools/ppl_stats_reference.py", logits_path, "--baseline", "rope", NULL};
    return tests_run_python_ok(args);
}

/* max(a, b) that keeps a NaN, which fmax would drop: a NaN error then fails
 * every bound (d <= tol) and every control (d > min). */
static double max_keep_nan(double a, double b) { return isnan(a) || isnan(b) ? NAN : fmax(a, b); }

static double stat_error(const char *engine, const char *ref, const char *pe, const char *key) {
    return fabs(stat(engine, pe, key) - stat(ref, pe, key));
}

START_TEST(stats_match_reference) {
    if (!models) return;
    const char *logits = temp[T_LOGITS + _i];
    TestsRun e = ppl_json(_i, VARIANTS, logits), ref = reference_stats(logits);
    for (int v = 0; v < N_VARIANTS; v++) {
        ck_assert_double_eq(stat(e.out, NAMES[v], "tokens"), stat(ref.out, NAMES[v], "tokens"));
        double worst = 0.0;
        for (int s = 0; s < N_STATS; s++) {
            double d = stat_error(e.out, ref.out, NAMES[v], STATS[s]);
            ck_assert_msg(d <= STATS_TOL, "%s, %s: %s differs by %g", MODE_NAMES[_i], NAMES[v],
                          STATS[s], d);
            worst = max_keep_nan(worst, d);
        }
        printf("%-9s %-10s nll %.4f ± %.4f  diff %+.4f ± %.4f  kl %.4f  top1 %.4f  "
               "(max |engine - reference| %.1e)\n", MODE_NAMES[_i], NAMES[v],
               stat(e.out, NAMES[v], "nll"), stat(e.out, NAMES[v], "nll_se"),
               stat(e.out, NAMES[v], "nll_diff"), stat(e.out, NAMES[v], "nll_diff_se"),
               stat(e.out, NAMES[v], "kl"), stat(e.out, NAMES[v], "top1_agree"), worst);
    }
    /* The comparison sees real differences: rope and alibi differ a lot. */
    ck_assert_double_gt(fabs(stat(e.out, "alibi", "kl") - stat(ref.out, "rope", "kl")), 1.0);
    tests_run_free(&e);
    tests_run_free(&ref);
}
END_TEST

/* Rewrites a --logits-out file with one kind of damage to alibi's lines:
 *   logprob: one token's log-probability +0.5 (moves nll and nll_diff);
 *   kl:      every line's two most likely entries trade probabilities (still
 *            a distribution; moves kl, not the token's own log-probability);
 *   top1:    in one line where alibi and rope agree on the argmax, the first
 *            two entries swap (moves top1_agree by 1/n). */
static const char PERTURB[] =
    "import json, sys\n"
    "src, dst, how = sys.argv[1:4]\n"
    "rows = [json.loads(line) for line in open(src)]\n"
    "rope_top1 = {r['i']: r['top'][0][0] for r in rows if r['variant'] == 'rope'}\n"
    "done = False\n"
    "for r in rows:\n"
    "    if r['variant'] != 'alibi':\n"
    "        continue\n"
    "    t = r['top']\n"
    "    if how == 'logprob' and not done:\n"
    "        r['logprob'] += 0.5\n"
    "        done = True\n"
    "    if how == 'kl' and r['token'] not in (t[0][0], t[1][0]):\n"
    "        t[0][1], t[1][1] = t[1][1], t[0][1]\n"
    "    if how == 'top1' and not done and t[0][0] == rope_top1[r['i']]:\n"
    "        t[0], t[1] = t[1], t[0]\n"
    "        done = True\n"
    "open(dst, 'w').write(''.join(json.dumps(r) + '\\n' for r in rows))\n";

START_TEST(perturbed_file_disagrees) {
    if (!models) return;
    const char *logits = temp[T_LOGITS];
    TestsRun e = ppl_json(0, VARIANTS, logits);
    static const char *const HOW[] = {"logprob", "kl", "top1"};
    /* which statistics of alibi each damage must move (1) or leave alone (0) */
    static const int MOVES[3][N_STATS] = {
        {1, 1, 1, 1, 0, 0}, {0, 0, 0, 0, 1, 0}, {0, 0, 0, 0, 0, 1}};
    for (int h = 0; h < 3; h++) {
        const char *damaged = temp[T_DAMAGED + h];
        const char *args[] = {"-c", PERTURB, logits, damaged, HOW[h], NULL};
        TestsRun p = tests_run_python_ok(args), ref = reference_stats(damaged);
        for (int s = 0; s < N_STATS; s++) {
            double d = stat_error(e.out, ref.out, "alibi", STATS[s]);
            ck_assert_msg(MOVES[h][s] ? d > STATS_TOL : d <= STATS_TOL,
                          "damage '%s': alibi %s off by %g", HOW[h], STATS[s], d);
            ck_assert_double_le(stat_error(e.out, ref.out, "none", STATS[s]), STATS_TOL);
        }
        tests_run_free(&p);
        tests_run_free(&ref);
    }
    tests_run_free(&e);
}
END_TEST

/* rope:none is rope (no scaling) under another name: same logits bit for
 * bit, so the comparison is exact.  rope:ntk:1.01 moves every frequency a
 * little and alibi a lot: neither may come out exact. */
START_TEST(identical_variant_is_exact) {
    if (!models) return;
    int mode = _i ? 2 : 0;
    TestsRun e = ppl_json(mode, "rope,rope:none,rope:ntk:1.01,alibi", NULL);
    ck_assert_double_eq(stat(e.out, "rope:none", "nll"), stat(e.out, "rope", "nll"));
    ck_assert_double_eq(stat(e.out, "rope:none", "nll_diff"), 0.0);
    ck_assert_double_eq(stat(e.out, "rope:none", "nll_diff_se"), 0.0);
    ck_assert_double_eq(stat(e.out, "rope:none", "kl"), 0.0);
    ck_assert_double_eq(stat(e.out, "rope:none", "top1_agree"), 1.0);
    ck_assert_double_eq(stat(e.out, "rope", "kl"), 0.0); /* the baseline itself */
    double near_kl = stat(e.out, "rope:ntk:1.01", "kl");
    ck_assert_double_gt(near_kl, 0.0);
    ck_assert_double_ne(stat(e.out, "rope:ntk:1.01", "nll_diff"), 0.0);
    ck_assert_double_gt(stat(e.out, "alibi", "kl"), 0.1);
    ck_assert_double_lt(stat(e.out, "alibi", "top1_agree"), 0.9);
    printf("%s: rope:none kl 0, top1 1; rope:ntk:1.01 kl %.3g; alibi kl %.3f\n",
           MODE_NAMES[mode], near_kl, stat(e.out, "alibi", "kl"));
    tests_run_free(&e);
}
END_TEST

/* ---- the baseline and the new flags ---------------------------------------- */

START_TEST(default_baseline_runs_too) {
    if (!models) return;
    const char *text_args[] = {model_gguf, "-m", "ppl", "-f", small_text, "--ctx", "64",
                               "--threads", "1", "--pe", "alibi,none", NULL};
    TestsRun t = tests_run_engine_ok(text_args);
    ck_assert_msg(strstr(t.out, "baseline rope (the checkpoint's scheme, not in --pe, so run too)"),
                  "%s", t.out);
    ck_assert_msg(strstr(t.out, "\nrope ") && strstr(t.out, "baseline"), "%s", t.out);
    tests_run_free(&t);
    const char *json_args[] = {model_gguf, "-m", "ppl", "-f", small_text, "--ctx", "64",
                               "--threads", "1", "--pe", "alibi,none", "--json", NULL};
    TestsRun j = tests_run_engine_ok(json_args);
    char *rope = pe_line(j.out, "rope");
    ck_assert_msg(rope && strstr(rope, "\"baseline_added\":true"), "%s", j.out);
    ck_assert_double_eq(stat(j.out, "rope", "top1_agree"), 1.0);
    ck_assert_double_gt(stat(j.out, "alibi", "kl"), 0.1);
    free(rope);
    tests_run_free(&j);
}
END_TEST

START_TEST(flag_errors) {
    if (!models) return;
    const char *m = model_gguf, *f = small_text;
    const char *a1[] = {m, "-m", "ppl", "-f", f, "--pe", "alibi,none", "--baseline", "sinusoidal",
                        NULL};
    tests_expect_error(a1, "--baseline");
    const char *a1b[] = {m, "-m", "ppl", "-f", f, "--baseline", "alibi", NULL}; /* no --pe */
    tests_expect_error(a1b, "--baseline: 'alibi' is not one of the --pe variants (rope)");
    const char *a2[] = {m, "-m", "ppl", "-f", f, "--pe", "rope,alibi,rope", NULL};
    tests_expect_error(a2, "listed twice");
    const char *a3[] = {m, "--baseline", "rope", "-n", "4", NULL};
    tests_expect_error(a3, "--baseline");
    const char *a4[] = {m, "-m", "ppl", "-f", f, "--logits-top", "5", NULL};
    tests_expect_error(a4, "--logits-top");
    const char *a5[] = {m, "-m", "ppl", "-f", f, "--logits-out", "/nonexistent-dir/x.jsonl", NULL};
    tests_expect_error(a5, "--logits-out");
    const char *a6[] = {m, "-m", "bench", "--logits-out", "x.jsonl", NULL};
    tests_expect_error(a6, "--logits-out");
    const char *a7[] = {m, "-m", "ppl", "-f", f, "--logits-out", "x.jsonl", "--logits-top", "-1",
                        NULL};
    tests_expect_error(a7, "--logits-top");
}
END_TEST

/* ---- chart and CSV ----------------------------------------------------------- */

/* --stride 256 over windows of 512, 12 windows: positions 0-255 are scored
 * once (first window only), 256-511 twelve times, so 0-255 are sparse
 * (below 10% of 12). */
static TestsRun chart_run(void) {
    const char *svg = temp[T_SVG], *csv = temp[T_CSV];
    const char *args[] = {model_gguf, "-m", "ppl", "-f", large_text, "--ctx", "512", "--stride",
                          "256", "--chunks", "12", "--threads", "1", "--pe", "rope,alibi,none",
                          "--json", "--svg", svg, "--csv", csv, NULL};
    return tests_run_engine_ok(args);
}

START_TEST(svg_is_readable) {
    if (!models) return;
    TestsRun e = chart_run();
    const char *charts[] = {temp[T_SVG], NULL};
    TestsRun facts = tests_svg_facts(charts);
    const char *o = facts.out;
    ck_assert_msg(strstr(o, "series=3\n"), "%s", o);
    ck_assert_msg(strstr(o, "text=position within the window\n"), "%s", o);
    ck_assert_msg(strstr(o, "text=mean NLL (nats/token)\n"), "%s", o);
    ck_assert_msg(strstr(o, "moving average over 5 positions"), "%s", o);
    ck_assert_msg(strstr(o, "marker_above_plot=1\n"), "%s", o);
    ck_assert_msg(strstr(o, "positions scored fewer than 2 times"), "%s", o);
    ck_assert_msg(!strstr(o, "dashed=0\n"), "no faint stretch: %s", o);
    for (int v = 0; v < 3; v++) {
        char want[160];
        snprintf(want, sizeof want, "legend=%s|mean NLL %.4f \u00b1 %.4f, ctx 512, 12 windows\n",
                 NAMES[v], stat(e.out, NAMES[v], "nll"), stat(e.out, NAMES[v], "nll_se"));
        ck_assert_msg(strstr(o, want), "missing '%s' in %s", want, o);
    }
    tests_run_free(&facts);
    tests_expect_cut_file_rejected(temp[T_SVG], temp[T_CUT_SVG], "tests/modes/svg_facts.py");
    tests_run_free(&e);
}
END_TEST

typedef struct {
    double weighted_sum;
    long count, first_count, last_count;
    int se_ok;
} CsvVariant;

/* Sums one variant's rows of "variant,position,mean_nll,count,se". */
static CsvVariant csv_variant(const char *csv, const char *name) {
    CsvVariant c = {0, 0, -1, -1, 1};
    const char *line = strchr(csv, '\n');
    ck_assert_ptr_nonnull(line);
    ck_assert(!strncmp(csv, "variant,position,mean_nll,count,se\n", (size_t)(line + 1 - csv)));
    for (line++; *line; line = strchr(line, '\n') + 1) {
        char label[64];
        int pos;
        double mean;
        long count;
        int used = 0;
        ck_assert_int_eq(sscanf(line, "%63[^,],%d,%lf,%ld,%n", label, &pos, &mean, &count, &used),
                         4);
        if (strcmp(label, name) != 0) continue;
        c.weighted_sum += mean * count;
        c.count += count;
        if (pos == 0) c.first_count = count;
        if (pos == 511) c.last_count = count;
        int has_se = line[used] != '\n';
        c.se_ok &= has_se == (count > 1);
    }
    return c;
}

START_TEST(csv_agrees_with_json) {
    if (!models) return;
    TestsRun e = chart_run();
    char *csv = tests_read_file(temp[T_CSV], NULL);
    for (int v = 0; v < 3; v++) {
        CsvVariant c = csv_variant(csv, NAMES[v]);
        /* means are printed to 6 decimals: the weighted mean is within 5e-7 */
        double mean = c.weighted_sum / c.count, json = stat(e.out, NAMES[v], "nll");
        ck_assert_msg(fabs(mean - json) <= STATS_TOL, "%s: csv %.7f vs json %.7f", NAMES[v], mean,
                      json);
        ck_assert_double_eq((double)c.count, stat(e.out, NAMES[v], "tokens"));
        ck_assert_int_eq(c.first_count, 1);
        ck_assert_int_eq(c.last_count, 12);
        ck_assert_msg(c.se_ok, "%s: se must be empty exactly where count is 1", NAMES[v]);
    }
    /* Negative control: another variant's mean is far outside the tolerance. */
    CsvVariant rope = csv_variant(csv, "rope");
    ck_assert_double_gt(fabs(rope.weighted_sum / rope.count - stat(e.out, "alibi", "nll")),
                        100 * STATS_TOL);
    free(csv);
    tests_run_free(&e);
}
END_TEST

/* ---- generate --json and --logits-out ------------------------------------------ */

/* log softmax of reference.json's "logits_last" (the logits after the
 * prompt "ROMEO:\n"), computed here in double. */
static int reference_logprobs(const char *path, double *out, int max) {
    char *json = tests_read_file(path, NULL);
    const char *at = strstr(json, "\"logits_last\"");
    ck_assert_ptr_nonnull(at);
    at = strchr(at, '[') + 1;
    int n = 0;
    for (char *end; n < max; at = end) {
        out[n] = strtod(at, &end);
        if (end == at) break;
        n++;
        while (*end == ',' || *end == ' ' || *end == '\n') end++;
    }
    free(json);
    double max_logit = -INFINITY, sum = 0.0;
    for (int i = 0; i < n; i++) max_logit = fmax(max_logit, out[i]);
    for (int i = 0; i < n; i++) sum += exp(out[i] - max_logit);
    for (int i = 0; i < n; i++) out[i] -= max_logit + log(sum);
    return n;
}

/* The largest |logprob - reference| over a --logits-out line's "top" list;
 * NAN if any entry is (a "nan" log-probability parses as one). */
static double top_list_error(const char *line, const double *ref, int n_ref, int *n_entries) {
    const char *at = strstr(line, "\"top\":[");
    ck_assert_ptr_nonnull(at);
    at += 7;
    double worst = 0.0;
    *n_entries = 0;
    int id;
    double lp;
    int used;
    while (sscanf(at, "[%d,%lf]%n", &id, &lp, &used) == 2) {
        ck_assert(id >= 0 && id < n_ref);
        worst = max_keep_nan(worst, fabs(lp - ref[id]));
        (*n_entries)++;
        at += used;
        if (*at == ',') at++;
    }
    return worst;
}

/* Every stdout line is JSON; steps count up; the summary's text is the
 * prompt plus the pieces, its mean the steps' mean; each step's logprob is
 * the --logits-out line's, whose token is its top entry (greedy). */
static const char GENERATE_FACTS[] =
    "import json, sys\n"
    "out = [json.loads(line) for line in open(sys.argv[1])]\n"
    "rows = [json.loads(line) for line in open(sys.argv[2])]\n"
    "steps, summary = out[:-1], out[-1]\n"
    "assert all(s['type'] == 'token' for s in steps) and summary['type'] == 'summary'\n"
    "assert [s['step'] for s in steps] == list(range(len(steps))) == [r['i'] for r in rows]\n"
    "assert summary['generated'] == len(steps)\n"
    "assert summary['text'] == 'ROMEO:\\n' + ''.join(s['piece'] for s in steps)\n"
    "assert abs(summary['mean_logprob'] - sum(s['logprob'] for s in steps) / len(steps)) < 1e-8\n"
    "for s, r in zip(steps, rows):\n"
    "    assert s['token'] == r['token'] == r['top'][0][0] and s['pos'] == r['pos']\n"
    "    assert s['logprob'] == r['logprob'] == r['top'][0][1]\n"
    "print('first %d %.17g' % (steps[0]['token'], steps[0]['logprob']))\n"
    "sys.stdout.write(summary['text'])\n";

START_TEST(generate_json_and_logits) {
    if (!models) return;
    const char *out_path = temp[T_GEN_OUT], *logits = temp[T_GEN_LOGITS];
    const char *args[] = {model_gguf, "-t", "0", "-n", "30", "-i", "ROMEO:\n", "--threads", "1",
                          "--json", "--logits-out", logits, "--logits-top", "65", NULL};
    TestsRun j = tests_run_engine_ok(args);
    tests_write_file(out_path, j.out, strlen(j.out));
    const char *check[] = {"-c", GENERATE_FACTS, out_path, logits, NULL};
    TestsRun facts = tests_run_python_ok(check);
    /* The summary's text is what the plain run prints (which ends in '\n'). */
    const char *plain_args[] = {model_gguf, "-t", "0", "-n", "30", "-i", "ROMEO:\n", "--threads", "1",
                                NULL};
    TestsRun plain = tests_run_engine_ok(plain_args);
    size_t n = strlen(plain.out);
    ck_assert(n > 0 && plain.out[n - 1] == '\n');
    plain.out[n - 1] = '\0';
    int token;
    double lp;
    int used = 0;
    ck_assert_int_eq(sscanf(facts.out, "first %d %lf\n%n", &token, &lp, &used), 2);
    ck_assert_str_eq(facts.out + used, plain.out);

    /* The first step's distribution against PyTorch's. */
    double ref[128], other[128];
    int n_ref = reference_logprobs(ref_json, ref, 128);
    ck_assert_int_eq(n_ref, 65);
    char *rows = tests_read_file(logits, NULL);
    int entries;
    double err = top_list_error(rows, ref, n_ref, &entries);
    ck_assert_int_eq(entries, 65);
    ck_assert_msg(err <= LOGPROB_TOL, "step 0 log-probabilities off by %g", err);
    ck_assert_msg(fabs(lp - ref[token]) <= LOGPROB_TOL, "logprob %.6f vs reference %.6f", lp,
                  ref[token]);
    /* Negative control: the alibi model's reference is far off. */
    ck_assert_int_eq(reference_logprobs(alibi_ref_json, other, 128), 65);
    ck_assert_double_gt(top_list_error(rows, other, 65, &entries), 100 * LOGPROB_TOL);
    printf("generate: step 0 log-probabilities within %.1e of PyTorch's\n", err);
    free(rows);
    tests_run_free(&j);
    tests_run_free(&facts);
    tests_run_free(&plain);
}
END_TEST

/* Negative control for the checks above: a line that is not JSON fails. */
START_TEST(generate_facts_reject_bad_json) {
    if (!models) return;
    const char *bad = temp[T_BAD_JSON];
    tests_write_file(bad, "{\"type\":\"token\",\n", 17);
    const char *check[] = {"-c", GENERATE_FACTS, bad, bad, NULL};
    TestsRun r = tests_run_python(check);
    ck_assert_int_ne(r.status, 0);
    tests_run_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ppl_stats");
    TCase *tc = tcase_create("zoo");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, stats_match_reference, 0, N_MODES);
    tcase_add_test(tc, perturbed_file_disagrees);
    tcase_add_loop_test(tc, identical_variant_is_exact, 0, 2);
    tcase_add_test(tc, default_baseline_runs_too);
    tcase_add_test(tc, flag_errors);
    tcase_add_test(tc, svg_is_readable);
    tcase_add_test(tc, csv_agrees_with_json);
    tcase_add_test(tc, generate_json_and_logits);
    tcase_add_test(tc, generate_facts_reject_bad_json);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
