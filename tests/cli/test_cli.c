/* The command line as a user meets it: every bad input is one line on
 * stderr, a non-zero exit and no crash (the asan build runs this too, so a
 * leak or overflow report would break the one-line rule). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/kernels.h"
#include "tests/common.h"

static const char *models;
static char model_path[1024], tok_path[1024];

static void setup(void) {
    models = tests_models_dir("CLI tests on stories260K");
    if (!models) return;
    snprintf(model_path, sizeof model_path, "%s", tests_model_path(models, "stories260K/stories260K.bin"));
    snprintf(tok_path, sizeof tok_path, "%s", tests_model_path(models, "stories260K/tok512.bin"));
}

static void expect_model_error(const char *path, const char *needle) {
    const char *args[] = {path, "-z", tok_path, "-n", "4", NULL};
    tests_expect_error(args, needle);
}

static const char *header_file(int32_t dim, int32_t hidden, int32_t layers, int32_t heads,
                               int32_t kv_heads, int32_t vocab, int32_t seq, size_t extra) {
    size_t n = 28 + extra;
    int32_t *buf = calloc(1, n + 4);
    int32_t h[7] = {dim, hidden, layers, heads, kv_heads, vocab, seq};
    memcpy(buf, h, sizeof h);
    const char *p = tests_write_temp(buf, n, ".bin");
    free(buf);
    return p;
}

START_TEST(bad_model_files) {
    if (!models) return;
    size_t n;
    char *full = tests_read_file(model_path, &n);
    const char *p;
    p = tests_write_temp(full, 1000, ".bin");
    expect_model_error(p, p);                                 /* truncated */
    expect_model_error(p, "truncated");
    p = tests_write_temp(full, 20, ".bin");
    expect_model_error(p, "shorter than the 28-byte");       /* shorter than a header */
    full = realloc(full, n + 4);
    ck_assert_ptr_nonnull(full);
    memcpy(full + n, "junk", 4);
    p = tests_write_temp(full, n + 4, ".bin");
    expect_model_error(p, "the file has");                   /* trailing bytes */
    free(full);
    expect_model_error(header_file(0, 172, 5, 8, 4, 512, 512, 64), "dim = 0");
    expect_model_error(header_file(-64, 172, 5, 8, 4, 512, 512, 64), "dim = -64");
    expect_model_error(header_file(64, 172, 5, 8, 4, 512, -512, 64), "seq_len");
    expect_model_error(header_file(1 << 30, 172, 5, 8, 4, 512, 512, 64), "dim");
    expect_model_error(header_file(64, 172, 5, 8, 4, INT32_MIN, 512, 64), "vocab_size");
    expect_model_error(header_file(64, 172, 5, 8, 3, 512, 512, 64), "n_kv_heads");
    expect_model_error(header_file(64, 172, 5, 7, 7, 512, 512, 64), "multiple of n_heads");
    expect_model_error(header_file(64, 1 << 18, 1024, 8, 4, 1 << 22, 1 << 22, 64), "header describes");
    expect_model_error("/nonexistent/model.bin", "/nonexistent/model.bin");
    expect_model_error("/tmp", "/tmp is a directory");
    expect_model_error(tests_write_temp("", 0, ".bin"), "empty");
}
END_TEST

