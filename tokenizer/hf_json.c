/* Reads a Hugging Face tokenizer.json (and tokenizer_config.json beside it)
 * into a TokenizerSpec: the byte-level BPE model, its pre-tokenizer
 * recognised by its Split patterns (pretok.c), and added_tokens; BPE with
 * byte fallback (Gemma, Llama 2); Unigram with the Precompiled charsmap and
 * Metaspace (SentencePiece conversions).  What the file asks for and posenc
 * does not implement is refused by name, never approximated: another model
 * type, a normalizer that changes text otherwise, added tokens with
 * single_word (or normalized after a normalizer), an unknown pattern. */
#include "tokenizer/tokenizer_impl.h"

#include <float.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_null(const JsonValue *v) { return !v || v->type == JSON_NULL; }

/* A boolean field: absent or null gives `absent`; another type is an error. */
static int bool_field(const JsonValue *v, const char *key, int absent, int *out, PosencError *err) {
    *out = json_get_bool(v, key, absent);
    return *out < 0 ? posenc_error(err, "\"%s\" is not a boolean", key) : 0;
}

/* A string field that must be absent, null or "". */
static int empty_string(const JsonValue *v, const char *key) {
    const JsonValue *m = json_get(v, key);
    return is_null(m) || json_is_string(m, "");
}

/* normalizer: null, a Sequence of none (DeepSeek-V3's), or NFC (Qwen's). */
static int check_normalizer(const JsonValue *n, int *nfc, PosencError *err) {
    *nfc = json_is_string(json_get(n, "type"), "NFC");
    if (is_null(n) || *nfc) return 0;
    const JsonValue *list = json_get(n, "normalizers");
    if (json_is_string(json_get(n, "type"), "Sequence") && list && list->type == JSON_ARRAY &&
        list->len == 0)
        return 0;
    const char *type = json_get_string(n, "type");
    return posenc_error(err, "normalizer '%s' is not supported (none or NFC only)",
                        posenc_escape(type ? type : "?").s);
}

/* ByteLevel as a step after the splits: no prefix space, no regex of its own. */
static int plain_byte_level(const JsonValue *p, int use_regex) {
    return json_is_string(json_get(p, "type"), "ByteLevel") &&
           json_get_bool(p, "add_prefix_space", 1) == 0 &&
           json_get_bool(p, "use_regex", 1) == use_regex;
}

/* StarCoder's spelling of its pattern: Digits (every digit alone; the Rust
 * library's digits are \p{N}), then ByteLevel with GPT-2's regex. */
static int starcoder_digits(const JsonValue *list) {
    const JsonValue *d = &list->items[0];
    return list->len == 2 && json_is_string(json_get(d, "type"), "Digits") &&
           json_get_bool(d, "individual_digits", 0) == 1 && plain_byte_level(&list->items[1], 1);
}

/* pre_tokenizer: ByteLevel with GPT-2's built-in regex, StarCoder's Digits
 * then that ByteLevel, or a Sequence of Isolated Splits (Regex patterns)
 * ending in a ByteLevel without one. */
static int find_pretokenizer(const JsonValue *p, PretokKind *kind, PosencError *err) {
    const JsonValue *list = json_get(p, "pretokenizers");
    if (plain_byte_level(p, 1) || (list && list->type == JSON_ARRAY && list->len && starcoder_digits(list))) {
        *kind = plain_byte_level(p, 1) ? PRETOK_GPT2 : PRETOK_STARCODER;
        return 0;
    }
    if (!json_is_string(json_get(p, "type"), "Sequence") || !list || list->type != JSON_ARRAY ||
        list->len < 2 || list->len > 4 || !plain_byte_level(&list->items[list->len - 1], 0))
        return posenc_error(err, "pre_tokenizer is not a byte-level one posenc knows (a "
                                 "Sequence of Split patterns, then ByteLevel)");
    const char *regexes[3];
    int n = (int)list->len - 1;
    for (int k = 0; k < n; k++) {
        const JsonValue *s = &list->items[k];
        const char *re = json_get_string(json_get(s, "pattern"), "Regex");
        if (!json_is_string(json_get(s, "type"), "Split") || !re ||
            !json_is_string(json_get(s, "behavior"), "Isolated") ||
            json_get_bool(s, "invert", 0) != 0)
            return posenc_error(err, "pre_tokenizer step %d is not an Isolated Split on a Regex", k + 1);
        regexes[k] = re;
    }
    int found = pretok_find_regexes(regexes, n);
    if (found < 0)
        return posenc_error(err, "pre_tokenizer pattern '%s' is not one posenc implements "
                                 "(GPT-2, Llama 3, Qwen2, DeepSeek-V3, StarCoder, BLOOM, Viking)",
                            posenc_escape(regexes[n - 1]).s);
    *kind = (PretokKind)found;
    return 0;
}

