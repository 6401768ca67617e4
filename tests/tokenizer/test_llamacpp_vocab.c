/* llama.cpp's own vocabulary tests, from the llama.cpp source that npm's
 * node-llama-cpp 3.21.1 ships (llama/gitRelease.bundle: a git bundle of
 * llama.cpp's repository, September 2026).  Its models/ hold vocabulary-only
 * GGUFs written by llama.cpp's converter, ggml-vocab-NAME.gguf, and for most of
 * them NAME.gguf.inp (texts separated by "\n__ggml_vocab_test__\n") and
 * NAME.gguf.out (per text, the ids the Python tokenizers library gave, no
 * BOS/EOS), which llama.cpp's test-tokenizer-0 compares with its own ids.
 *
 * Nothing of it is committed: the test extracts models/ggml-vocab-* from the
 * bundle with git into build/llamacpp-vocab/<commit>/ once (about 3 s), and
 * the plain and ASan runs read them there.  Every vocabulary with .inp/.out
 * must give the .out ids through posenc's GGUF reader (as `./run X.gguf -m
 * tokenize` reads it), but those posenc refuses by design (below), which
 * must be refused naming the file and why; a vocabulary this list does not
 * know must pass, so a newer bundle's additions are tested, not skipped.
 * Each vocabulary loads once and runs its 45-50 texts: the whole sweep takes
 * seconds, so it runs whole under ASan too. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/common.h"
#include "tokenizer/tokenizer.h"

#define WHAT "llama.cpp's vocabulary tests"

/* The vocabularies posenc refuses, and the words of the refusal. */
static const struct {
    const char *name, *needle;
} refused[] = {
    /* an encoder (WordPiece): not a decoder-only family */
    {"bert-bge", "tokenizer.ggml.model 'bert'"},
    /* llama.cpp's regex lists for these are its own rewrites of the
     * families' tokenizer.json steps (approximate classes, a step left
     * out), not the patterns themselves */
    {"deepseek-llm", "tokenizer.ggml.pre 'deepseek-llm'"},
    {"deepseek-coder", "tokenizer.ggml.pre 'deepseek-coder'"},
    {"falcon", "tokenizer.ggml.pre 'falcon'"},
};

static const char *refusal(const char *name) {
    for (size_t k = 0; k < sizeof refused / sizeof *refused; k++)
        if (strcmp(refused[k].name, name) == 0) return refused[k].needle;
    return NULL;
}

static const char *vocab_dir(void) { return tests_llamacpp_models(WHAT, "vocab", "models/ggml-vocab-*"); }

/* The .inp texts as llama.cpp's test reads them: separated by the marker
 * line, the text after the last one only when there is any. */
typedef struct {
    char *buf;
    const char **text;
    size_t *len;
    int n;
} Texts;

static Texts read_texts(const char *path) {
    static const char sep[] = "\n__ggml_vocab_test__\n";
    Texts t = {0};
    size_t n;
    t.buf = tests_read_file(path, &n);
    size_t cap = 1;
    for (const char *p = t.buf; (p = strstr(p, sep)); p += strlen(sep)) cap++;
    t.text = malloc(cap * sizeof *t.text);
    t.len = malloc(cap * sizeof *t.len);
    ck_assert(t.text && t.len);
    for (size_t pos = 0; pos < n;) {
        const char *end = strstr(t.buf + pos, sep);
        size_t k = end ? (size_t)(end - t.buf) - pos : n - pos;
        t.text[t.n] = t.buf + pos;
        t.len[t.n++] = k;
        pos += k + (end ? strlen(sep) : 0);
    }
    return t;
}

static void free_texts(Texts *t) {
    free(t->buf);
    free(t->text);
    free(t->len);
}

/* Whether line (ids separated by spaces, as llama.cpp strips and splits
 * it) holds exactly ids[0, n). */
static int same_ids(const char *line, size_t len, const int *ids, int n) {
    int k = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && line[i] == ' ') i++;
        if (i == len) break;
        char *end;
        long v = strtol(line + i, &end, 10);
        if (k == n || v != ids[k++]) return 0;
        i = (size_t)(end - line);
    }
    return k == n;
}

