/* Vocabularies inside GGUF files against the tokenizers they came from:
 * tools/convert.py --vocab-only on each shared tokenizer (SentencePiece BPE
 * and unigram .model, GPT-2 vocab.json + merges.txt, llama2.c tokenizer.bin),
 * loaded with tokenizer_load_gguf, must give the ids (and decoded text) that
 * tokenizer_load gives, on every line of two shared texts plus adversarial
 * lines.  Also: the posenc.tokenizer.* keys on models trained with the
 * options the shared ones lack, a model converted with a .model, the CLI,
 * negative controls (no charsmap, no llama2c encoder key) and bad inputs,
 * which must fail with one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/common.h"
#include "tokenizer/tokenizer.h"

static const char *models;

typedef struct {
    const char *rel;   /* under the models directory */
    const char *model; /* tokenizer.ggml.model it converts to */
    int nfkc;          /* has a precompiled charsmap (nmt_nfkc) */
} Source;

static const Source sources[] = {
    {"llama2-tokenizer/tokenizer.model", "llama", 0},
    {"spm/tinystories-bpe-1k.model", "llama", 1},
    {"spm/tinystories-unigram-1k.model", "t5", 1},
    {"gpt2-tokenizer", "gpt2", 0},
    {"stories260K/tok512.bin", "llama", 0},
};
#define N_SOURCES (sizeof sources / sizeof *sources)

/* NFKC-affected forms, invalid UTF-8, whitespace runs, NUL, control-piece
 * spellings: where a lost flag or charsmap would show. */
static const char adversarial[] =
    "\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xE3\x80\x80\xEF\xBD\x81\xEF\xBD\x82\xEF\xBC\x81\xEF\xBC\x91\n"
    "\xEF\xAC\x81nd \xEF\xAC\x82ow \xE3\x8E\x8F \xE3\x8D\xBB \xEF\xB7\xBA \xE2\x85\xAB \xE2\x84\x83 \xE2\x84\xA2\n"
    "\xEF\xBD\xB6\xEF\xBE\x9E\xEF\xBD\xB7\xEF\xBE\x9E halfwidth \xC2\xBD \xC2\xB2 \xE2\x91\xA0\n"
    "e\xCC\x81 caf\xC3\xA9 \xC3\x85ngstr\xC3\xB6m\n"
    "\xFF\n"
    "abc\xC3(def \xE2\x82 x \xF0\x9F\x98 y\n"
    "\xED\xA0\x80 surrogate \xC0\xAF overlong \xF4\x90\x80\x80 past max \x80\x80 bare\n"
    "mixed \xFE\xFF ok \xC3\xA9 \xE9 end \xEF\xBF\xBD\n"
    "\n"
    " \n"
    "   \n"
    "\t\t x\n"
    " leading and  double   spaces    trailing  \n"
    "\xC2\xA0nbsp\xC2\xA0 \xE3\x80\x80ideographic \xE2\x80\xA8 sep\n"
    "\r\n"
    "\xE2\x96\x81\xE2\x96\x81 literal \xE2\x96\x81\n"
    "<s> </s> <unk> <pad> <0x41> <|endoftext|> <sep> <ctl> Lily ab\n"
    "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xED\x95\x9C\xEA\xB5\xAD\n"
    "nul\0byte \0\0 x\n";

/* ---- inputs -------------------------------------------------------------- */
typedef struct {
    char *v; /* '\n'-terminated lines */
    size_t n;
} Corpus;

/* Appends to a corpus sized beforehand. */
static void put(Corpus *c, const char *s, size_t n) {
    memcpy(c->v + c->n, s, n);
    c->n += n;
}

/* Every `stride`th line of tinystories-valid-head.txt and
 * wikitext-2-raw-test.txt (negative controls need fewer than parity), then
 * the adversarial lines and a 2000-word line. */
