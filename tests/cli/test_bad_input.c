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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "modes/generate.h"
#include "model/kernels.h"
#include "base/gguf.h"
#include "modes/perplexity.h"
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

/* A refusal as tests_expect_failure asserts it, that also names `name` (the
 * file or flag to blame) and, with quiet_stdout, printed nothing. */
static void expect_error_naming(const char *const *args, const char *needle, const char *name,
                                int quiet_stdout) {
    TestsRun r = tests_expect_failure(args, needle);
    ck_assert_msg(strstr(r.err, name), "stderr does not name '%s': %s", name, r.err);
    if (quiet_stdout) ck_assert_msg(r.out[0] == '\0', "stdout before the error: %s", r.out);
    tests_run_free(&r);
}

/* ---- 1: non-finite logits ------------------------------------------------------ */

/* stories260K.bin with every weight NaN (the header kept). */
static const char *nan_bin(void) {
    size_t n;
    char *b = tests_read_file(model_path, &n);
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
        TestsRun r = tests_expect_failure(ppl, "non-finite logits");
        ck_assert_msg(!strstr(r.out, "nan"), "%s", r.out);
        tests_run_free(&r);
        ppl[0] = model_path; /* control: the real weights score */
        tests_expect_success(ppl);
    }
    const char *clean;
    const char *bf16 = nan_bf16_gguf(&clean);
    const char *gguf[] = {bf16, "-i", "", "-n", "8", NULL};
    expect_error_naming(gguf, "non-finite logits", bf16, 1);
    const char *control[] = {clean, "-i", "", "-n", "8", NULL};
    tests_expect_success(control);
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
    TestsRun r = tests_expect_failure(args, needle);
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
    tests_expect_success(inspect); /* control: the unpatched file loads */

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
    b[tests_gguf_string_end(b, n, "position_embd.weight") - 8] = (char)0x9b;
    p = tests_write_temp(b, n, ".gguf");
    free(b);
    const char *tensor[] = {p, "-m", "inspect", NULL};
    expect_escaped(tensor, "unexpected tensor 'position_emb\\x9b.weight'");

    /* inspect prints general.name escaped, in text and in JSON */
    p = patched_gguf(rope, "general.name", "\x1b]0;");
    const char *text[] = {p, "-m", "inspect", NULL}, *json[] = {p, "-m", "inspect", "--json", NULL};
    TestsRun r = tests_run_engine_ok(text);
    ck_assert_msg(strstr(r.out, "\\x1b]0;") && !strchr(r.out, 0x1b), "%s", r.out);
    tests_run_free(&r);
    r = tests_run_engine_ok(json);
    ck_assert_msg(strstr(r.out, "\"name\":\"\\u001b]0;\"") && !strchr(r.out, 0x1b), "%s", r.out);
    tests_run_free(&r);
}
END_TEST

/* ---- 3: encoding errors name the text's flag and the vocabulary's file ------------ */

/* A llama2.c tokenizer.bin holding `pieces` (NULL-terminated), scores 0. */
static const char *tokenizer_bin(const char *const *pieces) {
    char buf[4096];
    size_t n = 0;
    int32_t max_len = 16;
    memcpy(buf, &max_len, 4);
    n = 4;
    for (int i = 0; pieces[i]; i++) {
        float score = 0.0f;
        int32_t len = (int32_t)strlen(pieces[i]);
        memcpy(buf + n, &score, 4);
        memcpy(buf + n + 4, &len, 4);
        memcpy(buf + n + 8, pieces[i], (size_t)len);
        n += 8 + (size_t)len;
    }
    return tests_write_temp(buf, n, ".bin");
}