/* The BPE model's settings posenc can honour; byte fallback means the
 * character-level BPE of Gemma (TOKENIZER_HF_BPE). */
static int check_model(const JsonValue *m, int *byte_fallback, PosencError *err) {
    const char *type = json_get_string(m, "type");
    if (!type || strcmp(type, "BPE") != 0)
        return posenc_error(err, "model type '%s' is not supported (BPE and Unigram only)",
                            posenc_escape(type ? type : "?").s);
    if (bool_field(m, "byte_fallback", 0, byte_fallback, err)) return -1;
    if (!is_null(json_get(m, "dropout")) || !empty_string(m, "continuing_subword_prefix") ||
        !empty_string(m, "end_of_word_suffix"))
        return posenc_error(err, "BPE dropout and subword prefixes/suffixes are not supported");
    if (!*byte_fallback && !is_null(json_get(m, "unk_token")))
        return posenc_error(err, "byte-level BPE with an unk_token is not supported");
    return 0;
}

/* A Replace step (normalizer or decoder) of the plain string `from` by `to`. */
static int is_replace(const JsonValue *r, const char *from, const char *to) {
    return json_is_string(json_get(r, "type"), "Replace") &&
           json_is_string(json_get(json_get(r, "pattern"), "String"), from) &&
           json_is_string(json_get(r, "content"), to);
}

static int is_type(const JsonValue *v, const char *type) {
    return json_is_string(json_get(v, "type"), type);
}

static int number_is(const JsonValue *v, double x) {
    return v && v->type == JSON_NUMBER && v->number == x;
}

/* The SentencePiece-style pipelines around a byte-fallback BPE: spaces
 * become U+2581 (a Replace normalizer; Gemma), after one put in front of
 * the text (Prepend first; Llama 2), so a Split on ' ' never splits; the
 * decoder turns them back (Replace, ByteFallback, Fuse) and drops the first
 * space when it ends in Strip (Llama 2). */
static int check_char_bpe(const JsonValue *root, int *prepend, int *strip, PosencError *err) {
    const JsonValue *n = json_get(root, "normalizer"), *p = json_get(root, "pre_tokenizer"),
                    *d = json_get(root, "decoder"), *steps = json_get(n, "normalizers"),
                    *dec = json_get(d, "decoders");
    const char *space = "\xE2\x96\x81";
    *prepend = is_type(n, "Sequence") && steps && steps->type == JSON_ARRAY && steps->len == 2 &&
               is_type(&steps->items[0], "Prepend") &&
               json_is_string(json_get(&steps->items[0], "prepend"), space);
    if (!is_replace(*prepend ? &steps->items[1] : n, " ", space))
        return posenc_error(err, "BPE with byte_fallback needs the normalizer that replaces ' ' "
                                 "with U+2581 (Gemma's), after a Prepend of U+2581 (Llama 2's); "
                                 "others are not supported");
    if (!is_null(p) && !(is_type(p, "Split") &&
                         json_is_string(json_get(json_get(p, "pattern"), "String"), " ")))
        return posenc_error(err, "BPE with byte_fallback: pre_tokenizer must be none or a Split "
                                 "on ' '");
    const JsonValue *last = dec && dec->type == JSON_ARRAY && dec->len ? &dec->items[dec->len - 1] : NULL;
    *strip = last && is_type(last, "Strip") && json_is_string(json_get(last, "content"), " ") &&
             number_is(json_get(last, "start"), 1) && number_is(json_get(last, "stop"), 0);
    if (!is_type(d, "Sequence") || !dec || dec->type != JSON_ARRAY || dec->len != 3u + (unsigned)*strip ||
        !is_replace(&dec->items[0], space, " ") || !is_type(&dec->items[1], "ByteFallback") ||
        !is_type(&dec->items[2], "Fuse"))
        return posenc_error(err, "BPE with byte_fallback: the decoder must be Replace U+2581 by ' ', "
                                 "ByteFallback, Fuse, then at most a Strip of one leading ' '");
    return 0;
}