START_TEST(bad_tokenizers) {
    if (!models) return;
    const char *missing[] = {model_path, "-z", "/nonexistent/tok.bin", NULL};
    tests_expect_error(missing, "/nonexistent/tok.bin");
    /* No -z and no tokenizer.bin beside the model. */
    size_t n;
    char *full = tests_read_file(model_path, &n);
    const char *dir = tests_temp_dir(); /* a directory surely without tokenizer.bin */
    char lone[64];
    snprintf(lone, sizeof lone, "%s/model.bin", dir);
    tests_write_file(lone, full, n);
    free(full);
    const char *no_z[] = {lone, NULL};
    tests_expect_error(no_z, "pass -z");
    /* A tokenizer of another size than the model's vocabulary. */
    const char *wrong[] = {model_path, "-z", tests_model_path(models, "llama2-tokenizer/tokenizer.bin"), NULL};
    tests_expect_error(wrong, "32000 pieces but the model's vocabulary is 512");
    char *tok = tests_read_file(tok_path, &n);
    const char *cut = tests_write_temp(tok, n - 3, ".bin");
    const char *trunc[] = {model_path, "-z", cut, NULL};
    tests_expect_error(trunc, cut);
    int32_t bad[3] = {16, 0, -5}; /* max_len, score, negative length */
    const char *neg = tests_write_temp(bad, sizeof bad, ".bin");
    const char *negargs[] = {model_path, "-z", neg, NULL};
    tests_expect_error(negargs, "invalid length -5");
    free(tok);
}
END_TEST

START_TEST(bad_flags) {
    if (!models) return;
    const char *unknown[] = {model_path, "-z", tok_path, "--frobnicate", "1", NULL};
    tests_expect_error(unknown, "--frobnicate");
    const char *no_value[] = {model_path, "-z", tok_path, "-n", NULL};
    tests_expect_error(no_value, "-n needs a value");
    const char *not_int[] = {model_path, "-z", tok_path, "-n", "12abc", NULL};
    tests_expect_error(not_int, "-n expects");
    const char *neg_temp[] = {model_path, "-z", tok_path, "-t", "-1", NULL};
    tests_expect_error(neg_temp, "-t expects");
    const char *topp[] = {model_path, "-z", tok_path, "-p", "1.5", NULL};
    tests_expect_error(topp, "-p expects");
    const char *threads[] = {model_path, "-z", tok_path, "--threads", "0", NULL};
    tests_expect_error(threads, "--threads");
    const char *pe[] = {model_path, "-z", tok_path, "--pe", "xpos", NULL};
    tests_expect_error(pe, "--pe: unknown scheme 'xpos'");
    const char *learned[] = {model_path, "-z", tok_path, "--pe", "learned", NULL};
    tests_expect_error(learned, "--pe learned: learned positions need a position embedding table");
    const char *t5[] = {model_path, "-z", tok_path, "--pe", "t5", NULL};
    tests_expect_error(t5, "--pe t5: t5 relative attention needs a bias table "
                           "(blk.0.attn_rel_b.weight) and this checkpoint has none");
    const char *mode[] = {model_path, "-m", "dance", NULL};
    tests_expect_error(mode, "unknown mode 'dance'");
    const char *stray[] = {model_path, "extra", NULL};
    tests_expect_error(stray, "unexpected argument 'extra'");
    const char *none[] = {"-n", "4", NULL};
    tests_expect_error(none, "no model given");
}
END_TEST

START_TEST(prompt_longer_than_context) {
    if (!models) return;
    size_t n = 600 * 6;
    char *prompt = malloc(n + 1);
    for (size_t i = 0; i < n; i += 6) memcpy(prompt + i, "hello ", 6);
    prompt[n] = '\0';
    const char *args[] = {model_path, "-z", tok_path, "-i", prompt, NULL};
    tests_expect_error(args, "but the context holds 512");
    free(prompt);
}
END_TEST

START_TEST(help_exits_zero) {
    const char *args[] = {"-h", NULL};
    TestsRun r = tests_run_engine_ok(args);
    ck_assert_ptr_nonnull(strstr(r.out, "--pe NAME"));
    tests_run_free(&r);
}
END_TEST

/* Greedy text through the binary equals llama2.c's own expected output. */
START_TEST(greedy_matches_llama2c_test) {
    if (!models) return;
    const char *args[] = {model_path, "-z", tok_path, "-t", "0", "-n", "200", "-i", "", NULL};
    TestsRun r = tests_run_engine_ok(args);
    const char *want = "Once upon a time, there was a little girl named Lily. She loved to play "
                       "outside in the park. One day, she saw a big, red ball.";
    ck_assert_msg(strncmp(r.out, want, strlen(want)) == 0, "got: %s", r.out);
    tests_run_free(&r);
}
END_TEST

