/* -m pe through the real binary on the PE zoo (../shared/models/zoo): every
 * value of --json against closed forms computed independently in NumPy
 * (tools/pe_reference.py, from the papers' formulas and the checkpoint's own
 * tables), each with a planted-bug control that must fail:
 *  - sinusoidal: the vectors (control: sin and cos swapped) and their
 *    cosine similarities; learned: the checkpoint's table row by row
 *    (control: one row off);
 *  - rope under none/linear/NTK/YaRN: frequencies, wavelengths, YaRN's
 *    attention scale (controls: a plausible bug in each mode's formula), the
 *    mean q.k over random vectors against its expectation, and over the
 *    model's own keys (dumped here from a context of the same text) against
 *    the closed form (control: the other pairing);
 *  - alibi (two max biases): slopes and the bias matrices (control: the sign);
 *    t5 past its max distance: buckets (control: one distance off) and the
 *    bias from the checkpoint's table; masked cells are exactly the keys
 *    after the query;
 *  - the charts parse as XML with their panels, cells and labels; the text
 *    summary; misuse is one error line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modes/generate.h"
#include "tests/common.h"

/* Tolerances, by what limits each value:
 *  - float32 evaluation of a closed form (sinusoid, powf frequencies, a
 *    slope times a distance, a table entry through the bias hook): 1e-6,
 *    against errors measured up to 2e-7 (relative for frequencies);
 *  - printed float32 values (%.9g round-trips them): 1e-8 for the learned
 *    table and buckets (integers: exact);
 *  - the mean over 1024 random Gaussian vectors: each sample's q.R(d)q/32
 *    has variance at most 2/32, so the mean's standard error is at most
 *    0.0078; 0.04 is five of them;
 *  - q.k of the model's keys: float32 rotations (the engine's unrotation
 *    and rotation, sums over 32 dims) against float64 here, on values up to
 *    ~3: 1e-5, against 9e-7 measured. */
#define TOL_FLOAT 1e-6
#define TOL_EXACT 1e-8
#define TOL_RANDOM 0.04
#define TOL_KEYS 1e-5

static const char *models, *zoo[5], *svg_dir;
enum { Z_ROPE, Z_ALIBI, Z_T5, Z_SINUSOIDAL, Z_LEARNED };
static const char *const SCHEMES[5] = {"rope", "alibi", "t5", "sinusoidal", "learned"};
static const char TEXT[] = "ROMEO:\nWhat light through yonder window breaks? It is the east.";
enum { T_JSON, T_KEYS, T_CUT, N_TEMPS };
static const char *temp[N_TEMPS];

static void setup(void) {
    models = tests_models_dir("-m pe on the PE zoo");
    if (!models) return;
    for (int z = 0; z < 5; z++) {
        char rel[32];
        snprintf(rel, sizeof rel, "zoo/%s", SCHEMES[z]);
        zoo[z] = tests_convert(models, rel, NULL);
        ck_assert_ptr_nonnull(zoo[z]);
    }
    for (int t = 0; t < N_TEMPS; t++) temp[t] = tests_write_temp("", 0, NULL);
    svg_dir = tests_temp_dir();
}

static double tolerance(const char *check) {
    if (!strcmp(check, "qk_random")) return TOL_RANDOM;
    if (!strcmp(check, "qk_keys")) return TOL_KEYS;
    if (!strcmp(check, "bucket") || !strcmp(check, "slopes"))
        return TOL_EXACT;
    return TOL_FLOAT;
}

/* Runs -m pe --json with args on zoo model z, then the NumPy reference on
 * it; every CHECK line must pass and its control fail.  Returns the number
 * of checks. */