/* A merge as "left right": tokenizer.json spells it so, or as a pair. */
static const char *merge_text(const JsonValue *m, CharBuf *pool, size_t *off) {
    if (m->type == JSON_STRING) return m->string;
    if (m->type != JSON_ARRAY || m->len != 2 || m->items[0].type != JSON_STRING ||
        m->items[1].type != JSON_STRING || memchr(m->items[0].string, ' ', m->items[0].len) ||
        memchr(m->items[1].string, ' ', m->items[1].len))
        return NULL;
    *off = pool->n;
    charbuf_append(pool, m->items[0].string, m->items[0].len);
    charbuf_append(pool, " ", 1);
    charbuf_append(pool, m->items[1].string, m->items[1].len + 1);
    return NULL;
}

typedef struct {
    const char **pieces;
    uint32_t *lens;
    uint8_t *types;
    uint8_t *flags; /* ADDED_* of added tokens; NULL when none has any */
    int n;
} Vocab;

/* Gives every piece its type, and places added_tokens (when the file has
 * any) at their ids beside the model's vocabulary: the same text at the
 * same id, or a new id; every id from 0 up must be given. */
static int add_tokens(Vocab *v, const JsonValue *added, int normalizes, PosencError *err) {
    if (!is_null(added) && added->type != JSON_ARRAY)
        return posenc_error(err, "added_tokens is not an array");
    uint32_t count = is_null(added) ? 0 : added->len;
    int n = v->n;
    for (uint32_t k = 0; k < count; k++) {
        const JsonValue *id = json_get(&added->items[k], "id");
        if (!id || id->type != JSON_NUMBER || id->number < 0 || id->number >= INT32_MAX ||
            id->number != (double)(int)id->number)
            return posenc_error(err, "added token %u has no valid id", k);
        if ((int)id->number >= n) n = (int)id->number + 1;
    }
    v->pieces = realloc(v->pieces, (size_t)n * sizeof(char *));
    v->lens = realloc(v->lens, (size_t)n * sizeof(uint32_t));
    v->types = calloc_or_exit((size_t)n, 1, "the piece types");
    if (!v->pieces || !v->lens) posenc_out_of_memory((size_t)n, sizeof(char *), "the vocabulary");
    for (int i = v->n; i < n; i++) v->pieces[i] = NULL;
    for (int i = 0; i < n; i++) v->types[i] = TOKEN_NORMAL;
    for (uint32_t k = 0; k < count; k++) {
        const JsonValue *a = &added->items[k], *content = json_get(a, "content");
        int id = (int)json_get(a, "id")->number;
        if (!content || content->type != JSON_STRING || content->len == 0)
            return posenc_error(err, "added token %d has no content", id);
        int lstrip, rstrip, single_word;
        if (bool_field(a, "lstrip", 0, &lstrip, err) || bool_field(a, "rstrip", 0, &rstrip, err) ||
            bool_field(a, "single_word", 0, &single_word, err))
            return -1;
        /* the JavaScript reference ignores single_word: nothing to check posenc against */
        if (single_word)
            return posenc_error(err, "added token '%s': single_word is not supported",
                                posenc_escape(content->string).s);
        if ((lstrip || rstrip) && !v->flags) v->flags = calloc_or_exit((size_t)n, 1, "the added tokens' flags");
        if (v->flags) v->flags[id] = (uint8_t)((lstrip ? ADDED_LSTRIP : 0) | (rstrip ? ADDED_RSTRIP : 0));
        if (v->pieces[id] && (v->lens[id] != content->len ||
                              memcmp(v->pieces[id], content->string, content->len) != 0))
            return posenc_error(err, "id %d is '%s' in the model and added token '%s'", id,
                                posenc_escape(v->pieces[id]).s, posenc_escape(content->string).s);
        int special, normalized;
        if (bool_field(a, "special", 0, &special, err) ||
            bool_field(a, "normalized", !special, &normalized, err))
            return -1;
        if (normalizes && normalized) /* the library matches those in the normalized text */
            return posenc_error(err, "added token '%s' is matched after the normalizer "
                                     "(normalized: true), which posenc does not do",
                                posenc_escape(content->string).s);
        v->pieces[id] = content->string;
        v->lens[id] = content->len;
        v->types[id] = special ? TOKEN_CONTROL : TOKEN_USER_DEFINED;
    }
    v->n = n;
    for (int i = 0; i < n; i++)
        if (!v->pieces[i]) return posenc_error(err, "no token has id %d (ids must be 0..N-1)", i);
    return 0;
}

/* tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}. */
static int config_token(const Tokenizer *t, const JsonValue *config, const char *key) {
    const JsonValue *v = json_get(config, key);
    const char *s = v && v->type == JSON_OBJECT ? json_get_string(v, "content")
                    : v && v->type == JSON_STRING ? v->string : NULL;
    return s ? tokenizer_lookup(t, s, strlen(s)) : -1;
}

static char *read_json(const char *path, JsonDoc *doc, PosencError *err) {
    MappedFile mf;
    if (mapped_file_open(&mf, path, err)) return NULL;
    PosencError e;
    int rc = json_parse(doc, (const char *)mf.data, mf.size, &e);
    mapped_file_close(&mf);
    if (rc) posenc_error(err, "%s: %s", path, e.msg);
    return rc ? NULL : (char *)path;
}

/* Standard base64 (with its padding) -> malloc'd bytes, or NULL. */
static uint8_t *base64_decode(const char *s, size_t n, size_t *out_n) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (n % 4) return NULL;
    uint8_t *out = malloc_or_exit(n / 4 * 3 + 1, "the normalizer's rules");
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            const char *c = s[i + j] ? memchr(alphabet, s[i + j], 64) : NULL;
            if (s[i + j] == '=' && i + 4 == n && j >= 2 && (j == 3 || s[i + 3] == '=')) pad++;
            else if (!c || pad) {
                free(out);
                return NULL;
            }
            v = v << 6 | (uint32_t)(c ? c - alphabet : 0);
        }
        for (int j = 0; j < 3 - pad; j++) out[k++] = (uint8_t)(v >> (16 - 8 * j));
    }
    *out_n = k;
    return out;
}

/* The normalizer of a SentencePiece conversion: Precompiled, Strip on the
 * right, Replace of the Regex " {2,}" by ' ' or U+2581, each optional, in
 * that order, alone or in a Sequence. */
static int unigram_normalizer(const JsonValue *n, TokenizerSpec *spec, uint8_t **charsmap,
                              PosencError *err) {
    const JsonValue *list = json_get(n, "normalizers");
    int sequence = is_type(n, "Sequence") && list && list->type == JSON_ARRAY;
    uint32_t count = is_null(n) ? 0 : sequence ? list->len : 1;
    int stage = 0; /* the steps seen must come in the pipeline's order */
    for (uint32_t k = 0; k < count; k++) {
        const JsonValue *step = sequence ? &list->items[k] : n;
        const char *type = json_get_string(step, "type");
        const JsonValue *map = json_get(step, "precompiled_charsmap");
        if (stage < 1 && is_type(step, "Precompiled")) {
            if (!map || map->type != JSON_STRING ||
                !(*charsmap = base64_decode(map->string, map->len, &spec->charsmap_size)))
                return posenc_error(err, "precompiled_charsmap is not base64");
            spec->charsmap = *charsmap;
            stage = 1;
        } else if (stage < 2 && is_type(step, "Strip") &&
                   json_get_bool(step, "strip_left", 1) == 0 && json_get_bool(step, "strip_right", 0) == 1) {
            spec->strip_right = 1;
            stage = 2;
        } else if (stage < 3 && is_type(step, "Replace") &&
                   json_is_string(json_get(json_get(step, "pattern"), "Regex"), " {2,}") &&
                   (json_is_string(json_get(step, "content"), " ") ||
                    json_is_string(json_get(step, "content"), "\xE2\x96\x81"))) {
            spec->space_run = json_get_string(step, "content");
            stage = 3;
        } else {
            return posenc_error(err, "Unigram normalizer step '%s' is not supported (Precompiled, "
                                     "Strip right, Replace \" {2,}\" by ' ' or U+2581, in that order)",
                                posenc_escape(type ? type : "?").s);
        }
    }
    return 0;
}