/* Sampling with a seed is a pure function of the seed: threads only split
 * matmul rows, never the order of a sum. */
START_TEST(seeded_sampling_independent_of_threads) {
    if (!models) return;
    const char *one[] = {model_path, "-z", tok_path, "-t", "1.0", "-p", "0.9", "-s", "42", "-n", "120",
                         "--threads", "1", NULL};
    const char *two[] = {model_path, "-z", tok_path, "-t", "1.0", "-p", "0.9", "-s", "42", "-n", "120",
                         "--threads", "2", NULL};
    const char *other[] = {model_path, "-z", tok_path, "-t", "1.0", "-p", "0.9", "-s", "43", "-n", "120",
                           "--threads", "2", NULL};
    TestsRun a = tests_run_engine(one), b = tests_run_engine(two), c = tests_run_engine(other);
    ck_assert_int_eq(a.status, 0);
    ck_assert_str_eq(a.out, b.out);
    ck_assert_str_ne(a.out, c.out); /* control: the seed does matter */
    tests_run_free(&a);
    tests_run_free(&b);
    tests_run_free(&c);
}
END_TEST

START_TEST(bad_position_flags) {
    if (!models) return;
    const char *list[] = {model_path, "-z", tok_path, "--pe", "rope,alibi", NULL};
    tests_expect_error(list, "needs -m ppl");
    const char *scaling[] = {model_path, "-z", tok_path, "-m", "ppl", "-f", tok_path, "--pe", "rope:zoom:2", NULL};
    tests_expect_error(scaling, "unknown scaling 'zoom'");
    const char *alibi_scaled[] = {model_path, "-z", tok_path, "--pe", "alibi:linear:2", NULL};
    tests_expect_error(alibi_scaled, "only rope takes a scaling mode");
    const char *rs[] = {model_path, "-z", tok_path, "--rope-scaling", "wild", NULL};
    tests_expect_error(rs, "--rope-scaling: unknown mode 'wild'");
    const char *factor[] = {model_path, "-z", tok_path, "--rope-factor", "0.5", NULL};
    tests_expect_error(factor, "--rope-factor expects");
    const char *keep[] = {model_path, "-z", tok_path, "--ctx", "32", "--keep", "32", NULL};
    tests_expect_error(keep, "--keep 32: keeping 32 of 32 cells");
    const char *overflow[] = {model_path, "-z", tok_path, "--pe-overflow", "wrap", NULL};
    tests_expect_error(overflow, "--pe-overflow: unknown policy 'wrap'");
    const char *both[] = {model_path, "-z", tok_path, "--no-shift", "--shift-no-rerotate", NULL};
    tests_expect_error(both, "exclude each other");
    const char *no_file[] = {model_path, "-z", tok_path, "-m", "ppl", NULL};
    tests_expect_error(no_file, "-m ppl needs a text to score: -f FILE or -i TEXT");
    const char *missing[] = {model_path, "-z", tok_path, "-m", "ppl", "-f", "/nonexistent.txt", NULL};
    tests_expect_error(missing, "/nonexistent.txt");
    const char *stride[] = {model_path, "-z", tok_path, "-m", "ppl", "-f", tok_path, "--ctx", "16", "--stride", "17", NULL};
    tests_expect_error(stride, "--stride 17");
    const char *kv[] = {model_path, "-z", tok_path, "--kv-type", "q4", NULL};
    tests_expect_error(kv, "--kv-type: unknown type 'q4'");
    const char *pp[] = {model_path, "-m", "bench", "--pp", "12,x", NULL};
    tests_expect_error(pp, "--pp: expected a comma list");
    const char *reps[] = {model_path, "-m", "bench", "-r", "0", NULL};
    tests_expect_error(reps, "-r expects");
    const char *depth[] = {model_path, "-m", "bench", "--depth", "0,-5", NULL};
    tests_expect_error(depth, "--depth: expected a comma list of token counts, got '0,-5'");
    const char *twice[] = {model_path, "-m", "bench", "--threads", "2,1,2", NULL};
    tests_expect_error(twice, "--threads: 2 is in the list twice");
    const char *bad_count[] = {model_path, "-m", "bench", "--threads", "1,x", NULL};
    tests_expect_error(bad_count, "--threads expects an integer in 1..1024, got 'x'");
    const char *list_elsewhere[] = {model_path, "-z", tok_path, "--threads", "1,2", NULL};
    tests_expect_error(list_elsewhere, "--threads: a list of counts is for -m bench; give one count");
}
END_TEST

