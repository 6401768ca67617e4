/* Hugging Face's Unigram pipeline for one section of text between added
 * pieces, as tokenizer.json spells it for SentencePiece conversions:
 *   normalizer     Precompiled (the charsmap, as SentencePiece applies it),
 *                  Strip on the right, Replace " {2,}" by a space or U+2581
 *   pre_tokenizer  Metaspace: spaces become U+2581, one goes in front
 *                  (prepend_scheme), each U+2581 starts a pre-token (split)
 *   model          Viterbi per pre-token (unigram.c), unknown runs fused or
 *                  turned into byte pieces (byte_fallback) */
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

int hf_unigram_encode(const Tokenizer *t, const char *text, size_t len, int first, IntBuf *out,
                      TokScratch *s, PosencError *err) {
    spm_normalize(t, text, len, &s->norm);
    size_t n = t->strip_right ? strip_right(s->norm.v, s->norm.n) : s->norm.n;
    metaspace(t, s->norm.v, n, first, &s->nfc);
    if (s->nfc.n >= INT32_MAX / 2) return posenc_error(err, "text too long to encode");
    const char *w = s->nfc.v;
    for (size_t a = 0; a < s->nfc.n;) {
        size_t b = s->nfc.n;
        if (t->metaspace_split) /* the next U+2581 after the first character */
            for (b = a + (size_t)spm_char_len((unsigned char)w[a]); b < s->nfc.n; b++)
                if (s->nfc.n - b >= 3 && memcmp(w + b, SPACE_SYMBOL, 3) == 0) break;
        if (b > s->nfc.n) b = s->nfc.n;
        s->spans.n = 0;
        spm_unigram_encode(t, w + a, b - a, s);
        spm_spans_to_ids(t, w + a, &s->spans, out);
        a = b;
    }
    return 0;
}
