/* The vocabulary inside a GGUF file (tokenizer.ggml.*, llama.cpp's keys):
 * "llama" is SentencePiece BPE, "t5" SentencePiece unigram, "gpt2"
 * byte-level BPE, "gemma4" BPE over characters with byte fallback (spaces as
 * U+2581, as Gemma's tokenizer.json; llama.cpp's "SPM-style BPE").  The
 * arrays are read into a TokenizerSpec; nothing read here outlives the call
 * because tokenizer_build copies.  Several pieces may be typed unknown, as
 * llama.cpp reads them (its converter types Phi-3's [PAD...] pieces so).
 *
 * What llama.cpp has no key for is under posenc.tokenizer.* (tools/convert.py
 * writes them); an absent key takes the library's default:
 *   escape_whitespaces          bool, default true
 *   treat_whitespace_as_suffix  bool, default false
 *   byte_fallback               bool, default: whether there are BYTE tokens
 *                               (llama.cpp's files have byte pieces, no flag)
 *   unknown_surface             string, default " \u2047 "
 *   encoder                     "llama2c": the pieces are a llama2.c
 *                               tokenizer.bin's in SentencePiece spelling;
 *                               encode as llama2.c does (invalid UTF-8 too) */
#include "base/gguf.h"
#include "tokenizer/tokenizer_impl.h"

#define SPACE_SYMBOL "\xE2\x96\x81" /* ▁ */

static int optional_bool(const GgufFile *g, const char *key, int dflt, PosencError *err, int *out) {
    *out = dflt;
    return gguf_find_kv(g, key) ? gguf_get_bool(g, key, out, err) : 0;
}

static int optional_str(const GgufFile *g, const char *key, const char **out, PosencError *err) {
    *out = NULL;
    return gguf_find_kv(g, key) ? gguf_get_str(g, key, out, err) : 0;
}

static int optional_id(const GgufFile *g, const char *key, int n, PosencError *err, int *out) {
    *out = -1;
    if (!gguf_find_kv(g, key)) return 0;
    uint32_t v;
    if (gguf_get_u32(g, key, &v, err)) return -1;
    if (v >= (uint32_t)n) return posenc_error(err, "%s: %s = %u is outside the vocabulary of %d",
                                              g->path, key, v, n);
    *out = (int)v;
    return 0;
}

/* Array `key` of n elements, or NULL when absent; -1 when present but wrong. */
static int optional_array(const GgufFile *g, const char *key, size_t n, int ints,
                          const GgufArray **out, PosencError *err) {
    *out = NULL;
    if (!gguf_find_kv(g, key)) return 0;
    int rc = ints ? gguf_get_arr_int(g, key, out, err) : gguf_get_arr(g, key, GGUF_TYPE_FLOAT32, out, err);
    if (rc) return -1;
    if (n && (*out)->n != n)
        return posenc_error(err, "%s: %s has %zu entries for %zu tokens", g->path, key, (*out)->n, n);
    return 0;
}

/* What a tokenizer.ggml.model name is read as. */
typedef struct {
    const char *name;
    TokenizerKind kind;
    int merges;                   /* tokenizer.ggml.merges is read */
    int pre;                      /* tokenizer.ggml.pre is read (byte-level BPE) */
    int add_space_prefix;         /* tokenizer.ggml.add_space_prefix when absent */
    int remove_extra_whitespaces; /* tokenizer.ggml.remove_extra_whitespaces when absent */
} GgufTokenizerModel;

static const GgufTokenizerModel gguf_models[] = {
    {"llama", TOKENIZER_SPM_BPE, 0, 0, 1, 0},
    {"t5", TOKENIZER_SPM_UNIGRAM, 0, 0, 1, 1},
    {"gpt2", TOKENIZER_GPT2, 1, 1, 0, 0},
    {"gemma4", TOKENIZER_HF_BPE, 1, 0, 1, 0},
};

/* The spec being filled and what was allocated for it. */
typedef struct {
    TokenizerSpec spec;
    const GgufTokenizerModel *model;
    int llama2c;       /* posenc.tokenizer.encoder = llama2c */
    char **owned;      /* strings made here (merges, respelled pieces) */
    size_t n_owned;
} VocabBuild;

static char *own(VocabBuild *b, size_t len) {
    char *s = malloc_or_exit(len + 1, "a piece");
    b->owned[b->n_owned++] = s;
    return s;
}

