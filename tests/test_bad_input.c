/* Bad input through the real binary: the repros of a fuzzing audit (issue
 * 18).  Each ends in exactly one "error: ..." line naming the file or flag
 * and exit status 1 (make test runs this suite against the ASan/UBSan build
 * too, where a sanitizer report would break the one-line rule), and, where
 * nothing could have been printed before the problem shows, no stdout.
 * Every refusal has a control: the same command on good input succeeds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gguf.h"
#include "tests/common.h"

static const char *models;
static char model_path[1024], tok_path[1024], text_path[64];

static void setup(void) {
    models = tests_models_dir("bad-input tests on stories260K");
    if (!models) return;
    snprintf(model_path, sizeof model_path, "%s",
             tests_model_path(models, "stories260K/stories260K.bin"));
    snprintf(tok_path, sizeof tok_path, "%s", tests_model_path(models, "stories260K/tok512.bin"));
    static const char story[] = "Once upon a time, there was a little girl named Lily. She "
                                "loved to play outside in the park with her friends.\n";
    snprintf(text_path, sizeof text_path, "%s", tests_write_temp(story, strlen(story), ".txt"));
}

/* A refusal as tests_expect_error asserts it, that also names `name` (the
 * file or flag to blame) and, with quiet_stdout, printed nothing. */
static void expect_error_naming(const char *const *args, const char *needle, const char *name,
                                int quiet_stdout) {
    TestsRun r = tests_expect_error(args, needle);
    ck_assert_msg(strstr(r.err, name), "stderr does not name '%s': %s", name, r.err);
    if (quiet_stdout) ck_assert_msg(r.out[0] == '\0', "stdout before the error: %s", r.out);
    tests_run_free(&r);
}

static void expect_success(const char *const *args) {
    TestsRun r = tests_run_engine(args);
    ck_assert_msg(r.status == 0, "exit status %d for %s; stderr: %s", r.status, args[0], r.err);
    tests_run_free(&r);
}

/* ---- 1: non-finite logits ------------------------------------------------------ */

/* stories260K.bin with every weight NaN (the header kept). */
static const char *nan_bin(void) {
    size_t n;
    char *b = tests_read_file(model_path, &n);
    ck_assert_ptr_nonnull(b);
    const float nan = NAN;
    for (size_t at = 28; at + 4 <= n; at += 4) memcpy(b + at, &nan, 4);
    const char *p = tests_write_temp(b, n, ".bin");
    free(b);
    return p;
}

/* A bf16 conversion of stories260K whose bf16 tensors are all 0xFFFF (NaN). */
static const char *nan_bf16_gguf(const char **clean) {
    const char *extra[] = {"--tokenizer", tok_path, "--dtype", "bf16", NULL};
    *clean = tests_convert(models, "stories260K/stories260K.bin", extra);
    ck_assert_ptr_nonnull(*clean);
    GgufFile g;
    PosencError err;
    ck_assert_msg(gguf_open(&g, *clean, &err) == 0, "%s", err.msg);
    uint8_t *b = malloc(g.map.size);
    ck_assert_ptr_nonnull(b);
    memcpy(b, g.map.data, g.map.size);
    int patched = 0;
    for (size_t i = 0; i < g.n_tensors; i++)
        if (g.tensors[i].type == TENSOR_BF16) {
            memset(b + ((const uint8_t *)g.tensors[i].data - g.map.data), 0xFF, g.tensors[i].nbytes);
            patched++;
        }
    ck_assert_int_gt(patched, 0);
    const char *p = tests_write_temp(b, g.map.size, ".gguf");
    free(b);
    gguf_close(&g);
    return p;
}