static int check_against_reference(int z, const char *const *extra, int with_keys) {
    const char *args[24] = {zoo[z], "-m", "pe", "--json"};
    int n = 4;
    for (int i = 0; extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    TestsRun r = tests_run_engine_ok(args);
    tests_write_file(temp[T_JSON], r.out, r.out_len);
    tests_run_free(&r);
    char dir[64];
    snprintf(dir, sizeof dir, "zoo/%s", SCHEMES[z]);
    const char *py[] = {"tools/pe_reference.py", temp[T_JSON], tests_model_path(models, dir),
                        with_keys ? "--keys" : NULL, temp[T_KEYS], NULL};
    TestsRun ref = tests_run_python_ok(py);
    int checks = 0;
    for (char *line = ref.out; (line = strstr(line, "CHECK ")); line++) {
        char variant[64], name[32];
        double err, control;
        ck_assert_int_eq(sscanf(line, "CHECK %63s %31s %lf %lf", variant, name, &err, &control), 4);
        printf("%-10s %-14s %-15s error %.3g, control %.3g\n", SCHEMES[z], variant, name, err,
               control);
        checks++;
        if (!strcmp(name, "masked")) { /* mismatched cells, then how many are masked */
            ck_assert_msg(err == 0 && control > 0, "%s: %g cells masked wrongly", variant, err);
            continue;
        }
        double tol = z == Z_LEARNED && !strcmp(name, "vectors") ? TOL_EXACT : tolerance(name);
        ck_assert_msg(err <= tol, "%s %s: error %g above %g", variant, name, err, tol);
        /* NTK's exponent d/(d-2) against 1 moves the random mean less than
         * its noise: that control is the frequencies' own. */
        if (!strcmp(name, "qk_random") && strcmp(variant, "rope") != 0) continue;
        ck_assert_msg(control > tol, "%s %s: the control is only %g off (tolerance %g)", variant,
                      name, control, tol);
    }
    tests_run_free(&ref);
    return checks;
}

/* The model's cached keys of TEXT under its own rope, as pe_reference.py
 * reads them (the same tokens -m pe -i encodes). */
static void dump_keys(void) {
    Model m;
    tests_load_model(&m, zoo[Z_ROPE]);
    Tokenizer tok;
    PosencError err;
    ck_assert_msg(tokenizer_load_gguf(&tok, m.gguf, &err) == 0, "%s", err.msg);
    int *ids, n;
    ck_assert_msg(generate_encode_prompt(&tok, TEXT, &ids, &n, &err) == 0, "%s", err.msg);
    Context ctx;
    tests_build_context(&ctx, &m, &m.pe, n);
    context_prefill(&ctx, ids, n, 0);
    const KVCache *kv = &ctx.cache;
    int header[4] = {m.config.n_layers, kv->n_used, kv->kv_dim, model_head_size(&m.config)};
    size_t keys = (size_t)header[0] * header[1] * header[2];
    size_t bytes = sizeof header + (size_t)header[1] * sizeof(int) + keys * sizeof(float);
    char *buf = malloc(bytes);
    memcpy(buf, header, sizeof header);
    memcpy(buf + sizeof header, kv->pos, (size_t)header[1] * sizeof(int));
    float *k = (float *)(buf + sizeof header + (size_t)header[1] * sizeof(int));
    for (int l = 0; l < header[0]; l++)
        kv_cache_load_keys(kv, l, 0, kv->n_used, k + (size_t)l * header[1] * header[2]);
    tests_write_file(temp[T_KEYS], buf, bytes);
    free(buf);
    free(ids);
    context_free(&ctx);
    tokenizer_free(&tok);
    model_free(&m);
}

START_TEST(rope_matches_closed_forms) {
    if (!models) return;
    const char *scaled[] = {"--pe", "rope,rope:linear:4,rope:ntk:4,rope:yarn:4", "--ctx", "96", NULL};
    ck_assert_int_eq(check_against_reference(Z_ROPE, scaled, 0), 4 * 4);
    dump_keys();
    const char *keys[] = {"-i", TEXT, NULL};
    ck_assert_int_eq(check_against_reference(Z_ROPE, keys, 1), 5);
}
END_TEST

START_TEST(bias_matches_closed_forms) {
    if (!models) return;
    const char *plain[] = {NULL};
    ck_assert_int_eq(check_against_reference(Z_ALIBI, plain, 0), 3);
    const char *other[] = {"--alibi-max-bias", "4", "--ctx", "100", NULL};
    ck_assert_int_eq(check_against_reference(Z_ALIBI, other, 0), 3);
    /* past the max distance 128: every farther key in the last bucket */
    const char *far[] = {"--ctx", "160", NULL};
    ck_assert_int_eq(check_against_reference(Z_T5, far, 0), 3);
}
END_TEST

START_TEST(embed_matches_closed_forms) {
    if (!models) return;
    const char *plain[] = {NULL};
    ck_assert_int_eq(check_against_reference(Z_SINUSOIDAL, plain, 0), 2);
    const char *table[] = {"--ctx", "127", NULL}; /* the control reads row p + 1 */
    ck_assert_int_eq(check_against_reference(Z_LEARNED, table, 0), 2);
}
END_TEST

START_TEST(charts_are_readable) {
    if (!models) return;
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/pe", svg_dir);
    const char *a1[] = {zoo[Z_ALIBI], "-m", "pe", "--ctx", "16", "--svg", prefix, NULL};
    TestsRun r = tests_run_engine_ok(a1);
    char want[512];
    snprintf(want, sizeof want, "wrote %s-alibi-bias.svg\n", prefix);
    ck_assert_msg(strstr(r.err, want), "%s", r.err);
    tests_run_free(&r);
    const char *a2[] = {zoo[Z_LEARNED], "-m", "pe", "--ctx", "32", "--svg", prefix, NULL};
    tests_expect_success(a2);
    const char *a3[] = {zoo[Z_ROPE], "-m", "pe", "--pe", "rope,rope:yarn:4", "-i", TEXT, "--svg",
                        prefix, NULL};
    tests_expect_success(a3);
    char files[4][300];
    const char *const names[4] = {"alibi-bias", "learned-vectors", "wavelength", "qk"};
    for (int i = 0; i < 4; i++) snprintf(files[i], sizeof files[i], "%s-%s.svg", prefix, names[i]);
    const char *charts[] = {files[0], files[1], files[2], files[3], NULL};
    TestsRun facts = tests_svg_facts(charts);
    const char *o = facts.out;
    /* alibi: one panel per head, the 16 x 17 / 2 cells at or before the diagonal */
    ck_assert_msg(strstr(o, "pe-alibi-bias.svg panel=head 0, slope 0.25 cells=136\n"), "%s", o);
    ck_assert_msg(strstr(o, "pe-alibi-bias.svg panel=head 3, slope 0.003906 cells=136\n"), "%s", o);
    ck_assert_msg(strstr(o, "pe-alibi-bias.svg text=query position\n"), "%s", o);
    ck_assert_msg(strstr(o, "pe-alibi-bias.svg text=key position\n"), "%s", o);
    /* learned: 32 positions x 128 dimensions, 32 x 32 similarities */
    ck_assert_msg(strstr(o, "pe-learned-vectors.svg panel=position vectors cells=4096\n"), "%s", o);
    ck_assert_msg(strstr(o, "pe-learned-vectors.svg panel=cosine similarity of two positions' "
                            "vectors cells=1024\n"), "%s", o);
    ck_assert_msg(strstr(o, "pe-learned-vectors.svg text=dimension\n"), "%s", o);
    /* rope: a wavelength series per variant; q.k random and keys per variant */
    ck_assert_msg(strstr(o, "pe-wavelength.svg legend=rope|") &&
                  strstr(o, "pe-wavelength.svg legend=rope:yarn:4|"), "%s", o);
    ck_assert_msg(strstr(o, "pe-wavelength.svg text=log2 wavelength (tokens)\n"), "%s", o);
    ck_assert_msg(strstr(o, "pe-qk.svg legend=rope, model keys|") &&
                  strstr(o, "pe-qk.svg legend=rope:yarn:4|"), "%s", o);
    ck_assert_msg(strstr(o, "pe-qk.svg text=distance between query and key (positions)\n"), "%s", o);
    tests_run_free(&facts);
    tests_expect_cut_file_rejected(files[0], temp[T_CUT], "tests/modes/svg_facts.py");
}
END_TEST

START_TEST(text_summary) {
    if (!models) return;
    const char *a[] = {zoo[Z_T5], "-m", "pe", "--ctx", "40", NULL};
    TestsRun r = tests_run_engine_ok(a);
    ck_assert_msg(strstr(r.out, "## t5 (t5): positions 0..39\n"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "distance  bucket  bias by head\n"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "\n      32      21 "), "distance 32 is in bucket 21: %s", r.out);
    tests_run_free(&r);
    const char *b[] = {zoo[Z_ROPE], "-m", "pe", "--pe", "none", NULL};
    r = tests_run_engine_ok(b);
    ck_assert_msg(strstr(r.out, "no positional hook"), "%s", r.out);
    tests_run_free(&r);
}
END_TEST

START_TEST(misuse_is_one_error) {
    if (!models) return;
    const char *a1[] = {zoo[Z_ROPE], "-m", "pe", "--ctx", "5000", NULL};
    tests_expect_error(a1, "--ctx 5000: -m pe shows at most 4096 positions");
    const char *a2[] = {zoo[Z_ROPE], "-m", "pe", "--pe", "learned", NULL};
    tests_expect_error(a2, "--pe learned: learned positions need a position embedding table");
    const char *a3[] = {zoo[Z_LEARNED], "-m", "pe", "--ctx", "200", NULL};
    tests_expect_error(a3, "--pe learned: position 199 is past the table of 128 positions");
    const char *a4[] = {zoo[Z_ROPE], "-m", "pe", "-t", "0", NULL};
    tests_expect_error(a4, "-t is not used by -m pe");
    const char *a5[] = {zoo[Z_ALIBI], "-m", "pe", "--rope-theta", "500", NULL};
    tests_expect_error(a5, "--rope-theta applies to rope");
    const char *a6[] = {zoo[Z_ALIBI], "-m", "pe", "-i", "x", NULL};
    tests_expect_error(a6, "-i: the text gives the RoPE view its keys, and no --pe variant rotates");
    const char *a7[] = {zoo[Z_ROPE], "-m", "pe", "-z", "x", NULL};
    tests_expect_error(a7, "-z encodes the text of -i or -f");
    /* control: the learned table's last position is fine */
    const char *ok[] = {zoo[Z_LEARNED], "-m", "pe", "--ctx", "128", NULL};
    tests_expect_success(ok);
}
END_TEST

int main(void) {
    Suite *s = suite_create("pe_view");
    TCase *tc = tcase_create("zoo");
    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, rope_matches_closed_forms);
    tcase_add_test(tc, bias_matches_closed_forms);
    tcase_add_test(tc, embed_matches_closed_forms);
    tcase_add_test(tc, charts_are_readable);
    tcase_add_test(tc, text_summary);
    tcase_add_test(tc, misuse_is_one_error);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