static int read_kind(const GgufFile *g, VocabBuild *b, PosencError *err) {
    const char *model, *encoder;
    if (gguf_get_str(g, "tokenizer.ggml.model", &model, err) ||
        optional_str(g, "posenc.tokenizer.encoder", &encoder, err))
        return -1;
    const size_t n_models = sizeof gguf_models / sizeof *gguf_models;
    for (size_t i = 0; i < n_models && !b->model; i++)
        if (!strcmp(model, gguf_models[i].name)) b->model = &gguf_models[i];
    if (!b->model) {
        char names[64] = "";
        for (size_t i = 0; i < n_models; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? "|" : "",
                     gguf_models[i].name);
        return posenc_error(err, "%s: tokenizer.ggml.model '%s' is not supported (%s)", g->path,
                            posenc_escape(model).s, names);
    }
    b->spec.kind = b->model->kind;
    if (!encoder) return 0;
    if (strcmp(encoder, "llama2c") != 0)
        return posenc_error(err, "%s: posenc.tokenizer.encoder '%s' is not supported (llama2c)",
                            g->path, posenc_escape(encoder).s);
    if (strcmp(model, "llama") != 0)
        return posenc_error(err, "%s: posenc.tokenizer.encoder llama2c needs "
                                 "tokenizer.ggml.model llama, not %s", g->path, model);
    b->llama2c = 1;
    b->spec.kind = TOKENIZER_LLAMA2C;
    return 0;
}

/* tools/convert.py stores a tokenizer.bin's pieces in SentencePiece's
 * spelling (its llama2c_piece); llama2.c's encoder looks them up as the
 * file had them: ▁ as ' ', BOS/EOS as "\n<s>\n" and "\n</s>\n". */
static const char *llama2c_spelling(VocabBuild *b, GgufString p, uint32_t *len) {
    int wrap = (p.len == 3 && !memcmp(p.ptr, "<s>", 3)) || (p.len == 4 && !memcmp(p.ptr, "</s>", 4));
    char *s = own(b, p.len + 2);
    size_t k = 0;
    if (wrap) s[k++] = '\n';
    for (size_t i = 0; i < p.len; i++) {
        int space = p.len - i >= 3 && !memcmp(p.ptr + i, SPACE_SYMBOL, 3);
        s[k++] = space ? ' ' : p.ptr[i];
        i += space ? 2 : 0;
    }
    if (wrap) s[k++] = '\n';
    s[k] = '\0';
    *len = (uint32_t)k;
    return s;
}

/* tokens with their scores and token_type; *has_bytes: some token is a
 * BYTE piece. */
static int read_tokens(const GgufFile *g, VocabBuild *b, const GgufArray *tokens, int *has_bytes,
                       PosencError *err) {
    const GgufArray *scores, *types;
    size_t n = tokens->n;
    if (optional_array(g, "tokenizer.ggml.scores", n, 0, &scores, err) ||
        optional_array(g, "tokenizer.ggml.token_type", n, 1, &types, err))
        return -1;
    TokenizerSpec *spec = &b->spec;
    const char **pieces = malloc_or_exit(n * sizeof(char *), "the pieces");
    uint32_t *lens = malloc_or_exit(n * sizeof(uint32_t), "the piece lengths");
    float *score_v = scores ? malloc_or_exit(n * sizeof(float), "the piece scores") : NULL;
    /* llama2.c's reader has no types: neither has its encoder here */
    uint8_t *type_v = types && !b->llama2c ? malloc_or_exit(n, "the piece types") : NULL;
    spec->n_pieces = (int)n;
    spec->pieces = pieces;
    spec->piece_lens = lens;
    spec->scores = score_v;
    spec->types = type_v;
    *has_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        GgufString s = gguf_arr_str(tokens, i);
        if (b->llama2c) {
            pieces[i] = llama2c_spelling(b, s, &lens[i]);
        } else {
            pieces[i] = s.ptr;
            lens[i] = s.len > UINT32_MAX ? UINT32_MAX : (uint32_t)s.len;
        }
        if (score_v) score_v[i] = gguf_arr_f32(scores, i);
        int64_t ty = types ? gguf_arr_int(types, i) : TOKEN_NORMAL;
        if (ty < TOKEN_NORMAL || ty > TOKEN_BYTE)
            return posenc_error(err, "%s: tokenizer.ggml.token_type[%zu] = %lld is not a token "
                                     "type (1..6)", g->path, i, (long long)ty);
        if (type_v) type_v[i] = (uint8_t)ty;
        *has_bytes |= ty == TOKEN_BYTE;
    }
    return 0;
}

/* GPT-2 merges as the "left right" C strings the builder takes. */
static void read_merges(VocabBuild *b, const GgufArray *merges) {
    const char **merge_v = malloc_or_exit(merges->n * sizeof(char *) + 1, "the merges");
    for (size_t i = 0; i < merges->n; i++) {
        GgufString s = gguf_arr_str(merges, i);
        char *m = own(b, s.len);
        memcpy(m, s.ptr, s.len);
        m[s.len] = '\0';
        merge_v[i] = m;
    }
    b->spec.n_merges = (int)merges->n;
    b->spec.merges = merge_v;
}

/* The normalizer's blob, as llama.cpp stores it: an array of (u)int8. */
static int read_charsmap(const GgufFile *g, VocabBuild *b, PosencError *err) {
    const char *key = "tokenizer.ggml.precompiled_charsmap";
    const GgufArray *arr;
    if (!gguf_find_kv(g, key)) return 0;
    if (gguf_get_arr_int(g, key, &arr, err)) return -1;
    if (arr->type != GGUF_TYPE_UINT8 && arr->type != GGUF_TYPE_INT8)
        return posenc_error(err, "%s: %s is an array of %s, not of bytes (uint8)", g->path, key,
                            gguf_type_name(arr->type));
    uint8_t *v = malloc_or_exit(arr->n + 1, "the normalizer's rules");
    memcpy(v, arr->data, arr->n); /* one byte per element: no byte order */
    b->spec.charsmap = v;
    b->spec.charsmap_size = arr->n;
    return 0;
}