START_TEST(encoding_errors_name_flag_and_file) {
    if (!models) return;
    const char *mm = tests_convert(models, "makemore-names", NULL);
    const char *zoo = tests_convert(models, "zoo/rope", NULL);
    ck_assert(mm && zoo);
    /* makemore's 27 characters have no byte for 'é' (0xC3 0xA9) */
    const char *own[] = {mm, "-m", "tokenize", "-i", "\xc3\xa9", NULL};
    expect_error_naming(own, "-i: ", mm, 1);
    const char *via_z[] = {"-m", "tokenize", "-z", mm, "-i", "\xc3\xa9", NULL};
    expect_error_naming(via_z, "byte 0xC3 has no token in the vocabulary", mm, 1);
    const char *gen[] = {mm, "-i", "\xc3\xa9", NULL};
    expect_error_naming(gen, "-i: ", mm, 1);
    const char *fine[] = {mm, "-m", "tokenize", "-i", "emma", NULL};
    tests_expect_success(fine); /* control */
    /* from -f: the flag, the text file, its line and the vocabulary */
    const char lines[] = "emma\nren\xc3\xa9" "e\n";
    const char *text = tests_write_temp(lines, strlen(lines), ".txt");
    const char *tok_f[] = {mm, "-m", "tokenize", "-f", text, NULL};
    TestsRun r = tests_expect_failure(tok_f, "line 2: ");
    ck_assert_msg(strstr(r.err, "-f ") && strstr(r.err, text) && strstr(r.err, mm), "%s", r.err);
    tests_run_free(&r);
    const char *ppl[] = {mm, "-m", "ppl", "-f", text, NULL};
    r = tests_expect_failure(ppl, "-f ");
    ck_assert_msg(strstr(r.err, text) && strstr(r.err, mm), "%s", r.err);
    tests_run_free(&r);
    /* an empty prompt on a vocabulary without BOS (the zoo's) */
    const char *empty[] = {zoo, "-i", "", NULL};
    expect_error_naming(empty, "-i: ", "no BOS", 1);
    const char *some[] = {zoo, "-i", "ROMEO:", "-n", "8", NULL};
    tests_expect_success(some); /* control */

    /* llama2.c vocabularies: no space piece, no byte fallback */
    const char *no_space_pieces[] = {"<unk>", "<s>", "</s>", "h", "i", NULL};
    const char *no_space = tokenizer_bin(no_space_pieces);
    const char *a[] = {"-m", "tokenize", "-z", no_space, "-i", "hi", NULL};
    expect_error_naming(a, "-i: ", "no piece for the space character", 1);
    const char *no_bytes_pieces[] = {"<unk>", "<s>", "</s>", " ", "h", "i", NULL};
    const char *no_bytes = tokenizer_bin(no_bytes_pieces);
    const char *b[] = {"-m", "tokenize", "-z", no_bytes, "-i", "h\xc3\xa9", NULL};
    expect_error_naming(b, "no byte fallback for byte 0xC3", no_bytes, 1);
    const char *c[] = {"-m", "tokenize", "-z", no_bytes, "-i", "hi", NULL};
    tests_expect_success(c); /* control */

    /* -f names a directory */
    const char *dir = tests_temp_dir();
    const char *d[] = {"-m", "tokenize", "-z", tok_path, "-f", dir, NULL};
    expect_error_naming(d, "is a directory", "-f", 1);
    const char *e[] = {model_path, "-z", tok_path, "-m", "ppl", "-f", dir, NULL};
    expect_error_naming(e, "is a directory", "-f", 1);
}
END_TEST

/* Out of memory is one line naming what it was for.  An address-space
 * limit makes the KV cache of --ctx 4194304 (5.4 GB for stories260K)
 * impossible; at --ctx 512 the same limit is ample. */
START_TEST(out_of_memory_is_one_line) {
#ifdef __SANITIZE_ADDRESS__
    fprintf(stderr, "SKIP: out_of_memory_is_one_line (ASan needs an unlimited address space)\n");
#else
    if (!models) return;
    const char *huge[] = {model_path, "-z", tok_path, "-n", "4", "--ctx", "4194304", NULL};
    TestsRun r = tests_run_engine_limited(huge, (size_t)1 << 30);
    ck_assert_msg(r.status == 1, "status %d: %s", r.status, r.err);
    ck_assert_msg(strncmp(r.err, "error: out of memory allocating ", 32) == 0 &&
                  strstr(r.err, " bytes for the KV cache") && strchr(r.err, '\n')[1] == '\0',
                  "%s", r.err);
    tests_run_free(&r);
    const char *small[] = {model_path, "-z", tok_path, "-n", "4", "--ctx", "512", NULL};
    r = tests_run_engine_limited(small, (size_t)1 << 30);
    ck_assert_msg(r.status == 0, "control failed under the limit: %s", r.err);
    tests_run_free(&r);
#endif
}
END_TEST