/* The number of texts whose ids differ from the .out's (the first printed). */
static int mismatches(const Tokenizer *t, const char *name, const Texts *texts, const char *out,
                      size_t out_n, int quiet) {
    const char *line = out;
    int bad = 0;
    for (int i = 0; i < texts->n; i++) {
        ck_assert_msg(line < out + out_n, "%s: fewer .out lines than texts", name);
        const char *nl = memchr(line, '\n', (size_t)(out + out_n - line));
        size_t len = nl ? (size_t)(nl - line) : (size_t)(out + out_n - line);
        int *ids, n;
        PosencError err;
        ck_assert_msg(tokenizer_encode_alloc(t, texts->text[i], texts->len[i], 0, 0, &ids, &n, &err) == 0,
                      "%s: text %d: %s", name, i + 1, err.msg);
        if (!same_ids(line, len, ids, n)) {
            if (!quiet && bad == 0) {
                printf("%s: text %d differs\n  input: %s\n  want:  %s\n  got:  ", name, i + 1,
                       tests_show_bytes(texts->text[i], texts->len[i]), tests_show_bytes(line, len));
                for (int k = 0; k < n; k++) printf(" %d", ids[k]);
                printf("\n");
            }
            bad++;
        }
        free(ids);
        line += len + 1;
    }
    return bad;
}

/* Mismatches of NAME's texts through t (quiet), with `edit` applied to its
 * .out first (NULL: as it is). */
static int vocab_mismatches(const char *dir, const char *name, const Tokenizer *t,
                            void (*edit)(char *out, size_t n)) {
    char path[600];
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf.inp", dir, name);
    Texts texts = read_texts(path);
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf.out", dir, name);
    size_t out_n;
    char *out = tests_read_file(path, &out_n);
    if (edit) edit(out, out_n);
    int bad = mismatches(t, name, &texts, out, out_n, 1);
    free(out);
    free_texts(&texts);
    return bad;
}

static void load_vocab(Tokenizer *t, const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, name);
    tests_load_tokenizer(t, path, 0);
}

/* The first id's last digit, one up (9 becomes 0). */
static void change_one_id(char *out, size_t n) {
    size_t i = 0;
    while (i < n && (out[i] < '0' || out[i] > '9')) i++;
    while (i + 1 < n && out[i + 1] >= '0' && out[i + 1] <= '9') i++;
    ck_assert(i < n);
    out[i] = out[i] == '9' ? '0' : (char)(out[i] + 1);
}

/* What makes each vocabulary that used to be refused pass, undone, fails:
 * Qwen3.5 with GPT-2's pattern gives other ids for some texts, so does Gemma 4 with a U+2581 put before the text (as Llama
 * 2's Prepend would), and Phi-3's pieces built with SentencePiece's rule of
 * one unknown piece are refused.  And the comparison sees one changed id.
 * (Qwen3.5's texts give the same ids under Qwen2's pattern and Llama 3's:
 * none has a mark between a word and punctuation, where Qwen3.5's parts
 * from Qwen2's, and its vocabulary has no numbers of several digits;
 * test_tokenizer_parity checks the marks against the reference.) */
/* Gemma 4's turns end on <turn|> (and a tool call's on <|tool_response>),
 * which generation and chat stop at, as llama.cpp does; the turn's opening
 * <|turn> does not end it (control). */
START_TEST(gemma4_turns_end) {
    const char *dir = vocab_dir();
    if (!dir) return;
    Tokenizer t;
    load_vocab(&t, dir, "gemma-4");
    int end = -1, tool = -1, open = -1;
    for (int id = 0; id < t.vocab_size; id++) {
        if (!strcmp(t.pieces[id], "<turn|>")) end = id;
        if (!strcmp(t.pieces[id], "<|tool_response>")) tool = id;
        if (!strcmp(t.pieces[id], "<|turn>")) open = id;
    }
    ck_assert_msg(end >= 0 && tool >= 0 && open >= 0, "gemma-4's turn pieces: %d %d %d", end, tool, open);
    ck_assert(tokenizer_ends_turn(&t, end) && tokenizer_ends_turn(&t, tool));
    ck_assert(!tokenizer_ends_turn(&t, open));
    tokenizer_free(&t);
}
END_TEST