START_TEST(non_finite_logits_are_an_error) {
    if (!models) return;
    const char *nan = nan_bin();
    const char *gen[] = {nan, "-z", tok_path, "-i", "", "-n", "8", NULL};
    expect_error_naming(gen, "non-finite logits", nan, 1);
    /* ppl prints its header first, but never a nan */
    const char *modes[][2] = {{"--stride", "4"}, {"--stream", NULL}};
    for (int m = 0; m < 2; m++) {
        const char *ppl[] = {nan, "-z", tok_path, "-m", "ppl", "-f", text_path, "--ctx", "16",
                             modes[m][0], modes[m][1], NULL};
        TestsRun r = tests_expect_error(ppl, "non-finite logits");
        ck_assert_msg(!strstr(r.out, "nan"), "%s", r.out);
        tests_run_free(&r);
        ppl[0] = model_path; /* control: the real weights score */
        expect_success(ppl);
    }
    const char *clean;
    const char *bf16 = nan_bf16_gguf(&clean);
    const char *gguf[] = {bf16, "-i", "", "-n", "8", NULL};
    expect_error_naming(gguf, "non-finite logits", bf16, 1);
    const char *control[] = {clean, "-i", "", "-n", "8", NULL};
    expect_success(control);
}
END_TEST

/* logit / 1.2e-38 overflowed to inf, the softmax gave NaN and the text was
 * a stream of <unk>: such a temperature now samples greedily. */
START_TEST(tiny_temperature_samples_greedily) {
    if (!models) return;
    const char *tiny[] = {model_path, "-z", tok_path, "-t", "1.2e-38", "-s", "7", "-n", "60",
                          "-i", "Once upon", NULL};
    const char *greedy[] = {model_path, "-z", tok_path, "-t", "0", "-n", "60", "-i", "Once upon",
                            NULL};
    const char *warm[] = {model_path, "-z", tok_path, "-t", "1", "-s", "7", "-n", "60", "-i",
                          "Once upon", NULL};
    TestsRun a = tests_run_engine(tiny), b = tests_run_engine(greedy), c = tests_run_engine(warm);
    ck_assert_msg(a.status == 0, "%s", a.err);
    ck_assert_str_eq(a.out, b.out);
    ck_assert_str_ne(c.out, b.out); /* control: a real temperature samples otherwise */
    tests_run_free(&a);
    tests_run_free(&b);
    tests_run_free(&c);
}
END_TEST

/* ---- 2: strings from files are escaped ------------------------------------------ */

