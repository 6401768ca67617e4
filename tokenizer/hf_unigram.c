/* tokenizer.json Unigram (TOKENIZER_HF_UNIGRAM): Hugging Face's pipeline as
 * tokenizer.json spells it for SentencePiece conversions.  Added pieces
 * split the text (added.c); then each section:
 *   normalizer     Precompiled (the charsmap, as SentencePiece applies it),
 *                  Strip on the right, Replace " {2,}" by a space or U+2581
 *   pre_tokenizer  Metaspace: spaces become U+2581, one goes in front
 *                  (prepend_scheme), each U+2581 starts a pre-token (split)
 *   model          Viterbi per pre-token (unigram.c), unknown runs fused or
 *                  turned into byte pieces (byte_fallback)
 * Its Metaspace decoder keeps every piece's text (byte pieces' too: it has no
 * ByteFallback), U+2581 as a space, and drops the text's first space. */
#include "tokenizer/tokenizer_impl.h"

#define SPACE_SYMBOL "\xE2\x96\x81" /* ▁ U+2581 */

/* Length of s[0..n) without its trailing White_Space characters. */
static size_t strip_right(const char *s, size_t n) {
    size_t keep = 0;
    for (size_t i = 0; i < n;) {
        size_t clen;
        UnicodeClass c = utf8_class(s + i, n - i, &clen);
        i += clen;
        if (c != UCLASS_SPACE) keep = i;
    }
    return keep;
}

/* The normalized section with Metaspace's replacement and prefix, in out. */
static void metaspace(const Tokenizer *t, const char *s, size_t n, int first, CharBuf *out) {
    out->n = 0;
    int prepend = t->metaspace_prepend == METASPACE_ALWAYS ||
                  (t->metaspace_prepend == METASPACE_FIRST && first);
    /* (the prefix goes in unless the text already starts with U+2581; a
     * space counts, it becomes one) */
    if (prepend && n > 0 && s[0] != ' ' && !(n >= 3 && memcmp(s, SPACE_SYMBOL, 3) == 0))
        charbuf_append(out, SPACE_SYMBOL, 3);
    size_t run_len = strlen(t->space_run);
    for (size_t i = 0; i < n;) {
        size_t run = 0;
        while (i + run < n && s[i + run] == ' ') run++;
        if (run >= 2 && t->has_space_run) {
            for (size_t k = 0; k < run_len; k++) /* the replacement's spaces become U+2581 too */
                charbuf_append(out, t->space_run[k] == ' ' ? SPACE_SYMBOL : t->space_run + k,
                               t->space_run[k] == ' ' ? 3 : 1);
            i += run;
        } else if (run > 0) {
            for (size_t k = 0; k < run; k++) charbuf_append(out, SPACE_SYMBOL, 3);
            i += run;
        } else {
            charbuf_append(out, s + i, 1);
            i++;
        }
    }
}

static int init(Tokenizer *t, const TokenizerSpec *spec, PosencError *err) {
    /* Hugging Face's lattice holds every piece (added ones are split off before) */
    static const int every[7] = {1, 1, 1, 1, 1, 1, 1};
    if (spm_init(t, spec, 0, err)) return -1;
    for (int id = 0; id < t->vocab_size; id++) /* of every piece, not only normal ones */
        if (t->scores[id] < t->min_score) t->min_score = t->scores[id];
    t->strip_right = spec->strip_right;
    t->has_space_run = spec->space_run != NULL;
    if (spec->space_run && strlen(spec->space_run) >= sizeof t->space_run)
        return posenc_error(err, "the replacement of space runs is too long");
    if (spec->space_run) strcpy(t->space_run, spec->space_run);
    t->metaspace_prepend = spec->metaspace_prepend;
    t->metaspace_split = spec->metaspace_split;
    t->strip_leading_space = spec->strip_leading_space;
    if (unigram_init(t, every, err)) return -1;
    added_pieces_init(t);
    lookup_byte_pieces(t);
    return 0;
}

static void free_hf_unigram(Tokenizer *t) {
    spm_free(t);
    unigram_free(t);
    added_pieces_free(t);
}

static int encode_section(const Tokenizer *t, const char *text, size_t start, size_t end,
                          IntBuf *out, TokScratch *s, PosencError *err) {
    spm_normalize(t, text + start, end - start, &s->norm);
    size_t n = t->strip_right ? strip_right(s->norm.v, s->norm.n) : s->norm.n;
    metaspace(t, s->norm.v, n, start == 0, &s->nfc);
    if (s->nfc.n >= INT32_MAX / 2) return posenc_error(err, "text too long to encode");
    const char *w = s->nfc.v;
    for (size_t a = 0; a < s->nfc.n;) {
        size_t b = s->nfc.n;
        if (t->metaspace_split) /* the next U+2581 after the first character */
            for (b = a + (size_t)spm_char_len((unsigned char)w[a]); b < s->nfc.n; b++)
                if (s->nfc.n - b >= 3 && memcmp(w + b, SPACE_SYMBOL, 3) == 0) break;
        if (b > s->nfc.n) b = s->nfc.n;
        s->spans.n = 0;
        unigram_segment(t, w + a, b - a, UNIGRAM_HUGGING_FACE, s);
        spm_spans_to_ids(t, w + a, &s->spans, out);
        a = b;
    }
    return 0;
}

static int encode(const Tokenizer *t, const char *text, size_t len, IntBuf *out, TokScratch *s,
                  PosencError *err) {
    return added_pieces_encode(t, text, len, encode_section, out, s, err);
}

static void append_surface(const Tokenizer *t, int id, const char *unk_surface, CharBuf *pool) {
    append_metaspace_text(pool, t->pieces[id]);
}

/* Every piece's surface; Metaspace's first space goes once, from the whole text. */
static void decode_text(const Tokenizer *t, const int *ids, int n, CharBuf *out) {
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < t->vocab_size) append_piece_surface(t, ids[i], 0, out);
}

const TokenizerOps tokenizer_hf_unigram_ops = {
    .init = init,
    .free = free_hf_unigram,
    .encode = encode,
    .append_surface = append_surface,
    .drops_space = strip_decoder_drops_space,
    .decode_text = decode_text,
    .splits_added = 1,
};