static Corpus load_corpus(int stride) {
    static const char *names[] = {"tinystories-valid-head.txt", "wikitext-2-raw-test.txt"};
    char *texts[2];
    size_t lens[2], cap = sizeof adversarial + 5 * 2000 + 1;
    for (int i = 0; i < 2; i++) {
        texts[i] = tests_read_file(tests_text_path(models, names[i]), &lens[i]);
        cap += lens[i] + 1;
    }
    Corpus c = {malloc(cap), 0};
    ck_assert_ptr_nonnull(c.v);
    for (int i = 0; i < 2; i++) {
        long k = 0;
        for (char *line = texts[i], *end = line + lens[i]; line < end; k++) {
            char *nl = memchr(line, '\n', (size_t)(end - line));
            char *next = nl ? nl + 1 : end;
            if (k % stride == 0) put(&c, line, (size_t)(next - line));
            if (k % stride == 0 && !nl) put(&c, "\n", 1); /* a last line without one */
            line = next;
        }
        free(texts[i]);
    }
    put(&c, adversarial, sizeof adversarial - 1);
    for (int k = 0; k < 2000; k++) put(&c, "word ", 5);
    put(&c, "\n", 1);
    return c;
}

/* ---- tokenizers ---------------------------------------------------------------- */
/* tokenizer_load_gguf on `path`: 0, or -1 with the error in *err. */
static int load_gguf(Tokenizer *t, const char *path, PosencError *err) {
    GgufFile g;
    if (gguf_open(&g, path, err)) return -1;
    int rc = tokenizer_load_gguf(t, &g, err);
    gguf_close(&g);
    return rc;
}

static void load_gguf_ok(Tokenizer *t, const char *path) {
    PosencError err;
    ck_assert_msg(load_gguf(t, path, &err) == 0, "%s", err.msg);
}

static const char *vocab_only(const char *rel) {
    const char *const extra[] = {"--vocab-only", NULL};
    const char *out = tests_convert(models, rel, extra);
    ck_assert_msg(out != NULL, "convert.py --vocab-only %s failed", rel);
    return out;
}

typedef enum { SAME, IDS_DIFFER, TEXT_DIFFERS } LineResult;

/* Whether a and b encode the line alike and, if so, decode the ids alike. */
static LineResult compare_line(const Tokenizer *a, const Tokenizer *b, const char *line,
                               size_t n) {
    int *ia, *ib, na, nb;
    PosencError err;
    ck_assert_msg(tokenizer_encode_alloc(a, line, n, 0, 0, &ia, &na, &err) == 0, "%s", err.msg);
    ck_assert_msg(tokenizer_encode_alloc(b, line, n, 0, 0, &ib, &nb, &err) == 0, "%s", err.msg);
    LineResult r = na == nb && memcmp(ia, ib, (size_t)na * sizeof(int)) == 0 ? SAME : IDS_DIFFER;
    if (r == SAME) {
        size_t la, lb;
        char *da = tokenizer_decode_text(a, ia, na, &la), *db = tokenizer_decode_text(b, ib, nb, &lb);
        r = la == lb && memcmp(da, db, la) == 0 ? SAME : TEXT_DIFFERS;
        free(da);
        free(db);
    }
    free(ia);
    free(ib);
    return r;
}

/* Lines of the corpus on which the two tokenizers differ, by kind
 * (bad[IDS_DIFFER], bad[TEXT_DIFFERS]); prints the counts and the first
 * such line. */
static void count_mismatches(const char *what, const Tokenizer *direct, const Tokenizer *gguf,
                             const Corpus *c, long bad[3]) {
    long lines = 0;
    bad[IDS_DIFFER] = bad[TEXT_DIFFERS] = 0;
    for (size_t i = 0; i < c->n;) {
        const char *nl = memchr(c->v + i, '\n', c->n - i);
        size_t n = (size_t)(nl - (c->v + i));
        lines++;
        LineResult r = compare_line(direct, gguf, c->v + i, n);
        if (r != SAME && bad[IDS_DIFFER] + bad[TEXT_DIFFERS] == 0)
            printf("%s: first mismatch (%s) at line %ld: %s\n", what,
                   r == IDS_DIFFER ? "ids" : "decoded text", lines, tests_show_bytes(c->v + i, n));
        if (r != SAME) bad[r]++;
        i += n + 1;
    }
    printf("%s: %ld lines compared, %ld with other ids, %ld with other decoded text\n", what,
           lines, bad[IDS_DIFFER], bad[TEXT_DIFFERS]);
}