/* ---- 4: --keep is checked before any work ------------------------------------------ */

START_TEST(keep_checked_before_any_work) {
    if (!models) return;
    /* it used to print text and then fail at the first shift */
    const char *gen[] = {model_path, "-z", tok_path, "-t", "0", "-n", "40", "--ctx", "16",
                         "--keep", "15", NULL};
    expect_error_naming(gen, "--keep 15: ", "--no-shift", 1);
    gen[10] = "14"; /* control: one cell less shifts fine */
    tests_expect_success(gen);
    const char *stop[] = {model_path, "-z", tok_path, "-t", "0", "-n", "40", "--ctx", "16",
                          "--keep", "15", "--no-shift", NULL};
    tests_expect_success(stop); /* no shift, nothing to check */
    /* -m ppl --stream did not check at all ("discard -46") */
    const char *ppl[] = {model_path, "-z", tok_path, "-m", "ppl", "--stream", "-f", text_path,
                         "--ctx", "8", "--keep", "100", NULL};
    expect_error_naming(ppl, "--keep 100: ", "keeping 100 of 8 cells", 1);
    ppl[11] = "6";
    tests_expect_success(ppl);
}
END_TEST

/* The engine refuses too, before it writes or scores anything, for
 * callers other than run.c. */
START_TEST(keep_checked_by_the_engine) {
    if (!models) return;
    Model m;
    Tokenizer tok;
    tests_load_model(&m, model_path);
    tests_load_tokenizer(&tok, tok_path, 512);
    Context ctx;
    tests_build_context(&ctx, &m, &m.pe, 16);
    PosencError err;
    Sampler sampler;
    sampler_build(&sampler, 512, 0.0f, 0.9f, 0, 1);
    for (int keep = 14; keep <= 15; keep++) {
        FILE *out = tmpfile();
        GenerateOptions g = {.prompt = "Once", .steps = 40, .keep = keep, .shift = CONTEXT_SHIFT_ON};
        GenerateStats stats;
        int rc = generate_text(&ctx, &tok, &sampler, &g, out, &stats, &err);
        long written = ftell(out);
        fclose(out);
        kv_cache_clear(&ctx.cache);
        if (keep == 14) { /* control */
            ck_assert_msg(rc == 0, "%s", err.msg);
            continue;
        }
        ck_assert_int_eq(rc, -1);
        ck_assert_msg(strstr(err.msg, "keeping 15 of 16 cells"), "%s", err.msg);
        ck_assert_int_eq(written, 0);
    }
    int ids[40];
    for (int i = 0; i < 40; i++) ids[i] = 1 + i * 7;
    PplOptions o = {.window = 16, .stream = 1, .keep = 15, .shift = CONTEXT_SHIFT_ON};
    PplResult res;
    ck_assert_int_eq(ppl_evaluate(&ctx, ids, 40, &o, &res, NULL, NULL, &err), -1);
    ck_assert_msg(strstr(err.msg, "keeping 15 of 16 cells"), "%s", err.msg);
    o.keep = 14; /* control */
    ck_assert_msg(ppl_evaluate(&ctx, ids, 40, &o, &res, NULL, NULL, &err) == 0, "%s", err.msg);
    ppl_result_free(&res);
    sampler_free(&sampler);
    context_free(&ctx);
    tokenizer_free(&tok);
    model_free(&m);
}
END_TEST

/* ---- 5: buffers sized by what is used ------------------------------------------------ */

/* A random llama model with Llama 2's 32000-token vocabulary (dim 8,
 * hidden 16, one layer, one head; tools/random_model.py) whose header
 * claims a context of 2^22 tokens. */
