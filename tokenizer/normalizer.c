/* SentencePiece's normalizer, step for step as the library runs it: the
 * longest user-defined piece or charsmap rule at each position (the charsmap
 * is a Darts-clone double array whose values index NUL-terminated
 * replacements), spaces escaped to ▁, a dummy ▁ prefix (or suffix),
 * leading/trailing/repeated spaces removed. */
#include "tokenizer/tokenizer_impl.h"

#define SPACE_SYMBOL "\xE2\x96\x81" /* ▁ U+2581 */


/* Length of the longest charsmap key that prefixes s, and its value.
 * Positions outside the array (only in a corrupt file) end the search. */
static size_t charsmap_longest(const Tokenizer *t, const char *s, size_t n, uint32_t *value) {
    const uint32_t *units = t->charsmap_units;
    size_t n_units = t->n_charsmap_units, best = 0;
    if (n_units == 0) return 0;
    size_t pos = charsmap_unit_offset(units[0]);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        pos ^= c;
        if (pos >= n_units) break;
        uint32_t u = units[pos];
        if (charsmap_unit_label(u) != c) break;
        pos ^= charsmap_unit_offset(u);
        if (charsmap_unit_has_leaf(u)) {
            if (pos >= n_units) break;
            best = i + 1;
            *value = charsmap_unit_value(units[pos]);
        }
    }
    return best;
}

/* One normalizer step at s: the replacement text and the bytes consumed. */
static size_t normalize_prefix(const Tokenizer *t, const char *s, size_t n, const char **rep,
                               size_t *rep_len) {
    size_t k = piece_trie_longest(&t->user_trie, s, n);
    if (k > 0) { /* user-defined pieces pass through untouched */
        *rep = s;
        *rep_len = k;
        return k;
    }
    uint32_t value;
    k = charsmap_longest(t, s, n, &value);
    if (k > 0) {
        size_t avail = value < t->charsmap_text_size ? t->charsmap_text_size - value : 0;
        *rep = avail ? t->charsmap_text + value : "";
        *rep_len = avail ? strnlen(*rep, avail) : 0;
        return k;
    }
    uint32_t cp;
    int len = utf8_decode((const unsigned char *)s, n, &cp);
    if (len == 0) { /* one invalid byte becomes U+FFFD */
        *rep = "\xEF\xBF\xBD";
        *rep_len = 3;
        return 1;
    }
    *rep = s;
    *rep_len = (size_t)len;
    return (size_t)len;
}

static void add_space(const Tokenizer *t, CharBuf *out) {
    if (t->escape_whitespaces) charbuf_append(out, SPACE_SYMBOL, 3);
    else charbuf_append(out, " ", 1);
}

void spm_normalize(const Tokenizer *t, const char *text, size_t len, CharBuf *out) {
    out->n = 0;
    const char *rep;
    size_t rep_len;
    if (t->remove_extra_whitespaces) { /* leading spaces */
        while (len > 0) {
            size_t k = normalize_prefix(t, text, len, &rep, &rep_len);
            if (!(rep_len == 1 && rep[0] == ' ')) break;
            text += k;
            len -= k;
        }
    }
    if (len == 0) return;
    if (!t->treat_whitespace_as_suffix && t->add_dummy_prefix) add_space(t, out);
    int prev_space = t->remove_extra_whitespaces;
    while (len > 0) {
        size_t k = normalize_prefix(t, text, len, &rep, &rep_len);
        if (prev_space)
            while (rep_len > 0 && rep[0] == ' ') rep++, rep_len--;
        if (rep_len > 0) {
            for (size_t i = 0; i < rep_len; i++) {
                if (rep[i] == ' ' && t->escape_whitespaces) charbuf_append(out, SPACE_SYMBOL, 3);
                else charbuf_append(out, rep + i, 1);
            }
            prev_space = rep[rep_len - 1] == ' ';
        }
        text += k;
        len -= k;
        if (!t->remove_extra_whitespaces) prev_space = 0;
    }
    if (t->remove_extra_whitespaces) { /* trailing spaces */
        const char *sp = t->escape_whitespaces ? SPACE_SYMBOL : " ";
        size_t sp_len = t->escape_whitespaces ? 3 : 1;
        while (out->n >= sp_len && memcmp(out->v + out->n - sp_len, sp, sp_len) == 0)
            out->n -= sp_len;
    }
    if (t->treat_whitespace_as_suffix && t->add_dummy_prefix) add_space(t, out);
}