/* Direct tokenizer at `tok_path` vs the GGUF at `gguf_path`: no mismatch. */
static void expect_parity(const char *what, const char *tok_path, const char *gguf_path,
                          const Corpus *c) {
    Tokenizer direct, gguf;
    tests_load_tokenizer(&direct, tok_path, 0);
    load_gguf_ok(&gguf, gguf_path);
    ck_assert_int_eq(direct.vocab_size, gguf.vocab_size);
    ck_assert_int_eq(direct.bos_id, gguf.bos_id);
    ck_assert_int_eq(direct.eos_id, gguf.eos_id);
    long bad[3];
    count_mismatches(what, &direct, &gguf, c, bad);
    ck_assert_msg(bad[IDS_DIFFER] + bad[TEXT_DIFFERS] == 0, "%s differs", what);
    tokenizer_free(&direct);
    tokenizer_free(&gguf);
}

/* ---- editing and converting with Python ------------------------------------------- */
/* A copy of a tensorless GGUF through tools/gguf.py with `edit` applied:
 * Python statements over kv (key -> (type, value); arrays (elem, list)). */
static const char *edited_gguf(const char *src, const char *edit) {
    char script[2048];
    int n = snprintf(script, sizeof script,
                     "import sys\nsys.path.insert(0, 'tools')\nimport gguf\n"
                     "kv = dict(gguf.Reader(sys.argv[1]).kv)\n"
                     "def arr(k): return kv[k][1][1]\n"
                     "def set_arr(k, v): kv[k] = (gguf.ARRAY, (kv[k][1][0], v))\n"
                     "%s\n"
                     "w = gguf.Writer()\n"
                     "for k, (t, v) in kv.items():\n"
                     "    w.add(k, t, v[1], v[0]) if t == gguf.ARRAY else w.add(k, t, v)\n"
                     "w.write(sys.argv[2])\n",
                     edit);
    ck_assert_int_lt(n, (int)sizeof script);
    const char *py = tests_write_temp(script, (size_t)n, ".py");
    const char *dst = tests_write_temp("", 0, ".gguf");
    const char *args[] = {py, src, dst, NULL};
    TestsRun r = tests_run_python(args);
    ck_assert_msg(r.status == 0, "edit failed: %s\n%s%s", edit, r.out, r.err);
    tests_run_free(&r);
    return dst;
}

/* ---- tests --------------------------------------------------------------------- */
#define REQUIRE_MODELS()                                            \
    do {                                                            \
        if (!models) return;                                        \
    } while (0)