/* Metaspace with U+2581 as the pre-tokenizer and the same as the decoder:
 * prepend_scheme always/first/never (older files: add_prefix_space), split. */
static int metaspace_settings(const JsonValue *m, const char *what, MetaspacePrepend *prepend,
                              int *split, PosencError *err) {
    if (!is_type(m, "Metaspace") || !json_is_string(json_get(m, "replacement"), "\xE2\x96\x81"))
        return posenc_error(err, "Unigram %s must be Metaspace with replacement U+2581", what);
    const JsonValue *scheme = json_get(m, "prepend_scheme");
    int add_prefix;
    if (bool_field(m, "add_prefix_space", 1, &add_prefix, err) || bool_field(m, "split", 1, split, err))
        return -1;
    if (is_null(scheme)) *prepend = add_prefix ? METASPACE_ALWAYS : METASPACE_NEVER;
    else if (json_is_string(scheme, "always")) *prepend = METASPACE_ALWAYS;
    else if (json_is_string(scheme, "first")) *prepend = METASPACE_FIRST;
    else if (json_is_string(scheme, "never")) *prepend = METASPACE_NEVER;
    else return posenc_error(err, "Metaspace prepend_scheme is not always, first or never");
    return 0;
}

/* model.vocab as [[piece, score], ...] -> pieces and float scores. */
static int unigram_vocab(const JsonValue *vocab, Vocab *v, float **scores, PosencError *err) {
    if (!vocab || vocab->type != JSON_ARRAY || vocab->len == 0 || vocab->len >= INT32_MAX)
        return posenc_error(err, "the Unigram vocab is not a non-empty array");
    v->n = (int)vocab->len;
    v->pieces = malloc_or_exit(vocab->len * sizeof(char *), "the vocabulary");
    v->lens = malloc_or_exit(vocab->len * sizeof(uint32_t), "the vocabulary");
    *scores = malloc_or_exit(vocab->len * sizeof(float), "the piece scores");
    for (uint32_t i = 0; i < vocab->len; i++) {
        const JsonValue *e = &vocab->items[i];
        if (e->type != JSON_ARRAY || e->len != 2 || e->items[0].type != JSON_STRING ||
            e->items[1].type != JSON_NUMBER || !(fabs(e->items[1].number) <= FLT_MAX))
            return posenc_error(err, "Unigram vocab entry %u is not [piece, finite score]", i);
        v->pieces[i] = e->items[0].string;
        v->lens[i] = e->items[0].len;
        (*scores)[i] = (float)e->items[1].number;
    }
    return 0;
}

/* A Unigram model (SentencePiece converted by Hugging Face): ids of the
 * library for its normalizer, Metaspace and Viterbi (TOKENIZER_HF_UNIGRAM). */