static const char *huge_context_gguf(void) {
    const char *dir = tests_temp_dir();
    const char *args[] = {"tools/random_model.py", "custom", dir, "--dim", "8", "--hidden", "16",
                          "--layers", "1", "--heads", "1", "--kv-heads", "1", "--vocab", "32000",
                          "--seq", "64", "--formats", "f32", "--tokenizer",
                          tests_model_path(models, "llama2-tokenizer/tokenizer.bin"), NULL};
    TestsRun r = tests_run_python_ok(args);
    tests_run_free(&r);
    char path[64];
    size_t n;
    snprintf(path, sizeof path, "%s/custom-8x1-f32.gguf", dir);
    char *b = tests_read_file(path, &n);
    size_t at = tests_gguf_string_end(b, n, "llama.context_length");
    uint32_t type, ctx = 1u << 22;
    memcpy(&type, b + at, 4);
    ck_assert_uint_eq(type, GGUF_TYPE_UINT32);
    memcpy(b + at + 4, &ctx, 4);
    const char *p = tests_write_temp(b, n, ".gguf");
    free(b);
    return p;
}

/* Generation used to allocate context_length x vocab floats of logits
 * (512 GB here) and as many rows of activations; now one row of logits and
 * chunks of 512.  What remains of 2^22 cells is the KV cache (288 MB);
 * attention takes its cells 256 at a time (34 KB of scores at 2
 * threads, whatever the context).  Under a 1 GiB address
 * space it generates; the limit binds (control): 256 MiB is too little. */
START_TEST(huge_context_generates_in_bounded_memory) {
    if (!models) return;
    const char *big = huge_context_gguf();
    const char *gen[] = {big, "-t", "1", "-s", "3", "-n", "12", "-i", "Once upon", "--threads",
                         "2", NULL};
#ifdef __SANITIZE_ADDRESS__
    TestsRun r = tests_run_engine(gen); /* ASan refuses a 512 GB malloc outright */
#else
    TestsRun r = tests_run_engine_limited(gen, (size_t)1 << 30);
#endif
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_msg(strlen(r.out) > strlen("Once upon\n"), "nothing generated: %s", r.out);
    tests_run_free(&r);
#ifndef __SANITIZE_ADDRESS__
    r = tests_run_engine_limited(gen, (size_t)256 << 20);
    ck_assert_msg(r.status == 1 && strstr(r.err, "error: out of memory allocating "), "%s", r.err);
    tests_run_free(&r);
#endif
    /* ppl's default window is the header's 2^22 tokens: a short text is
     * refused before its logits are allocated */
    const char *ppl[] = {big, "-m", "ppl", "-f", text_path, "--threads", "2", NULL};
    expect_error_naming(ppl, "too few for one window of 4194304", "-f ", 1);
}
END_TEST

/* -m inspect states the memory of a run at --ctx and --kv-type; the
 * numbers are worked out here by hand from the shapes. */