/* Generation past --ctx shifts the cache, visibly with --trace-positions;
 * --no-shift stops at the end of the context instead. */
START_TEST(shift_and_trace) {
    if (!models) return;
    const char *args[] = {model_path, "-z", tok_path, "-t", "0", "-n", "80", "--ctx", "32", "--keep", "2",
                          "--trace-positions", NULL};
    TestsRun r = tests_run_engine_ok(args);
    ck_assert_msg(strstr(r.err, "[shift] kept 2, discarded positions 2-16, moved 15 cells by -15 "
                                "(keys re-rotated)"), "%s", r.err);
    const char *step = strstr(r.err, "[pos] q=17 '"); /* then the fed token's text */
    ck_assert_msg(step && strstr(step, "' cache=0-16 (17/32 cells)\n"), "%s", r.err);
    tests_run_free(&r);

    const char *stop[] = {model_path, "-z", tok_path, "-t", "0", "-n", "80", "--ctx", "32", "--no-shift", NULL};
    r = tests_run_engine_ok(stop);
    ck_assert_ptr_nonnull(strstr(r.err, "context full (32 tokens); stopping"));
    tests_run_free(&r);

    const char *bug[] = {model_path, "-z", tok_path, "-t", "0", "-n", "40", "--ctx", "32", "--shift-no-rerotate", NULL};
    r = tests_run_engine_ok(bug);
    ck_assert_ptr_nonnull(strstr(r.err, "warning: --shift-no-rerotate"));
    tests_run_free(&r);
}
END_TEST

START_TEST(extrapolation_warns) {
    if (!models) return;
    const char *args[] = {model_path, "-z", tok_path, "-t", "0", "-n", "20", "--pos-offset", "500", NULL};
    TestsRun r = tests_run_engine_ok(args);
    ck_assert_msg(strstr(r.err, "warning: rope: positions up to 519 exceed the trained context 512; "
                                "the scheme extrapolates"), "%s", r.err);
    tests_run_free(&r);
}
END_TEST

/* -m bench runs llama-bench's default tests, skips a kind with 0, names
 * what of prefill runs on AMX, and in --json gives one object per test
 * whose numbers hang together: decode is set against the bandwidth probed
 * beside it, prefill is not. */