static void expect_vocab_only_keys(const char *path, const Source *s) {
    GgufFile g;
    PosencError err;
    ck_assert_msg(gguf_open(&g, path, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(g.n_tensors, 0);
    for (size_t i = 0; i < g.n_kv; i++) {
        const char *k = g.kv[i].key;
        ck_assert_msg(!strncmp(k, "general.", 8) || !strncmp(k, "tokenizer.ggml.", 15) ||
                          !strncmp(k, "posenc.tokenizer.", 17),
                      "%s: unexpected key %s in a vocabulary-only file", s->rel, k);
    }
    const char *model;
    ck_assert_int_eq(gguf_get_str(&g, "tokenizer.ggml.model", &model, &err), 0);
    ck_assert_str_eq(model, s->model);
    const GgufKV *cm = gguf_find_kv(&g, "tokenizer.ggml.precompiled_charsmap");
    ck_assert_int_eq(cm != NULL, s->nfkc);
    if (cm) ck_assert(cm->type == GGUF_TYPE_ARRAY && cm->v.arr.type == GGUF_TYPE_UINT8);
    gguf_close(&g);
}

START_TEST(vocab_only_parity) {
    REQUIRE_MODELS();
    Corpus c = load_corpus(1);
    for (size_t i = 0; i < N_SOURCES; i++) {
        const char *gguf = vocab_only(sources[i].rel);
        expect_vocab_only_keys(gguf, &sources[i]);
        expect_parity(sources[i].rel, tests_model_path(models, sources[i].rel), gguf, &c);
    }
    free(c.v);
}
END_TEST

/* Direct vs GGUF after `edit` must differ in `kind` on some line: the
 * edited key is read. */
static void expect_key_matters(const char *tok_path, const char *gguf, const char *edit,
                               LineResult kind, const Corpus *c) {
    Tokenizer direct, edited;
    tests_load_tokenizer(&direct, tok_path, 0);
    load_gguf_ok(&edited, edited_gguf(gguf, edit));
    char what[512];
    snprintf(what, sizeof what, "%s, %s (negative control)", tok_path, edit);
    long bad[3];
    count_mismatches(what, &direct, &edited, c, bad);
    ck_assert_msg(bad[kind] > 0, "%s: the edited file still gives the same %s", what,
                  kind == IDS_DIFFER ? "ids" : "decoded text");
    tokenizer_free(&direct);
    tokenizer_free(&edited);
}

/* Without the charsmap the nmt_nfkc models stop normalizing (full-width
 * forms, ligatures); without posenc.tokenizer.encoder a tokenizer.bin is
 * encoded as SentencePiece, which differs on invalid UTF-8. */
START_TEST(negative_controls) {
    REQUIRE_MODELS();
    Corpus c = load_corpus(8);
    static const char *const controls[][2] = {
        {"spm/tinystories-bpe-1k.model", "del kv['tokenizer.ggml.precompiled_charsmap']"},
        {"spm/tinystories-unigram-1k.model", "del kv['tokenizer.ggml.precompiled_charsmap']"},
        {"stories260K/tok512.bin", "del kv['posenc.tokenizer.encoder']"},
        {"llama2-tokenizer/tokenizer.model",
         "kv['posenc.tokenizer.escape_whitespaces'] = (gguf.BOOL, False)"},
    };
    for (size_t i = 0; i < sizeof controls / sizeof *controls; i++)
        expect_key_matters(tests_model_path(models, controls[i][0]), vocab_only(controls[i][0]),
                           controls[i][1], IDS_DIFFER, &c);
    free(c.v);
}
END_TEST

/* The SentencePiece flags and posenc.tokenizer.* keys survive the trip on
 * models trained with the options the shared ones lack (each key shown to
 * matter by removing it); a llama.cpp-style file without posenc.tokenizer.*
 * keys gets the library's defaults (byte fallback from the byte pieces). */
START_TEST(settings_round_trip) {
    REQUIRE_MODELS();
    Corpus c = load_corpus(1), sample = load_corpus(8);
    const char *dir = tests_temp_dir();
    static const struct {
        const char *name, *options, *edit;
        LineResult changes; /* what the edit must change */
    } variants[] = {
        {"bpe-suffix-userdef-keepspaces",
         "--model_type=bpe --vocab_size=400 --character_coverage=1.0 --pad_id=3 "
         "--user_defined_symbols='<sep>,Lily,ab' --control_symbols='<ctl>' "
         "--normalization_rule_name=nfkc_cf --treat_whitespace_as_suffix=true "
         "--remove_extra_whitespaces=false",
         "del kv['posenc.tokenizer.treat_whitespace_as_suffix']", IDS_DIFFER},
        {"unigram-identity-noprefix-unk",
         "--model_type=unigram --vocab_size=300 --normalization_rule_name=identity "
         "--add_dummy_prefix=false --character_coverage=0.98 --unk_surface='<?>'",
         "del kv['posenc.tokenizer.unknown_surface']", TEXT_DIFFERS},
    };
    const char *const extra[] = {"--vocab-only", NULL};
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        const char *model = tests_train_spm(models, dir, variants[v].name, variants[v].options);
        const char *gguf = tests_convert("/tmp", model + strlen("/tmp/"), extra);
        ck_assert_msg(gguf != NULL, "convert.py --vocab-only %s failed", model);
        expect_parity(variants[v].name, model, gguf, &c);
        expect_key_matters(model, gguf, variants[v].edit, variants[v].changes, &sample);
    }
    const char *llama2 = "llama2-tokenizer/tokenizer.model";
    expect_parity("llama2 tokenizer.model without posenc.tokenizer.*",
                  tests_model_path(models, llama2),
                  edited_gguf(vocab_only(llama2),
                              "for k in [k for k in kv if k.startswith('posenc.')]: del kv[k]"),
                  &c);
    free(c.v);
    free(sample.v);
}
END_TEST

/* convert.py HF_LLAMA_DIR with --tokenizer X.model, or tokenizer.model in
 * the directory: the model's embedded vocabulary is the .model's. */
START_TEST(model_with_spm_tokenizer) {
    REQUIRE_MODELS();
    Corpus c = load_corpus(1);
    const char *dir = tests_temp_dir();
    /* stories260K's embedding has 512 rows */
    const char *model = tests_train_spm(models, dir, "tokenizer",
                                        "--model_type=bpe --vocab_size=512 --byte_fallback=true");
    const char *const with_flag[] = {"--tokenizer", model, NULL};
    const char *a = tests_convert(models, "stories260K-hf", with_flag);
    ck_assert_ptr_nonnull(a);
    char src[PATH_MAX], link[600];
    static const char *files[] = {"config.json", "model.safetensors"};
    for (size_t i = 0; i < 2; i++) {
        ck_assert_ptr_nonnull(realpath(tests_model_path(models, "stories260K-hf"), src));
        snprintf(src + strlen(src), sizeof src - strlen(src), "/%s", files[i]);
        snprintf(link, sizeof link, "%s/%s", dir, files[i]);
        ck_assert_int_eq(symlink(src, link), 0);
    }
    const char *b = tests_convert("/tmp", dir + strlen("/tmp/"), NULL);
    ck_assert_ptr_nonnull(b);
    const char *ggufs[] = {a, b};
    for (int i = 0; i < 2; i++) {
        Model m;
        PosencError err;
        ck_assert_msg(model_load(&m, ggufs[i], &err) == 0, "%s", err.msg);
        model_free(&m);
        expect_parity(i ? "stories260K-hf with tokenizer.model" : "stories260K-hf --tokenizer",
                      model, ggufs[i], &c);
    }
    free(c.v);
}
END_TEST

/* ./run GGUF -m tokenize prints what ./run -m tokenize -z TOKENIZER prints. */
static void expect_same_output(const char *const *a, const char *const *b) {
    TestsRun ra = tests_run_engine(a), rb = tests_run_engine(b);
    ck_assert_msg(ra.status == 0 && rb.status == 0, "status %d/%d: %s%s", ra.status, rb.status,
                  ra.err, rb.err);
    ck_assert_str_eq(ra.out, rb.out);
    tests_run_free(&ra);
    tests_run_free(&rb);
}

START_TEST(cli_tokenize) {
    REQUIRE_MODELS();
    const char *file = tests_write_temp(adversarial, sizeof adversarial - 1, ".txt");
    const char *text = "Once upon a time, \xEF\xBC\xA1\xEF\xBC\xA2 \xEF\xAC\x81sh  swam.";
    for (size_t i = 0; i < N_SOURCES; i++) {
        const char *gguf = vocab_only(sources[i].rel);
        const char *tok = tests_model_path(models, sources[i].rel);
        const char *fa[] = {gguf, "-m", "tokenize", "-f", file, NULL};
        const char *fb[] = {"-m", "tokenize", "-z", tok, "-f", file, NULL};
        const char *fz[] = {"-m", "tokenize", "-z", gguf, "-f", file, NULL};
        expect_same_output(fa, fb);
        expect_same_output(fz, fb);
        const char *ia[] = {gguf, "-m", "tokenize", "-i", text, "--pieces", NULL};
        const char *ib[] = {"-m", "tokenize", "-z", tok, "-i", text, "--pieces", NULL};
        expect_same_output(ia, ib);
    }
    /* a vocabulary GGUF as a model's -z: the same story as its tokenizer.bin */
    const char *model = tests_model_path(models, "stories260K/stories260K.bin");
    const char *ga[] = {model, "-z", vocab_only("stories260K/tok512.bin"), "-t", "0", "-n", "60", NULL};
    const char *gb[] = {model, "-z", tests_model_path(models, "stories260K/tok512.bin"), "-t", "0", "-n", "60", NULL};
    expect_same_output(ga, gb);
    const char *wrong[] = {model, "-z", vocab_only("spm/tinystories-bpe-1k.model"), NULL};
    TestsRun r = tests_run_engine(wrong);
    ck_assert_msg(r.status != 0 && strstr(r.err, "1000 pieces but the model's vocabulary is 512"), "%s", r.err);
    tests_run_free(&r);
}
END_TEST

/* Broken vocabularies: one line naming the file and what is wrong, from
 * the library and from ./run. */
START_TEST(bad_vocab_files) {
    REQUIRE_MODELS();
    static const char *const cases[][2] = {
        {"set_arr('tokenizer.ggml.precompiled_charsmap', "
         "arr('tokenizer.ggml.precompiled_charsmap')[:64])",
         "precompiled_charsmap"},
        {"kv['tokenizer.ggml.precompiled_charsmap'] = "
         "(gguf.ARRAY, (gguf.INT32, arr('tokenizer.ggml.precompiled_charsmap')[:100]))",
         "is an array of int32, not of bytes"},
        {"t = arr('tokenizer.ggml.token_type'); t[5] = 99; set_arr('tokenizer.ggml.token_type', t)",
         "tokenizer.ggml.token_type[5] = 99 is not a token type"},
        {"t = arr('tokenizer.ggml.token_type'); t[7] = 0; set_arr('tokenizer.ggml.token_type', t)",
         "tokenizer.ggml.token_type[7] = 0 is not a token type"},
        {"set_arr('tokenizer.ggml.scores', arr('tokenizer.ggml.scores')[:-1])",
         "tokenizer.ggml.scores has 999 entries for 1000 tokens"},
        {"set_arr('tokenizer.ggml.token_type', arr('tokenizer.ggml.token_type') + [1])",
         "tokenizer.ggml.token_type has 1001 entries for 1000 tokens"},
        {"kv['posenc.tokenizer.byte_fallback'] = (gguf.BOOL, False)",
         "although byte_fallback is off"},
        {"kv['posenc.tokenizer.encoder'] = (gguf.STRING, b'sentencepiece')",
         "posenc.tokenizer.encoder 'sentencepiece' is not supported"},
        {"kv['tokenizer.ggml.bos_token_id'] = (gguf.UINT32, 1000)",
         "bos_token_id = 1000 is outside the vocabulary"},
    };
    const char *good = vocab_only("spm/tinystories-bpe-1k.model");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *bad = edited_gguf(good, cases[i][0]);
        Tokenizer t;
        PosencError err;
        ck_assert_msg(load_gguf(&t, bad, &err) != 0, "%s: loaded", cases[i][0]);
        tests_expect_file_error(err.msg, bad, cases[i][1]);
        const char *args[] = {bad, "-m", "tokenize", "-i", "x", NULL};
        const char *as_z[] = {"-m", "tokenize", "-z", bad, "-i", "x", NULL};
        for (int z = 0; z < 2; z++) {
            TestsRun r = tests_run_engine(z ? as_z : args);
            ck_assert_int_ne(r.status, 0);
            ck_assert_msg(strstr(r.err, cases[i][1]) && strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
                          "./run%s: want one line with '%s', got: %s", z ? " -z" : "", cases[i][1], r.err);
            tests_run_free(&r);
        }
    }
}
END_TEST

