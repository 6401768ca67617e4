/* What fuzzing found, kept: every input of tests/fixtures/fuzz/KIND/ is
 * replayed through the fuzz target of that kind (fuzz/fuzz_KIND.c, the same
 * function libFuzzer calls), so a fixed crash that comes back fails here, in
 * the plain and the ASan/UBSan pass.  And the resource limits fuzzing
 * cannot see in a 10-second input: a 10 MB line, and merges built so that a
 * quadratic encoder (llama2.c's own, or GPT-2's encoder.py) would take hours,
 * encode in time that grows linearly with the text (n log n at worst). */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz/fuzz.h"
#include "tests/common.h"

#define FIXTURES "tests/fixtures/fuzz"

typedef struct {
    const char *kind;
    int (*target)(const uint8_t *, size_t);
} FuzzKind;

static const FuzzKind kinds[] = {
    {"gguf_model", fuzz_gguf_model}, {"gguf_vocab", fuzz_gguf_vocab},
    {"llama2c", fuzz_llama2c},       {"spm", fuzz_spm},
    {"gpt2", fuzz_gpt2},             {"text", fuzz_text},
    {"sampler", fuzz_sampler},       {"hf_json", fuzz_hf_json},
    {"jinja", fuzz_jinja},
};

/* Replays every file of FIXTURES/kind through target; returns how many. */
static int replay_kind(const FuzzKind *k) {
    char dir[256];
    snprintf(dir, sizeof dir, FIXTURES "/%s", k->kind);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        char *data = tests_read_file(path, &len);
        ck_assert_msg(data, "cannot read %s", path);
        fprintf(stderr, "replay %s\n", path);
        k->target((const uint8_t *)data, len);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

START_TEST(fixtures_replay_cleanly) {
    const char *models = tests_models_dir("fuzz regressions of kind text");
    PosencError err;
    if (models) ck_assert_msg(fuzz_text_init(models, &err) == 0, "%s", err.msg);
    int total = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (models || strcmp(kinds[i].kind, "text") != 0) total += replay_kind(&kinds[i]);
    /* control: the directory is found (a wrong path would replay nothing) */
    ck_assert_msg(total > 0, "no fixtures replayed from " FIXTURES);
}
END_TEST

/* Control: a broken property aborts the target, so a regression that comes
 * back as a wrong answer, not a crash, fails the replay too. */
START_TEST(broken_property_aborts) {
    freopen("/dev/null", "w", stderr); /* the forked test's report, expected */
    PosencError two_lines = {"first line\nsecond line"};
    fuzz_check_error(&two_lines);
}
END_TEST

/* ---- time grows linearly with the text ------------------------------------------ */

/* The long line: 10 MB; under ASan, which runs the encoders ~5x slower
 * and only adds memory checks here, 1 MB. */
#ifdef __SANITIZE_ADDRESS__
#define LINE_BYTES ((size_t)1 << 20)
#else
#define LINE_BYTES ((size_t)10 << 20)
#endif

/* CPU seconds of one encode: the machine is shared, and a busy neighbour
 * stretches wall time, not the encoder's own CPU time. */
static double encode_seconds(const Tokenizer *t, const char *text, size_t len) {
    int *ids, n;
    PosencError err;
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    ck_assert_msg(tokenizer_encode_alloc(t, text, len, 0, 0, &ids, &n, &err) == 0, "%s", err.msg);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    free(ids);
    return (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
}

/* Whether time grew linearly from a tenth of the input to all of it.
 * Linear time gives 10x, n log n about 12x, quadratic 100x.  A working set
 * that outgrows the cache between the two adds more: GPT-2's one pre-token
 * of 10 M spaces (~30 bytes of scratch a byte) grew x28-x32, though from
 * 4 MB to 32 MB its time doubles with the size.  40x + 50 ms leaves room
 * for that and still fails a quadratic encoder whose tenth takes more than
 * ~1 ms (the control below, x80). */
static int grew_linearly(double tenth, double all) { return all < 40 * tenth + 0.05; }

/* The plain build's 10 MB must also take < 10 s of CPU. */
static void check_linear(const Tokenizer *t, const char *what, const char *text) {
    double tenth = encode_seconds(t, text, LINE_BYTES / 10);
    double all = encode_seconds(t, text, LINE_BYTES);
    fprintf(stderr, "%-40s %8zu bytes %.3f s, %8zu bytes %.3f s (x%.1f)\n", what,
            LINE_BYTES / 10, tenth, LINE_BYTES, all, all / (tenth > 0 ? tenth : 1e-9));
    ck_assert_msg(grew_linearly(tenth, all), "%s: %zu bytes took %.2f s, a tenth %.3f s: not "
                  "linear", what, LINE_BYTES, all, tenth);
    ck_assert_msg(all < 10.0, "%s: a line of %zu bytes took %.2f s", what, LINE_BYTES, all);
}

/* A LINE_BYTES line of one kind: `a` repeated (one word, the longest merge
 * work), spaces (whitespace runs), or words, digits, punctuation and
 * non-ASCII bytes (UTF-8 and not) in a fixed pseudo-random mix. */
static char *line_of(char kind) {
    char *s = malloc_or_exit(LINE_BYTES, "a test line");
    static const char *const words[] = {"Once", " upon", " a", " time", ",", " caf\xC3\xA9",
                                        " 12345", "\xFF", "  ", "\xE2\x96\x81", "'s", "\t"};
    uint32_t x = 1;
    for (size_t i = 0; i < LINE_BYTES;) {
        if (kind != 'm') {
            s[i++] = kind;
            continue;
        }
        x = x * 1664525u + 1013904223u;
        const char *w = words[(x >> 8) % (sizeof words / sizeof *words)];
        for (; *w && i < LINE_BYTES; w++) s[i++] = *w;
    }
    return s;
}

START_TEST(long_lines_encode_in_linear_time) {
    const char *models = tests_models_dir("long lines");
    if (!models) return;
    static const char *const files[] = {"stories260K/tok512.bin", "llama2-tokenizer/tokenizer.model",
                                        "spm/tinystories-bpe-1k.model",
                                        "spm/tinystories-unigram-1k.model", "gpt2-tokenizer"};
    char *lines[3] = {line_of('a'), line_of(' '), line_of('m')};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        Tokenizer t;
        PosencError err;
        ck_assert_msg(tokenizer_load(&t, tests_model_path(models, files[f]), 0, &err) == 0, "%s",
                      err.msg);
        for (int l = 0; l < 3; l++) {
            char what[128];
            snprintf(what, sizeof what, "%s, %s", files[f], (const char *[]){"a*", "spaces", "mixed"}[l]);
            check_linear(&t, what, lines[l]);
        }
        tokenizer_free(&t);
    }
    for (int l = 0; l < 3; l++) free(lines[l]);
}
END_TEST

/* Merges that grow one token a byte at a time: "b" then "ba", "baa", ...
 * up to 4096 bytes, each preferred to the last, then "aa" for the rest.  On
 * "baaa...a" each of those merges is its own step; an encoder that scans
 * the whole word per step (llama2.c's encode, GPT-2's encoder.py) does 4095
 * scans of the whole line.  kind selects the merge rule: scores (llama2.c,
 * SentencePiece BPE) or GPT-2's ranked merges. */
#define CHAIN 4096
static void build_chain(Tokenizer *t, TokenizerKind kind) {
    int n = 0;
    static char buf[CHAIN + 1];
    char **pieces = malloc_or_exit((CHAIN + 8) * sizeof(char *), "pieces");
    float *scores = malloc_or_exit((CHAIN + 8) * sizeof(float), "scores");
    uint8_t *types = malloc_or_exit(CHAIN + 8, "types");
    char **merges = malloc_or_exit((CHAIN + 8) * sizeof(char *), "merges");
    int n_merges = 0;
#define PIECE(text, score, type)                                                             \
    (pieces[n] = strdup(text), scores[n] = (score), types[n] = (type), n++)
    PIECE("<unk>", 0, TOKEN_UNKNOWN);
    PIECE(" ", -1e6f, TOKEN_NORMAL);
    PIECE("a", -1e6f, TOKEN_NORMAL);
    PIECE("b", -1e6f, TOKEN_NORMAL);
    PIECE("aa", -1e5f, TOKEN_NORMAL);
    memset(buf, 'a', CHAIN);
    buf[0] = 'b';
    for (int len = 2; len <= CHAIN; len++) {
        buf[len] = '\0';
        PIECE(buf, (float)len, TOKEN_NORMAL); /* longer: merged first */
        char *m = malloc_or_exit(len + 2, "a merge");
        snprintf(m, (size_t)len + 2, "%.*s a", len - 1, buf);
        merges[n_merges++] = m;
        buf[len] = 'a';
    }
    merges[n_merges++] = strdup("a a");
#undef PIECE
    TokenizerSpec spec = {.kind = kind, .n_pieces = n, .pieces = (const char *const *)pieces,
                          .scores = scores, .types = kind == TOKENIZER_SPM_BPE ? types : NULL,
                          .n_merges = kind == TOKENIZER_GPT2 ? n_merges : 0,
                          .merges = (const char *const *)merges, .bos_id = -1, .eos_id = -1};
    PosencError err;
    ck_assert_msg(tokenizer_build(t, &spec, &err) == 0, "%s", err.msg);
    for (int i = 0; i < n; i++) free(pieces[i]);
    for (int i = 0; i < n_merges; i++) free(merges[i]);
    free(pieces);
    free(scores);
    free(types);
    free(merges);
}

/* CPU seconds of llama2.c's own merge loop (quadratic) on text[0..len),
 * one id per byte to start with. */
static double rescan_merge_seconds(const Tokenizer *t, const char *text, size_t len) {
    int *ids = malloc_or_exit(len * sizeof(int), "ids");
    for (size_t i = 0; i < len; i++) ids[i] = tokenizer_lookup(t, text + i, 1);
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    tests_llama2c_rescan_merges(t, ids, (int)len);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    free(ids);
    return (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
}

START_TEST(chain_merges_encode_in_linear_time) {
    char *text = line_of('a');
    text[0] = 'b';
    static const TokenizerKind chain_kinds[] = {TOKENIZER_LLAMA2C, TOKENIZER_SPM_BPE,
                                                TOKENIZER_GPT2};
    static const char *const names[] = {"chain merges, llama2.c", "chain merges, SentencePiece BPE",
                                        "chain merges, GPT-2"};
    for (int k = 0; k < 3; k++) {
        Tokenizer t;
        build_chain(&t, chain_kinds[k]);
        /* control: the chain really builds: "b" + 4095 a's is one token */
        int *ids, n;
        PosencError err;
        ck_assert_msg(tokenizer_encode_alloc(&t, text, CHAIN, 0, 0, &ids, &n, &err) == 0, "%s",
                      err.msg);
        int want = chain_kinds[k] == TOKENIZER_LLAMA2C ? 2 : 1; /* llama2.c: " " first */
        ck_assert_msg(n == want && t.piece_lens[ids[n - 1]] == CHAIN,
                      "%s: %d ids, the last %d bytes", names[k], n, t.piece_lens[ids[n - 1]]);
        free(ids);
        check_linear(&t, names[k], text);
        if (chain_kinds[k] == TOKENIZER_LLAMA2C) {
            /* control: llama2.c's quadratic loop on the same text fails
             * the criterion, already at 800 and 8000 bytes */
            double tenth = rescan_merge_seconds(&t, text, 800);
            double all = rescan_merge_seconds(&t, text, 8000);
            fprintf(stderr, "%-40s %8d bytes %.3f s, %8d bytes %.3f s (x%.1f)\n",
                    "control: llama2.c's quadratic merges", 800, tenth, 8000, all,
                    all / (tenth > 0 ? tenth : 1e-9));
            ck_assert_msg(!grew_linearly(tenth, all), "a quadratic encoder passed as linear");
        }
        tokenizer_free(&t);
    }
    free(text);
}
END_TEST

/* A charsmap is a trie: a lookup walks it along the text while labels
 * match.  The charsmap of this file leads from the root back to the root on
 * 'a' without a leaf, so before the fix every position of a run of a's
 * walked to the end of the text: 10 KB took 0.3 s, 100 KB 22 s, 10 MB would
 * take days.  A walk that can meet a unit twice is refused at load; the
 * same units with the loop cut (the 'a' unit ending in a leaf) load and
 * encode in linear time. */
START_TEST(cyclic_charsmap_is_refused) {
    const char *path = FIXTURES "/spm/cyclic-charsmap.model";
    Tokenizer t;
    PosencError err;
    ck_assert_msg(tokenizer_load(&t, path, 0, &err) != 0, "a charsmap with a cycle loaded");
    ck_assert_msg(strstr(err.msg, "precompiled_charsmap") && strstr(err.msg, path), "%s", err.msg);

    size_t len;
    char *model = tests_read_file(path, &len);
    ck_assert_ptr_nonnull(model);
    /* unit 99 = (97 << 10) | 'a': offset 97 from unit 99 is base 2, the
     * root's; (1 << 10) | (1 << 8) | 'a' is offset 1 to a leaf (unit 98) */
    static const unsigned char loop[4] = {0x61, 0x84, 0x01, 0x00}, leaf[4] = {0x61, 0x05, 0, 0};
    char *at = memmem(model, len, loop, sizeof loop);
    ck_assert_ptr_nonnull(at);
    memcpy(at, leaf, sizeof leaf);
    ck_assert_msg(tokenizer_load(&t, tests_write_temp(model, len, ".model"), 0, &err) == 0, "%s",
                  err.msg);
    char *text = line_of('a');
    check_linear(&t, "charsmap without the loop", text);
    free(text);
    tokenizer_free(&t);
    free(model);
}
END_TEST

/* Found by the seed corpus (a GGUF cut to 3 bytes is read as llama2.c):
 * the llama2.c loader's size errors read the file's size after freeing the
 * model, so every truncated checkpoint was said to have 0 bytes. */
START_TEST(llama2c_size_errors_state_the_size) {
    Model m;
    PosencError err;
    ck_assert(model_load(&m, tests_write_temp("GGU", 3, ".bin"), &err) != 0);
    ck_assert_msg(strstr(err.msg, ": truncated: 3 bytes is shorter than the 28-byte"), "%s",
                  err.msg);
    int32_t header[250] = {64, 172, 5, 8, 4, 512, 512}; /* stories260K's, in 1000 bytes */
    ck_assert(model_load(&m, tests_write_temp(header, sizeof header, ".bin"), &err) != 0);
    ck_assert_msg(strstr(err.msg, "header describes 1056540 bytes of weights but the file has "
                                  "1000 (truncated"), "%s", err.msg);
}
END_TEST

/* Found by fuzz_gguf_vocab: -m inspect on a vocab-only GGUF whose
 * general.architecture is not a string (here a key one byte off) crashed
 * on the missing name in text mode (JSON printed null). */
START_TEST(inspect_vocab_without_architecture) {
    const char *const args[] = {FIXTURES "/gguf_vocab/no-architecture.gguf", "-m", "inspect", NULL};
    TestsRun r = tests_run_engine(args);
    ck_assert_msg(r.status == 0 && strstr(r.out, "architecture       none\n"), "status %d: %s%s",
                  r.status, r.out, r.err);
    tests_run_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("fuzz_regressions");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, fixtures_replay_cleanly);
    tcase_add_test(tc, llama2c_size_errors_state_the_size);
    tcase_add_test(tc, inspect_vocab_without_architecture);
    if (!getenv("CK_FORK") || strcmp(getenv("CK_FORK"), "no") != 0)
        tcase_add_test_raise_signal(tc, broken_property_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    tc = tcase_create("limits");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, long_lines_encode_in_linear_time);
    tcase_add_test(tc, chain_merges_encode_in_linear_time);
    tcase_add_test(tc, cyclic_charsmap_is_refused);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