START_TEST(bench_reports_every_test) {
    if (!models) return;
    const char *table[] = {model_path, "-m", "bench", "-r", "1", NULL};
    TestsRun r = tests_run_engine_ok(table);
    ck_assert_msg(strstr(r.out, "| pp512 ") && strstr(r.out, "| tg128 "), "%s", r.out);
    char amx_header[64];
    snprintf(amx_header, sizeof amx_header, ", AMX %s\n", kernels_amx_name());
    ck_assert_msg(strstr(r.out, amx_header), "no '%s' in %s", amx_header, r.out);
    tests_run_free(&r);

    const char *json[] = {model_path, "-m", "bench", "--pp", "0", "--tg", "8,16", "-r", "2", "--json", NULL};
    r = tests_run_engine_ok(json);
    ck_assert_ptr_null(strstr(r.out, "\"test\": \"pp"));
    const char *tests[] = {"tg8", "tg16"};
    const char *line = r.out;
    for (int i = 0; i < 2; i++) {
        char want[32];
        snprintf(want, sizeof want, "\"test\": \"%s\"", tests[i]);
        line = strstr(line, want);
        ck_assert_msg(line, "no %s in %s", tests[i], r.out);
        while (line > r.out && line[-1] != '\n') line--;
        char obj[1024]; /* this test's object alone, so a key missing here is not found in the next */
        const char *eol = strchr(line, '\n');
        ck_assert_ptr_nonnull(eol);
        ck_assert_uint_lt((size_t)(eol - line), sizeof obj);
        memcpy(obj, line, (size_t)(eol - line));
        obj[eol - line] = '\0';
        double tok_s = tests_json_number(obj, "tok_s"), bytes = tests_json_number(obj, "bytes_per_token");
        double bw = tests_json_number(obj, "read_bw_gbs"), frac = tests_json_number(obj, "bw_fraction");
        ck_assert_double_gt(tok_s, 0.0);
        ck_assert_double_gt(bw, 0.0);
        /* stories260K's matrices, 1.04 MB, plus the cache a token reads */
        ck_assert_double_gt(bytes, 1.0e6);
        ck_assert_double_lt(bytes, 1.2e6);
        ck_assert_double_gt(frac, 0.0);
        ck_assert_msg(tests_json_number(obj, "gflops") == 0.0, "decode has no GFLOP/s: %s", obj);
        ck_assert_ptr_nonnull(strstr(obj, "\"weight_type\": \"f32\""));
        /* what ran on AMX, as this build on this machine chooses it */
        char amx[64];
        snprintf(amx, sizeof amx, "\"amx\": \"%s\"", kernels_amx_name());
        ck_assert_msg(strstr(obj, amx), "no %s in %s", amx, obj);
        ck_assert_msg(!isnan(tests_json_number(obj, "threads")), "%s", obj);
        ck_assert_msg(!isnan(tests_json_number(obj, "tok_s_sd")), "%s", obj);
        line = eol;
    }
    tests_run_free(&r);

    /* Prefill's GFLOP/s: stories260K (dim 64, 5 layers, 8 heads, 4 kv
     * heads, hidden 172, vocab 512) has 45,312 weights per layer in its
     * matrices and 32,768 in the head, and 64 tokens see 64 * 65 / 2 cells
     * of 64 query elements: 2 * 64 * 5 * 45312 + 2 * 32768 + 4 * 5 * 64 *
     * 2080 = 31,727,616 flops, which GFLOP/s over tok/s must give back. */
    const char *pp[] = {model_path, "-m", "bench", "--pp", "64", "--tg", "0", "-r", "1", "--json", NULL};
    r = tests_run_engine_ok(pp);
    double gflops = tests_json_number(r.out, "gflops"), peak = tests_json_number(r.out, "fma_peak_gflops");
    double flops = gflops * 1e9 * 64 / tests_json_number(r.out, "tok_s");
    ck_assert_msg(fabs(flops / 31727616.0 - 1.0) < 0.01, "%.0f flops in %s", flops, r.out);
    ck_assert_msg(peak > 0.0 && fabs(tests_json_number(r.out, "flops_fraction") / (gflops / peak) - 1.0) < 0.01,
                  "%s", r.out);
    tests_run_free(&r);

    const char *none[] = {model_path, "-m", "bench", "--pp", "0", "--tg", "0", NULL};
    tests_expect_error(none, "nothing to measure");
}
END_TEST

/* --depth runs each test after that many cached tokens, named as
 * llama-bench names it; a decoded token then reads the depth's keys and
 * values too: stories260K has 5 layers and 4 kv heads of 8 (128 bytes of
 * f32 per cached key or value), so 100 cells more are 2 * 5 * 128 * 100
 * bytes per token more, exactly. */