static int build_unigram(Tokenizer *t, const JsonValue *root, PosencError *err) {
    const JsonValue *model = json_get(root, "model"), *unk = json_get(model, "unk_id");
    TokenizerSpec spec = {.kind = TOKENIZER_HF_UNIGRAM, .bos_id = -1, .eos_id = -1};
    MetaspacePrepend dec_prepend;
    int dec_split;
    Vocab v = {0};
    float *scores = NULL;
    uint8_t *charsmap = NULL;
    int rc = bool_field(model, "byte_fallback", 0, &spec.byte_fallback, err);
    if (rc == 0) rc = unigram_normalizer(json_get(root, "normalizer"), &spec, &charsmap, err);
    if (rc == 0) rc = metaspace_settings(json_get(root, "pre_tokenizer"), "pre_tokenizer",
                                         &spec.metaspace_prepend, &spec.metaspace_split, err);
    if (rc == 0) rc = metaspace_settings(json_get(root, "decoder"), "decoder", &dec_prepend,
                                         &dec_split, err);
    if (rc == 0 && dec_prepend != spec.metaspace_prepend)
        rc = posenc_error(err, "the Metaspace decoder's prepend_scheme differs from the "
                               "pre_tokenizer's");
    if (rc == 0) rc = unigram_vocab(json_get(model, "vocab"), &v, &scores, err);
    if (rc == 0 && (!unk || unk->type != JSON_NUMBER || unk->number < 0 || unk->number >= v.n ||
                    unk->number != (double)(int)unk->number))
        rc = posenc_error(err, "unk_id is missing or not an id of the vocab (0..%d)", v.n - 1);
    int n_model = v.n;
    if (rc == 0) rc = add_tokens(&v, json_get(root, "added_tokens"), 1, err);
    if (rc == 0 && v.n > n_model) {
        scores = realloc(scores, (size_t)v.n * sizeof(float));
        if (!scores) posenc_out_of_memory((size_t)v.n, sizeof(float), "the piece scores");
        for (int i = n_model; i < v.n; i++) scores[i] = 0.0f;
    }
    for (int i = 0; rc == 0 && spec.byte_fallback && i < n_model; i++)
        if (v.types[i] == TOKEN_NORMAL && byte_piece_value(v.pieces[i]) >= 0) v.types[i] = TOKEN_BYTE;
    int unk_added = TOKEN_NORMAL; /* the type the added tokens gave the unknown piece (T5's) */
    if (rc == 0) {
        unk_added = v.types[(int)unk->number];
        v.types[(int)unk->number] = TOKEN_UNKNOWN;
        spec.n_pieces = v.n;
        spec.pieces = v.pieces;
        spec.piece_lens = v.lens;
        spec.scores = scores;
        spec.types = v.types;
        spec.added_flags = v.flags;
        spec.strip_leading_space = spec.metaspace_prepend != METASPACE_NEVER;
        rc = tokenizer_build(t, &spec, err);
    }
    if (rc == 0 && unk_added != TOKEN_NORMAL) { /* it still splits the text as an added token */
        static const int special[7] = {[TOKEN_USER_DEFINED] = 1, [TOKEN_CONTROL] = 1, [TOKEN_UNKNOWN] = 1};
        static const int user[7] = {[TOKEN_USER_DEFINED] = 1, [TOKEN_UNKNOWN] = 1};
        piece_trie_free(&t->special_trie);
        piece_trie_build(&t->special_trie, t, special);
        if (unk_added == TOKEN_USER_DEFINED) {
            piece_trie_free(&t->added_trie);
            piece_trie_build(&t->added_trie, t, user);
        }
    }
    free(v.pieces);
    free(v.lens);
    free(v.types);
    free(v.flags);
    free(scores);
    free(charsmap);
    return rc;
}