START_TEST(inspect_states_peak_memory) {
    if (!models) return;
    const char *big = huge_context_gguf();
    size_t file_bytes;
    free(tests_read_file(big, &file_bytes));
    const double n_ctx = 4194304, dim = 8, hidden = 16, kv_dim = 8, vocab = 32000, threads = 2;
    /* where the kernel path packs F32 matrices (kernels.h), the file and
     * their copy: rows to a multiple of 16, so q, k, v, o, gate and up 16 x 8
     * floats, down 16 x 16 and the output 32000 x 8, in whole 2 MB pages */
    Tensor probe = {TENSOR_F32, NULL, dim, dim, NULL};
    double packed = 6 * 16 * dim * 4 + 16 * hidden * 4 + vocab * dim * 4, page = 2 << 20;
    double weights = file_bytes + (kernels_packed_bytes(&probe) ? ceil(packed / page) * page : 0);
    for (int f16 = 0; f16 < 2; f16++) {
        const char *args[] = {big, "-m", "inspect", "--json", "--ctx", "4194304", "--threads", "2",
                              "--kv-type", f16 ? "f16" : "f32", NULL};
        TestsRun r = tests_run_engine_ok(args);
        const char *mem = strstr(r.out, "\"memory\"");
        ck_assert_msg(mem, "%s", r.out);
        double kv = 2 * n_ctx * kv_dim * (f16 ? 2 : 4) + 2 * n_ctx * 4; /* + positions, tokens */
        double chunk = 512, panels = 65536 * 4 * threads                /* matmul; each thread's token of */
                                     + threads * 192                    /* 16 columns as Q8 and Q8_K: quants */
                                                                        /* on cache lines, 64 + 64, then */
                                                                        /* scales and sums, 3 lines in all */
                                     + 512 * 16 + 512 * 1 * 4           /* int8 prefill: 512 tokens' Q8 and */
                                     + threads * 32 * 16                /* sums of 16 (no whole block of 32: */
                                                                        /* no scales), a 32-row unit each */
                                     + 512 * 16 * 2;                    /* 512 tokens as BF16 (BF16 prefill) */
        double gen = chunk * (4 * dim + 2 * hidden + 2 * kv_dim) * 4   /* activations, new keys, values */
                     + threads * 16 * (256 + 8) * 4                     /* attention: 16 queries' scores of */
                                                                        /* 256 cells and values (head 8) */
                     + vocab * 4 + panels                               /* one row of logits */
                     + threads * (4 * 16 + 2 * 16) * 4;                 /* a decoded token's team: each */
                                                                        /* thread's x, normed row and two */
                                                                        /* branches (8, padded to 16) and */
                                                                        /* two hidden rows (16) */
        double ppl = gen - chunk * (4 * dim + 2 * hidden + 2 * kv_dim) * 4 - vocab * 4 +
                     n_ctx * (4 * dim + 2 * hidden + 2 * kv_dim) * 4 + n_ctx * vocab * 4;
        ck_assert_double_eq(tests_json_number(mem, "weights_bytes"), weights);
        ck_assert_double_eq(tests_json_number(mem, "kv_cache_bytes"), kv);
        const char *g = strstr(mem, "\"generate\""), *p = strstr(mem, "\"ppl\"");
        ck_assert(g && p);
        ck_assert_double_eq(tests_json_number(g, "scratch_bytes"), gen);
        ck_assert_double_eq(tests_json_number(g, "peak_bytes"), weights + kv + gen);
        ck_assert_double_eq(tests_json_number(p, "scratch_bytes"), ppl);
        tests_run_free(&r);
    }
    /* the text form has the same numbers */
    const char *text[] = {big, "-m", "inspect", "--ctx", "1024", "--threads", "2", NULL};
    TestsRun r = tests_run_engine_ok(text);
    ck_assert_msg(strstr(r.out, "\nmemory\n") &&
                  strstr(r.out, "kv_cache_bytes   73728\n"), "%s", r.out); /* 2*1024*8*4 + 2*1024*4 */
    tests_run_free(&r);
    /* Self-Extend's second store of keys (1024 x 8 floats) and its scratch:
     * 512 tokens' grouped queries and keys (8 + 8 floats), each thread's
     * 16 x 256 grouped scores */
    const char *plain[] = {big, "-m", "inspect", "--json", "--ctx", "1024", "--threads", "2", NULL};
    const char *grouped[] = {big, "-m", "inspect", "--json", "--ctx", "1024", "--threads", "2",
                             "--self-extend", "2,8", NULL};
    TestsRun a = tests_run_engine_ok(plain), b = tests_run_engine_ok(grouped);
    const char *ma = strstr(a.out, "\"memory\""), *mb = strstr(b.out, "\"memory\"");
    ck_assert(ma && mb);
    ck_assert_double_eq(tests_json_number(mb, "kv_cache_bytes") - tests_json_number(ma, "kv_cache_bytes"),
                        1024 * 8 * 4);
    ck_assert_double_eq(tests_json_number(strstr(mb, "\"generate\""), "scratch_bytes") -
                            tests_json_number(strstr(ma, "\"generate\""), "scratch_bytes"),
                        512 * (8 + 8) * 4 + 2 * 16 * 256 * 4);
    tests_run_free(&a);
    tests_run_free(&b);
}
END_TEST

/* ---- 6: FIFOs, a stream too short to score -------------------------------------------- */

/* A FIFO nobody writes to, as a model, as -z (by extension, sniffed by
 * content, inside a GPT-2 directory) and as the model whose vocabulary
 * -m tokenize reads: opening it used to block forever.  This test case
 * has a short timeout, so blocking fails it. */