START_TEST(bench_at_depth) {
    if (!models) return;
    const char *json[] = {model_path, "-m", "bench", "--pp", "0", "--tg", "4", "--depth", "0,100", "-r", "1",
                          "--json", NULL};
    TestsRun r = tests_run_engine_ok(json);
    const char *at0 = strstr(r.out, "\"test\": \"tg4\""), *at100 = strstr(r.out, "\"test\": \"tg4 @ d100\"");
    ck_assert_msg(at0 && at100 && at0 < at100, "%s", r.out);
    const char *second = strchr(r.out, '\n') + 1; /* the objects in order: depth 0, then 100 */
    ck_assert_double_eq(tests_json_number(r.out, "n_depth"), 0.0);
    ck_assert_double_eq(tests_json_number(second, "n_depth"), 100.0);
    double extra = tests_json_number(second, "bytes_per_token") - tests_json_number(r.out, "bytes_per_token");
    ck_assert_msg(extra == 2.0 * 5 * 128 * 100, "the depth added %.0f bytes per token", extra);
    tests_run_free(&r);
}
END_TEST

/* --threads 1,2 runs every test at each count, in that order, and says
 * where the time went.  stories260K's only matrix of at least
 * PARALLEL_MIN_MACS (32,768 multiply-adds) is its head (512 x 64), and
 * attention over 8 cells stays on one thread, so a decoded token starts
 * exactly one parallel region with two threads and none with one (the
 * control: the counter tells them apart).  One thread never waits for
 * another; the shares are parts of one wall time. */
START_TEST(bench_thread_list_and_profile) {
    if (!models) return;
    const char *json[] = {model_path, "-m", "bench", "--pp", "0", "--tg", "8", "-r", "2", "--threads", "1,2",
                          "--json", NULL};
    TestsRun r = tests_run_engine_ok(json);
    const char *second = strchr(r.out, '\n');
    ck_assert_msg(second && strstr(second + 1, "\"test\": \"tg8\""), "%s", r.out);
    second++;
    ck_assert_double_eq(tests_json_number(r.out, "threads"), 1.0);
    ck_assert_double_eq(tests_json_number(second, "threads"), 2.0);
    ck_assert_double_eq(tests_json_number(r.out, "regions_per_token"), 0.0);
    ck_assert_double_eq(tests_json_number(second, "regions_per_token"), 1.0);
    /* too small for a team: the one region is the head's product */
    ck_assert_double_eq(tests_json_number(second, "barriers_per_token"), 0.0);
    ck_assert_double_eq(tests_json_number(r.out, "matmul_idle_share"), 0.0);
    const char *objs[] = {r.out, second};
    for (int i = 0; i < 2; i++) {
        double mm = tests_json_number(objs[i], "matmul_share"), att = tests_json_number(objs[i], "attention_share");
        double idle = tests_json_number(objs[i], "matmul_idle_share");
        ck_assert_msg(mm > 0.0 && att > 0.0 && mm + att <= 1.0, "%s", objs[i]);
        ck_assert_msg(idle >= 0.0 && idle < 1.0, "%s", objs[i]);
    }
    tests_run_free(&r);
    const char *table[] = {model_path, "-m", "bench", "--pp", "16", "--tg", "4", "-r", "1", "--threads", "2,1", NULL};
    r = tests_run_engine_ok(table);
    ck_assert_msg(strstr(r.out, "threads 2,1, kernels") && strstr(r.out, "| where the time went |"), "%s", r.out);
    const char *two = strstr(r.out, "| pp16           |       2 |"), *one = strstr(r.out, "| pp16           |       1 |");
    ck_assert_msg(two && one && two < one, "%s", r.out);
    tests_run_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("bad_input");
    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, bad_model_files);
    tcase_add_test(tc, bad_tokenizers);
    tcase_add_test(tc, bad_flags);
    tcase_add_test(tc, prompt_longer_than_context);
    tcase_add_test(tc, help_exits_zero);
    tcase_add_test(tc, greedy_matches_llama2c_test);
    tcase_add_test(tc, seeded_sampling_independent_of_threads);
    tcase_add_test(tc, bad_position_flags);
    tcase_add_test(tc, shift_and_trace);
    tcase_add_test(tc, extrapolation_warns);
    tcase_add_test(tc, bench_reports_every_test);
    tcase_add_test(tc, bench_at_depth);
    tcase_add_test(tc, bench_thread_list_and_profile);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