START_TEST(escape_makes_one_printable_line) {
    const struct { const char *in, *out; } cases[] = {
        {"llama", "llama"},
        {"a\nb", "a\\x0ab"},
        {"\x1b[2J", "\\x1b[2J"},                          /* a terminal escape */
        {"it's \"q\" \\", "it\\'s \\\"q\\\" \\\\"},
        {"w\xc3\xb6rld \xe2\x96\x81", "w\xc3\xb6rld \xe2\x96\x81"}, /* UTF-8 text stays */
        {"\xc2\x9b", "\\xc2\\x9b"},                    /* C1 CSI, as UTF-8 */
        {"\x9b\x7f", "\\x9b\\x7f"},                    /* lone byte, DEL */
        {"\xe2\x82", "\\xe2\\x82"},                    /* cut sequence */
        {"\xc0\xaf", "\\xc0\\xaf"},                    /* overlong '/' */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_str_eq(posenc_escape(cases[i].in).s, cases[i].out);
    /* 64 control bytes (a GGUF tensor name's maximum) fit whole... */
    char name[65], big[1000];
    memset(name, 1, 64);
    name[64] = '\0';
    ck_assert_uint_eq(strlen(posenc_escape(name).s), 256);
    /* ...a longer string is cut and says so */
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    const char *cut = posenc_escape(big).s;
    ck_assert_uint_lt(strlen(cut), sizeof(EscapedString));
    ck_assert_str_eq(cut + strlen(cut) - 3, "...");
}
END_TEST

/* A copy of the GGUF `path` with the value of string key `key` replaced
 * by `value` (same length). */
static const char *patched_gguf(const char *path, const char *key, const char *value) {
    size_t n;
    char *b = tests_read_file(path, &n);
    ck_assert_ptr_nonnull(b);
    size_t at = tests_gguf_string_end(b, n, key) + 4; /* past the value type */
    uint64_t len;
    memcpy(&len, b + at, 8);
    ck_assert_uint_eq(len, strlen(value));
    memcpy(b + at + 8, value, len);
    const char *p = tests_write_temp(b, n, ".gguf");
    free(b);
    return p;
}

/* stderr holds text only: no C0 control but its final newline, no DEL,
 * no lone C1 byte. */
static void expect_no_control_bytes(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        ck_assert_msg((*p >= 0x20 && *p != 0x7f && *p != 0x9b) || (*p == '\n' && !p[1]),
                      "raw byte 0x%02x in: %s", *p, s);
}

static void expect_escaped(const char *const *args, const char *needle) {
    TestsRun r = tests_expect_error(args, needle);
    expect_no_control_bytes(r.err);
    tests_run_free(&r);
}

START_TEST(file_strings_are_escaped) {
    if (!models) return;
    const char *rope = tests_convert(models, "zoo/rope", NULL);
    const char *learned = tests_convert(models, "zoo/learned", NULL);
    const char *extra[] = {"--tokenizer", tok_path, NULL};
    const char *stories = tests_convert(models, "stories260K/stories260K.bin", extra);
    ck_assert(rope && learned && stories);
    const char *inspect[] = {rope, "-m", "inspect", NULL};
    expect_success(inspect); /* control: the unpatched file loads */

    const char *p = patched_gguf(rope, "general.architecture", "\x1b[2J");
    const char *arch[] = {p, "-m", "inspect", NULL};
    expect_escaped(arch, "unsupported architecture '\\x1b[2J'");
    p = patched_gguf(rope, "posenc.positional", "r\no\x9b");
    const char *positional[] = {p, "-m", "inspect", NULL};
    expect_escaped(positional, "unknown posenc.positional 'r\\x0ao\\x9b'");
    p = patched_gguf(rope, "posenc.rope.pairing", "ne'\n");
    const char *pairing[] = {p, "-m", "inspect", NULL};
    expect_escaped(pairing, "unknown posenc.rope.pairing 'ne\\'\\x0a'");
    p = patched_gguf(rope, "tokenizer.ggml.model", "gp\r\n");
    const char *model[] = {"-m", "tokenize", "-z", p, "-i", "a", NULL};
    expect_escaped(model, "tokenizer.ggml.model 'gp\\x0d\\x0a'");
    p = patched_gguf(stories, "posenc.tokenizer.encoder", "ll\x1b[0m\n");
    const char *encoder[] = {p, "-m", "tokenize", "-i", "a", NULL};
    expect_escaped(encoder, "posenc.tokenizer.encoder 'll\\x1b[0m\\x0a'");

    /* a tensor name: control characters are refused when parsing, other
     * bytes that are not text are escaped */
    size_t n;
    char *b = tests_read_file(learned, &n);
    ck_assert_ptr_nonnull(b);
    b[tests_gguf_string_end(b, n, "position_embd.weight") - 8] = (char)0x9b;
    p = tests_write_temp(b, n, ".gguf");
    free(b);
    const char *tensor[] = {p, "-m", "inspect", NULL};
    expect_escaped(tensor, "unexpected tensor 'position_emb\\x9b.weight'");

    /* inspect prints general.name escaped, in text and in JSON */
    p = patched_gguf(rope, "general.name", "\x1b]0;");
    const char *text[] = {p, "-m", "inspect", NULL}, *json[] = {p, "-m", "inspect", "--json", NULL};
    TestsRun r = tests_run_engine(text);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "\\x1b]0;") && !strchr(r.out, 0x1b), "%s", r.out);
    tests_run_free(&r);
    r = tests_run_engine(json);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "\"name\":\"\\u001b]0;\"") && !strchr(r.out, 0x1b), "%s", r.out);
    tests_run_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("bad_input");
    TCase *tc = tcase_create("bad_input");
    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, non_finite_logits_are_an_error);
    tcase_add_test(tc, tiny_temperature_samples_greedily);
    tcase_add_test(tc, escape_makes_one_printable_line);
    tcase_add_test(tc, file_strings_are_escaped);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