/* Special ids and the normalizer/encoder flags. */
static int read_settings(const GgufFile *g, VocabBuild *b, int has_bytes, PosencError *err) {
    TokenizerSpec *spec = &b->spec;
    int n = spec->n_pieces;
    return optional_id(g, "tokenizer.ggml.bos_token_id", n, err, &spec->bos_id) ||
           optional_id(g, "tokenizer.ggml.eos_token_id", n, err, &spec->eos_id) ||
           optional_bool(g, "tokenizer.ggml.add_space_prefix", b->model->add_space_prefix, err,
                         &spec->add_dummy_prefix) ||
           optional_bool(g, "tokenizer.ggml.remove_extra_whitespaces",
                         b->model->remove_extra_whitespaces, err, &spec->remove_extra_whitespaces) ||
           optional_bool(g, "posenc.tokenizer.escape_whitespaces", 1, err,
                         &spec->escape_whitespaces) ||
           optional_bool(g, "posenc.tokenizer.treat_whitespace_as_suffix", 0, err,
                         &spec->treat_whitespace_as_suffix) ||
           optional_bool(g, "posenc.tokenizer.byte_fallback", has_bytes, err, &spec->byte_fallback) ||
           optional_str(g, "posenc.tokenizer.unknown_surface", &spec->unk_surface, err) ||
           optional_bool(g, "posenc.tokenizer.nfc", 0, err, &spec->nfc)
               ? -1 : 0;
}

/* tokenizer.ggml.pre of a "gpt2" vocabulary picks the pattern as llama.cpp
 * does, with its merge order (leftmost first) and, for the Llama 3 names, its
 * ignore_merges; absent, GPT-2's pattern as OpenAI's encoder.py runs it. */
static int read_pre(const GgufFile *g, VocabBuild *b, PosencError *err) {
    const char *pre;
    if (!b->model->pre) return 0;
    if (optional_str(g, "tokenizer.ggml.pre", &pre, err)) return -1;
    if (!pre) return 0;
    const char *why;
    int ignore_merges, kind = pretok_find_name(pre, &ignore_merges, &why);
    if (kind < 0)
        return posenc_error(err, "%s: tokenizer.ggml.pre '%s' is not a pre-tokenizer posenc "
                                 "implements: %s", g->path, posenc_escape(pre).s,
                            why ? why : "not a name llama.cpp gives (tokenizer/README.md lists them)");
    b->spec.pretok = (PretokKind)kind;
    b->spec.leftmost_merges = 1;
    b->spec.ignore_merges = ignore_merges;
    return 0;
}

static int fill_spec(const GgufFile *g, VocabBuild *b, PosencError *err) {
    const GgufArray *tokens, *merges = NULL;
    int has_bytes;
    if (read_kind(g, b, err) ||
        gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, err))
        return -1;
    if (tokens->n == 0 || tokens->n > (1u << 24))
        return posenc_error(err, "%s: %zu tokens", g->path, tokens->n);
    if (b->model->merges && gguf_find_kv(g, "tokenizer.ggml.merges") &&
        gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, err))
        return -1;
    b->owned = malloc_or_exit((tokens->n + (merges ? merges->n : 0)) * sizeof(char *),
                           "the vocabulary");
    if (read_tokens(g, b, tokens, &has_bytes, err)) return -1;
    if (merges) read_merges(b, merges);
    return read_charsmap(g, b, err) || read_settings(g, b, has_bytes, err) || read_pre(g, b, err)
               ? -1 : 0;
}

int tokenizer_load_gguf(Tokenizer *t, const GgufFile *g, PosencError *err) {
    memset(t, 0, sizeof *t);
    if (!gguf_find_kv(g, "tokenizer.ggml.model"))
        return posenc_error(err, "%s: the file has no vocabulary (tokenizer.ggml.*); pass -z",
                            g->path);
    VocabBuild b = {.spec = {.bos_id = -1, .eos_id = -1, .several_unknown = 1}};
    int rc = fill_spec(g, &b, err);
    if (rc == 0 && tokenizer_build(t, &b.spec, err)) {
        posenc_error_prefix(err, "vocabulary");
        rc = posenc_error_prefix(err, g->path);
    }
    if (rc == 0) snprintf(t->source, sizeof t->source, "%s", g->path);
    for (size_t i = 0; i < b.n_owned; i++) free(b.owned[i]);
    free(b.owned);
    free((void *)b.spec.pieces);
    free((void *)b.spec.piece_lens);
    free((void *)b.spec.scores);
    free((void *)b.spec.types);
    free((void *)b.spec.merges);
    free((void *)b.spec.charsmap);
    return rc;
}