static int build(Tokenizer *t, const JsonValue *root, PosencError *err) {
    const JsonValue *model = json_get(root, "model");
    PretokKind pretok = PRETOK_GPT2;
    int nfc = 0, byte_fallback = 0, fuse_unk = 0, prepend = 0, strip = 0;
    const JsonValue *dec = json_get(root, "decoder");
    if (!model) return posenc_error(err, "no \"model\"");
    if (json_is_string(json_get(model, "type"), "Unigram")) return build_unigram(t, root, err);
    if (check_model(model, &byte_fallback, err) ||
        bool_field(model, "fuse_unk", 0, &fuse_unk, err))
        return -1;
    if (byte_fallback ? check_char_bpe(root, &prepend, &strip, err)
                      : check_normalizer(json_get(root, "normalizer"), &nfc, err) ||
                            find_pretokenizer(json_get(root, "pre_tokenizer"), &pretok, err))
        return -1;
    if (!byte_fallback && !is_null(dec) && !json_is_string(json_get(dec, "type"), "ByteLevel"))
        return posenc_error(err, "decoder is not ByteLevel");
    const JsonValue *vocab = json_get(model, "vocab"), *merges = json_get(model, "merges");
    if (!vocab) return posenc_error(err, "the model has no vocab");
    if (!merges || merges->type != JSON_ARRAY) return posenc_error(err, "the model has no merges array");
    int ignore_merges;
    if (bool_field(model, "ignore_merges", 0, &ignore_merges, err)) return -1;
    Vocab v = {0};
    CharBuf pool = {0};
    size_t *offs = malloc_or_exit((merges->len ? merges->len : 1) * sizeof(size_t), "the merges");
    const char **texts = malloc_or_exit((merges->len ? merges->len : 1) * sizeof(char *), "the merges");
    int rc = json_vocab_pieces(vocab, &v.pieces, &v.lens, &v.n, err);
    if (rc == 0) rc = add_tokens(&v, json_get(root, "added_tokens"), nfc || byte_fallback, err);
    const char *unk = json_get_string(model, "unk_token");
    for (int i = 0; rc == 0 && byte_fallback && i < v.n; i++) {
        if (v.types[i] != TOKEN_NORMAL) continue;
        if (byte_piece_value(v.pieces[i]) >= 0) v.types[i] = TOKEN_BYTE;
        if (unk && strcmp(v.pieces[i], unk) == 0) v.types[i] = TOKEN_UNKNOWN;
    }
    for (uint32_t k = 0; rc == 0 && k < merges->len; k++) {
        offs[k] = SIZE_MAX;
        texts[k] = merge_text(&merges->items[k], &pool, &offs[k]);
        if (!texts[k] && offs[k] == SIZE_MAX)
            rc = posenc_error(err, "merge %u is neither \"a b\" nor a pair of strings", k + 1);
    }
    for (uint32_t k = 0; rc == 0 && k < merges->len; k++)
        if (!texts[k]) texts[k] = pool.v + offs[k]; /* the pool has stopped moving */
    if (rc == 0) {
        TokenizerSpec spec = {.kind = byte_fallback ? TOKENIZER_HF_BPE : TOKENIZER_GPT2,
                              .byte_fallback = byte_fallback, .fuse_unk = fuse_unk,
                              .prepend_space = prepend, .strip_leading_space = strip,
                              .n_pieces = v.n, .pieces = v.pieces,
                              .piece_lens = v.lens, .types = v.types, .added_flags = v.flags,
                              .n_merges = (int)merges->len,
                              .merges = texts, .bos_id = -1, .eos_id = -1, .pretok = pretok,
                              .ignore_merges = ignore_merges, .nfc = nfc,
                              .leftmost_merges = 1};
        rc = tokenizer_build(t, &spec, err);
    }
    /* the model's unk_token, also when an added (special) token spells it */
    if (rc == 0 && byte_fallback && unk) t->unk_id = tokenizer_lookup(t, unk, strlen(unk));
    free(v.pieces);
    free(v.lens);
    free(v.types);
    free(v.flags);
    free(pool.v);
    free(offs);
    free(texts);
    return rc;
}

int hf_json_read(Tokenizer *t, const char *path, PosencError *err) {
    char file[4096], config_path[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(file, sizeof file, "%s/tokenizer.json", path);
    else
        snprintf(file, sizeof file, "%s", path);
    const char *slash = strrchr(file, '/');
    int dir_len = slash ? (int)(slash - file + 1) : 0;
    snprintf(config_path, sizeof config_path, "%.*stokenizer_config.json", dir_len, file);
    JsonDoc doc, config = {0};
    if (!read_json(file, &doc, err)) return -1;
    int rc = 0;
    if (access(config_path, F_OK) == 0 && !read_json(config_path, &config, err)) rc = -1;
    PosencError e;
    if (rc == 0 && build(t, &doc.root, &e)) rc = posenc_error(err, "%s: %s", file, e.msg);
    if (rc == 0) {
        t->bos_id = config_token(t, &config.root, "bos_token");
        t->eos_id = config_token(t, &config.root, "eos_token");
    }
    json_free(&doc);
    json_free(&config);
    return rc;
}