/* tokenizer.ggml.pre: llama.cpp's names pick the pattern (and, for the
 * Llama 3 names and Tekken only, ignore_merges); a name posenc has no
 * pattern for is refused naming the file and why, never tokenized with
 * another, and so is a name llama.cpp does not give. */
START_TEST(pre_names) {
    REQUIRE_MODELS();
    static const struct {
        const char *name;
        PretokKind kind; /* PRETOK_COUNT: refused, with `why` */
        int ignore_merges;
        const char *why;
    } cases[] = {
        {"gpt-2", PRETOK_GPT2, 0, NULL},          {"olmo", PRETOK_GPT2, 0, NULL},
        {"exaone4", PRETOK_GPT2, 0, NULL},        {"granite-docling", PRETOK_GPT2, 0, NULL},
        {"llama-bpe", PRETOK_LLAMA3, 1, NULL},    {"lfm2", PRETOK_LLAMA3, 1, NULL},
        {"dbrx", PRETOK_LLAMA3, 0, NULL},         {"chatglm-bpe", PRETOK_LLAMA3, 0, NULL},
        {"glm4", PRETOK_LLAMA3, 0, NULL},         {"stablelm2", PRETOK_QWEN2, 0, NULL},
        {"grok-2", PRETOK_QWEN2, 0, NULL},        {"qwen35", PRETOK_QWEN35, 0, NULL},
        {"hunyuan-dense", PRETOK_DEEPSEEK_V3, 0, NULL},
        {"command-r", PRETOK_STARCODER, 0, NULL}, {"smollm", PRETOK_STARCODER, 0, NULL},
        {"mellum2", PRETOK_STARCODER, 0, NULL},   {"poro-chat", PRETOK_BLOOM, 0, NULL},
        {"viking", PRETOK_VIKING, 0, NULL},       {"tekken", PRETOK_TEKKEN, 1, NULL},
        {"gpt-4o", PRETOK_GPT4O, 0, NULL},        {"llama4", PRETOK_GPT4O, 0, NULL},
        {"deepseek-llm", PRETOK_COUNT, 0, "its own rewrite of the family's tokenizer.json steps"},
        {"falcon", PRETOK_COUNT, 0, "its own rewrite of the family's tokenizer.json steps"},
        {"kimi-k2", PRETOK_COUNT, 0, "code of its own"},
        {"gemma4", PRETOK_COUNT, 0, "over characters, not GPT-2's bytes"},
        {"jais-2", PRETOK_COUNT, 0, "not one posenc implements"},
        {"qwen3", PRETOK_COUNT, 0, "not a name llama.cpp gives"},
    };
    const char *good = vocab_only("gpt2-tokenizer");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char edit[128];
        snprintf(edit, sizeof edit, "kv['tokenizer.ggml.pre'] = (gguf.STRING, b'%s')", cases[i].name);
        const char *path = edited_gguf(good, edit);
        Tokenizer t;
        PosencError err;
        if (cases[i].kind == PRETOK_COUNT) {
            ck_assert_msg(load_gguf(&t, path, &err) != 0, "%s: loaded", cases[i].name);
            char want[128];
            snprintf(want, sizeof want, "tokenizer.ggml.pre '%s' is not a pre-tokenizer posenc implements",
                     cases[i].name);
            tests_expect_file_error(err.msg, path, want);
            ck_assert_msg(strstr(err.msg, cases[i].why), "%s: no '%s' in: %s", cases[i].name,
                          cases[i].why, err.msg);
            continue;
        }
        load_gguf_ok(&t, path);
        ck_assert_msg(t.pretok == cases[i].kind && t.ignore_merges == cases[i].ignore_merges,
                      "%s: pattern %d, ignore_merges %d", cases[i].name, (int)t.pretok, t.ignore_merges);
        tokenizer_free(&t);
    }
}
END_TEST

