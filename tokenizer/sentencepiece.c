/* SentencePiece: validating a vocabulary as the library does when it loads
 * one (also HF_UNIGRAM's, converted from one), the encode pipeline of
 * SPM_BPE and SPM_UNIGRAM: normalize, segment (spm_bpe.c or unigram.c), then
 * unknown pieces become byte pieces (byte fallback) or one merged <unk>; and
 * the library's decoder. */
#include <float.h>

#include "tokenizer/tokenizer_impl.h"

/* Whether no lookup path through the charsmap's double array (normalizer.c's
 * charsmap_longest, over any bytes, NUL included) comes back to a unit it
 * already passed.  Darts-clone shares identical subtrees, so units may be
 * reached from several parents, but a valid file has no cycle; one with a
 * cycle would let a lookup walk as far as the text goes, at every position:
 * quadratic time.  Depth-first, each unit expanded once with all 256 labels;
 * a unit met again while still on the path is a cycle. */
static int charsmap_is_acyclic(const uint32_t *units, size_t n) {
    enum { NEW, ON_PATH, DONE };
    typedef struct {
        size_t unit, base; /* the unit taken, and the base of its children */
        uint32_t next;     /* the next label to try */
    } Frame;
    uint8_t *state = calloc_or_exit(n, 1, "the normalizer's rules");
    Frame *path = malloc_or_exit((n + 1) * sizeof(Frame), "the normalizer's rules");
    size_t depth = 0;
    int ok = 1;
    path[depth++] = (Frame){SIZE_MAX, charsmap_unit_offset(units[0]), 0};
    while (depth > 0 && ok) {
        Frame *f = &path[depth - 1];
        if (f->next == 256) {
            if (f->unit != SIZE_MAX) state[f->unit] = DONE;
            depth--;
            continue;
        }
        uint32_t c = f->next++;
        size_t child = f->base ^ c;
        if (child >= n || charsmap_unit_label(units[child]) != c || state[child] == DONE) continue;
        if (state[child] == ON_PATH) {
            ok = 0;
            continue;
        }
        state[child] = ON_PATH;
        path[depth++] = (Frame){child, child ^ charsmap_unit_offset(units[child]), 0};
    }
    free(state);
    free(path);
    return ok;
}

/* The charsmap blob: uint32 trie size, the double array, then the
 * NUL-separated replacement strings. */