START_TEST(controls) {
    const char *dir = vocab_dir();
    if (!dir) return;
    Tokenizer t;
    load_vocab(&t, dir, "qwen35");
    ck_assert_int_eq(t.pretok, PRETOK_QWEN35);
    t.pretok = PRETOK_GPT2;
    int bad = vocab_mismatches(dir, "qwen35", &t, NULL);
    ck_assert_msg(bad > 0, "qwen35 with GPT-2's pattern: every text passes");
    printf("control: qwen35 with GPT-2's pattern: %d texts differ\n", bad);
    tokenizer_free(&t);

    load_vocab(&t, dir, "gemma-4");
    ck_assert_int_eq(t.kind, TOKENIZER_HF_BPE);
    t.prepend_space = 1;
    bad = vocab_mismatches(dir, "gemma-4", &t, NULL);
    ck_assert_msg(bad > 0, "gemma-4 with a prepended U+2581: every text passes");
    printf("control: gemma-4 with a prepended U+2581: %d texts differ\n", bad);
    tokenizer_free(&t);

    load_vocab(&t, dir, "phi-3");
    ck_assert_int_eq(t.unk_id, 32011);
    TokenizerSpec spec = {.kind = TOKENIZER_SPM_BPE, .n_pieces = t.vocab_size,
                          .pieces = (const char *const *)t.pieces, .scores = t.scores,
                          .types = t.types, .bos_id = -1, .eos_id = -1, .add_dummy_prefix = 1,
                          .escape_whitespaces = 1, .byte_fallback = 1};
    Tokenizer one;
    PosencError err;
    ck_assert_int_ne(tokenizer_build(&one, &spec, &err), 0);
    ck_assert_msg(strstr(err.msg, "two unknown pieces (32011 and 32012)"), "%s", err.msg);
    spec.several_unknown = 1;
    ck_assert_msg(tokenizer_build(&one, &spec, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(one.unk_id, 32011);
    ck_assert_int_eq(vocab_mismatches(dir, "phi-3", &one, NULL), 0);
    tokenizer_free(&one);
    tokenizer_free(&t);

    load_vocab(&t, dir, "llama-bpe");
    ck_assert_int_eq(vocab_mismatches(dir, "llama-bpe", &t, NULL), 0);
    ck_assert_int_eq(vocab_mismatches(dir, "llama-bpe", &t, change_one_id), 1);
    tokenizer_free(&t);
}
END_TEST

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

START_TEST(every_vocabulary) {
    const char *dir = vocab_dir();
    if (!dir) return;
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    char *names[256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "ggml-vocab-", 11) == 0 && len > 20 &&
            strcmp(e->d_name + len - 9, ".gguf.inp") == 0 && n < 256)
            names[n++] = strndup(e->d_name + 11, len - 20);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, compare_names);
    ck_assert_int_ge(n, 15);
    int passed = 0, refusals = 0;
    for (int v = 0; v < n; v++) {
        char gguf[512], path[600];
        snprintf(gguf, sizeof gguf, "%s/ggml-vocab-%s.gguf", dir, names[v]);
        Tokenizer t;
        PosencError err;
        int rc = tokenizer_load(&t, gguf, 0, &err);
        const char *needle = refusal(names[v]);
        if (needle) {
            ck_assert_msg(rc != 0, "%s loads, but posenc refuses it by design", gguf);
            tests_expect_file_error(err.msg, gguf, needle);
            printf("%-16s refused: %s\n", names[v], err.msg);
            refusals++;
            continue;
        }
        ck_assert_msg(rc == 0, "%s", err.msg);
        snprintf(path, sizeof path, "%s.inp", gguf);
        Texts texts = read_texts(path);
        snprintf(path, sizeof path, "%s.out", gguf);
        size_t out_n;
        char *out = tests_read_file(path, &out_n);
        int bad = mismatches(&t, names[v], &texts, out, out_n, 0);
        ck_assert_msg(bad == 0, "%s: %d of %d texts differ from llama.cpp's .out", names[v], bad, texts.n);
        printf("%-16s %d texts, 0 mismatches\n", names[v], texts.n);
        passed++;
        free(out);
        free_texts(&texts);
        tokenizer_free(&t);
    }
    printf("llama.cpp vocabularies: %d of %d pass their .inp/.out, %d refused by design\n", passed,
           n, refusals);
    for (int v = 0; v < n; v++) free(names[v]);
}
END_TEST

int main(void) {
    Suite *s = suite_create("llamacpp_vocab");
    TCase *tc = tcase_create("vocab");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, every_vocabulary);
    tcase_add_test(tc, controls);
    tcase_add_test(tc, gemma4_turns_end);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