/* What the C side refuses, convert.py refuses: one error line, status 2. */
START_TEST(convert_refuses) {
    REQUIRE_MODELS();
    const char *dir = tests_temp_dir();
    const char *out = tests_write_temp("", 0, ".gguf");
    const char *word = tests_train_spm(models, dir, "word", "--model_type=word --vocab_size=300");
    const char *word_args[] = {"--vocab-only", word, out, NULL};
    tests_expect_convert_error(word_args, "SentencePiece model type WORD is not supported");
    const char *chr = tests_train_spm(models, dir, "char", "--model_type=char --vocab_size=60");
    const char *char_args[] = {"--vocab-only", chr, out, NULL};
    tests_expect_convert_error(char_args, "SentencePiece model type CHAR is not supported");

    size_t n;
    char *bytes = tests_read_file(tests_model_path(models, "spm/tinystories-bpe-1k.model"), &n);
    const char *cut = tests_write_temp(bytes, 1000, ".model");
    free(bytes);
    const char *cut_args[] = {"--vocab-only", cut, out, NULL};
    tests_expect_convert_error(cut_args, "corrupt SentencePiece model: field runs past its end");

    const char *spm = tests_model_path(models, "spm/tinystories-bpe-1k.model");
    const char *too_big[] = {tests_model_path(models, "stories260K-hf"), out, "--tokenizer", spm,
                             NULL};
    tests_expect_convert_error(too_big, "has 1000 tokens, the model needs 512");
    const char *unused[] = {"--vocab-only", spm, out, "--tokenizer", spm, NULL};
    tests_expect_convert_error(unused, "--tokenizer is not used with --vocab-only");
}
END_TEST

static Suite *tokenizer_gguf_suite(void) {
    Suite *s = suite_create("tokenizer_gguf");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, vocab_only_parity);
    tcase_add_test(tc, negative_controls);
    tcase_add_test(tc, settings_round_trip);
    tcase_add_test(tc, model_with_spm_tokenizer);
    tcase_add_test(tc, cli_tokenize);
    tcase_add_test(tc, bad_vocab_files);
    tcase_add_test(tc, pre_names);
    tcase_add_test(tc, convert_refuses);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    models = tests_models_dir("GGUF vocabularies against their tokenizers");
    return tests_run_suite(tokenizer_gguf_suite());
}