START_TEST(fifos_are_refused_without_blocking) {
    if (!models) return;
    const char *dir = tests_temp_dir();
    char bin[64], bare[64], vocab[64], merges[64];
    snprintf(bin, sizeof bin, "%s/model.bin", dir);
    snprintf(bare, sizeof bare, "%s/tokenizer", dir);
    snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
    snprintf(merges, sizeof merges, "%s/merges.txt", dir);
    ck_assert(mkfifo(bin, 0600) == 0 && mkfifo(bare, 0600) == 0 && mkfifo(vocab, 0600) == 0);
    tests_write_file(merges, "", 0);
    const char *model[] = {bin, "-z", tok_path, "-n", "4", NULL};
    expect_error_naming(model, "not a regular file", bin, 1);
    const char *z_bin[] = {model_path, "-z", bin, "-n", "4", NULL};
    expect_error_naming(z_bin, "-z: ", bin, 1);
    const char *z_bare[] = {model_path, "-z", bare, "-n", "4", NULL};
    expect_error_naming(z_bare, "not a regular file", bare, 1);
    const char *z_dir[] = {"-m", "tokenize", "-z", dir, "-i", "a", NULL};
    expect_error_naming(z_dir, "not a regular file", vocab, 1);
    const char *own[] = {bare, "-m", "tokenize", "-i", "a", NULL};
    expect_error_naming(own, "not a regular file", bare, 1);

    /* control: -f reads a pipe, e.g. /dev/stdin, once a writer comes */
    pid_t writer = fork();
    ck_assert(writer >= 0);
    if (writer == 0) {
        FILE *w = fopen(bare, "w"); /* waits for the engine to open the other end */
        fputs("hello\n", w);
        fclose(w);
        _exit(0);
    }
    const char *pipe_text[] = {"-m", "tokenize", "-z", tok_path, "-f", bare, NULL};
    TestsRun r = tests_run_engine(pipe_text);
    waitpid(writer, NULL, 0);
    ck_assert_msg(r.status == 0 && strlen(r.out) > 1, "%d %s %s", r.status, r.out, r.err);
    tests_run_free(&r);
}
END_TEST

/* -m ppl --stream on a text of one token printed nan with exit 0 (window
 * mode already refused): now both refuse, and so does the engine. */
START_TEST(stream_needs_two_tokens) {
    if (!models) return;
    const char *one = tests_write_temp("a", 1, ".txt");
    const char *stream[] = {model_path, "-z", tok_path, "-m", "ppl", "--stream", "-f", one, NULL};
    expect_error_naming(stream, "too few to score", "-f ", 1);
    stream[7] = text_path; /* control */
    tests_expect_success(stream);

    Model m;
    tests_load_model(&m, model_path);
    Context ctx;
    tests_build_context(&ctx, &m, &m.pe, 16);
    PosencError err;
    const int ids[2] = {1, 403};
    PplOptions o = {.window = 16, .stream = 1, .shift = CONTEXT_SHIFT_ON};
    PplResult res;
    ck_assert_int_eq(ppl_evaluate(&ctx, ids, 1, &o, &res, NULL, NULL, &err), -1);
    ck_assert_msg(strstr(err.msg, "too few to score"), "%s", err.msg);
    ck_assert_msg(ppl_evaluate(&ctx, ids, 2, &o, &res, NULL, NULL, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(res.n_scored, 1); /* control: two tokens score one prediction */
    ppl_result_free(&res);
    context_free(&ctx);
    model_free(&m);
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
    tcase_add_test(tc, encoding_errors_name_flag_and_file);
    tcase_add_test(tc, out_of_memory_is_one_line);
    tcase_add_test(tc, keep_checked_before_any_work);
    tcase_add_test(tc, keep_checked_by_the_engine);
    tcase_add_test(tc, huge_context_generates_in_bounded_memory);
    tcase_add_test(tc, inspect_states_peak_memory);
    tcase_add_test(tc, stream_needs_two_tokens);
    suite_add_tcase(s, tc);

    tc = tcase_create("fifo"); /* a blocked open fails by this timeout */
    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, fifos_are_refused_without_blocking);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