static int load_charsmap(Tokenizer *t, const uint8_t *blob, size_t size, PosencError *err) {
    if (size == 0) return 0;
    uint32_t trie_size = 0;
    if (size > 4) trie_size = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 |
                              (uint32_t)blob[2] << 16 | (uint32_t)blob[3] << 24;
    if (size <= 4 || trie_size >= size - 4)
        return posenc_error(err, "normalization rules (precompiled_charsmap) are broken");
    t->n_charsmap_units = trie_size / 4;
    t->charsmap_units = malloc_or_exit((t->n_charsmap_units ? t->n_charsmap_units : 1) * 4,
                                    "the normalizer's rules");
    for (size_t i = 0; i < t->n_charsmap_units; i++) {
        const uint8_t *u = blob + 4 + 4 * i;
        t->charsmap_units[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
                               (uint32_t)u[3] << 24;
    }
    if (t->n_charsmap_units > 0 && !charsmap_is_acyclic(t->charsmap_units, t->n_charsmap_units))
        return posenc_error(err, "normalization rules (precompiled_charsmap) are broken: "
                                 "their trie has a cycle");
    t->charsmap_text_size = size - 4 - trie_size;
    t->charsmap_text = malloc_or_exit(t->charsmap_text_size, "the normalizer's replacements");
    memcpy(t->charsmap_text, blob + 4 + trie_size, t->charsmap_text_size);
    return 0;
}

int spm_init(Tokenizer *t, const TokenizerSpec *spec, int user_pieces, PosencError *err) {
    t->add_dummy_prefix = spec->add_dummy_prefix;
    t->remove_extra_whitespaces = spec->remove_extra_whitespaces;
    t->escape_whitespaces = spec->escape_whitespaces;
    t->treat_whitespace_as_suffix = spec->treat_whitespace_as_suffix;
    t->byte_fallback = spec->byte_fallback;
    t->min_score = FLT_MAX;
    t->max_score = FLT_MIN; /* sic: the library's initial maximum */
    for (int id = 0; id < t->vocab_size; id++) {
        const char *p = t->pieces[id];
        if (!*p) return posenc_error(err, "piece %d is empty", id);
        switch (t->types[id]) {
        case TOKEN_UNKNOWN:
            if (t->unk_id >= 0 && !spec->several_unknown)
                return posenc_error(err, "two unknown pieces (%d and %d)", t->unk_id, id);
            if (t->unk_id < 0) t->unk_id = id; /* the others never come from text */
            break;
        case TOKEN_BYTE: {
            int b = byte_piece_value(p);
            if (!t->byte_fallback)
                return posenc_error(err, "byte piece '%s' although byte_fallback is off",
                                    posenc_escape(p).s);
            if (b < 0)
                return posenc_error(err, "byte piece %d '%s' is not <0xXX>", id, posenc_escape(p).s);
            t->byte_ids[b] = id;
            break;
        }
        case TOKEN_NORMAL:
            if (t->scores[id] < t->min_score) t->min_score = t->scores[id];
            if (t->scores[id] > t->max_score) t->max_score = t->scores[id];
            break;
        }
    }
    if (t->unk_id < 0) return posenc_error(err, "the vocabulary has no unknown piece");
    for (int b = 0; b < 256 && t->byte_fallback; b++)
        if (t->byte_ids[b] < 0)
            return posenc_error(err, "byte_fallback is on but piece <0x%02X> is missing", b);
    if (load_charsmap(t, spec->charsmap, spec->charsmap_size, err)) return -1;
    static const int user_only[7] = {[TOKEN_USER_DEFINED] = 1};
    if (user_pieces) piece_trie_build(&t->user_trie, t, user_only);
    return 0;
}

void spm_free(Tokenizer *t) {
    free(t->charsmap_units);
    free(t->charsmap_text);
    piece_trie_free(&t->user_trie);
}

/* Unknown pieces become their byte pieces (byte fallback), a run of them
 * one unknown id otherwise. */
void spm_spans_to_ids(const Tokenizer *t, const char *norm, const IntBuf *spans, IntBuf *out) {
    int prev_unk = 0;
    for (size_t i = 0; i < spans->n; i += 3) {
        int start = spans->v[i], n = spans->v[i + 1], id = spans->v[i + 2];
        int unk = t->types[id] == TOKEN_UNKNOWN;
        if (unk && t->byte_fallback) {
            for (int k = 0; k < n; k++) intbuf_push(out, t->byte_ids[(unsigned char)norm[start + k]]);
        } else if (!(unk && prev_unk)) {
            intbuf_push(out, id);
        }
        prev_unk = unk;
    }
}

int spm_encode(const Tokenizer *t, const char *text, size_t len, SpmSegmentFn segment,
               IntBuf *out, TokScratch *s, PosencError *err) {
    spm_normalize(t, text, len, &s->norm);
    if (s->norm.n >= INT32_MAX / 2) return posenc_error(err, "text too long to encode");
    s->spans.n = 0;
    if (s->norm.n == 0) return 0;
    segment(t, s->norm.v, s->norm.n, s);
    spm_spans_to_ids(t, s->norm.v, &s->spans, out);
    return 0;
}

/* Control pieces decode to nothing, the unknown piece to unk_surface, byte
 * pieces to their byte, the others to their text with ▁ as a space. */
void spm_append_surface(const Tokenizer *t, int id, const char *unk_surface, CharBuf *pool) {
    switch (t->types[id]) {
    case TOKEN_CONTROL:
        break;
    case TOKEN_UNKNOWN:
        charbuf_append(pool, unk_surface, strlen(unk_surface));
        break;
    case TOKEN_BYTE:
        charbuf_push(pool, (char)byte_piece_value(t->pieces[id]));
        break;
    default:
        append_metaspace_text(pool, t->pieces[id]);
    }
}

/* The library drops the ▁ a piece starts with at the start of text when
 * the normalizer adds a dummy prefix or strips leading spaces. */
static int drops_prefix_space(const Tokenizer *t, int token) {
    TokenType type = (TokenType)t->types[token];
    return (t->add_dummy_prefix || t->remove_extra_whitespaces) &&
           strncmp(t->pieces[token], "\xE2\x96\x81", 3) == 0 && type != TOKEN_CONTROL &&
           type != TOKEN_UNKNOWN && type != TOKEN_BYTE;
}

int spm_drops_space(const Tokenizer *t, int prev, int token) {
    return starts_text(t, prev) && drops_prefix_space(t, token);
}

/* The library's rules: runs of byte pieces joined, ▁ stripped until text
 * appears. */
void spm_decode_text(const Tokenizer *t, const int *ids, int n, CharBuf *out) {
    int at_start = 1, dropped = 0;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= t->vocab_size) continue;
        if (t->types[id] == TOKEN_BYTE) {
            i = append_byte_run(t, ids, i, n, out) - 1;
            continue;
        }
        /* the library keeps stripping while nothing has been written, unless
         * the last piece already gave up its dummy-prefix ▁ */
        if (dropped || out->n > 0) at_start = 0;
        int drop = at_start && drops_prefix_space(t, id);
        dropped = drop && !t->remove_extra_whitespaces;
        append_piece_surface(t, id, drop, out);
    }
}
