/* GPT-2 byte-level BPE: the pre-tokenizer pattern of OpenAI's encoder.py
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * matched by hand over Unicode classes (unicode_tables.c), then each word's
 * bytes mapped to printable characters and merged by rank, all occurrences
 * of the best-ranked bigram per pass.  Bytes that are not UTF-8 are kept as
 * bytes and count as "other" characters (the reference decodes them with
 * surrogateescape, whose lone surrogates are neither \s, \p{L} nor \p{N}). */
#include "tokenizer/tokenizer_impl.h"

/* bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other
 * 68 take the code points from 256 up, in byte order. */
static int byte_is_printable(int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t gpt2_byte_char(unsigned char b) {
    if (byte_is_printable(b)) return b;
    uint32_t n = 0;
    for (int c = 0; c < b; c++) n += !byte_is_printable(c);
    return 256 + n;
}

int gpt2_char_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable((int)cp) ? (int)cp : -1;
    uint32_t n = cp - 256; /* the n-th byte that is not printable */
    for (int b = 0; b < 256; b++)
        if (!byte_is_printable(b) && n-- == 0) return b;
    return -1;
}

static uint32_t merge_slot(uint64_t key, uint32_t mask) {
    key *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(key >> 32) & mask;
}

static uint64_t merge_key(int left, int right) {
    return ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
}

int gpt2_init(Tokenizer *t, const TokenizerSpec *spec, PosencError *err) {
    for (int b = 0; b < 256; b++) {
        char buf[4];
        int n = utf8_encode(gpt2_byte_char((unsigned char)b), buf);
        t->byte_ids[b] = tokenizer_lookup(t, buf, (size_t)n);
    }
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)spec->n_merges) slots *= 2;
    t->merge_mask = slots - 1;
    t->merge_keys = callocCheck(slots, sizeof(uint64_t), "the merge table");
    t->merge_rank = mallocCheck(slots * sizeof(int), "the merge table");
    t->merge_result = mallocCheck(slots * sizeof(int), "the merge table");
    char *joined = mallocCheck(2 * (size_t)t->max_piece_len + 1, "a merge buffer");
    int rc = 0;
    for (int r = 0; r < spec->n_merges && rc == 0; r++) {
        const char *m = spec->merges[r], *sp = strchr(m, ' ');
        if (!sp || strchr(sp + 1, ' ') || sp == m || !sp[1]) {
            rc = posenc_error(err, "merge %d '%s' is not two tokens", r + 1, posenc_escape(m).s);
            break;
        }
        size_t la = (size_t)(sp - m), lb = strlen(sp + 1);
        int a = tokenizer_lookup(t, m, la), b = tokenizer_lookup(t, sp + 1, lb);
        int c = -1;
        if (a >= 0 && b >= 0) {
            memcpy(joined, m, la);
            memcpy(joined + la, sp + 1, lb);
            c = tokenizer_lookup(t, joined, la + lb);
        }
        if (c < 0) {
            rc = posenc_error(err, "merge %d '%s': %s is not in the vocabulary", r + 1,
                              posenc_escape(m).s,
                              a < 0 ? "its left token" : b < 0 ? "its right token"
                                                           : "the merged token");
            break;
        }
        uint64_t key = merge_key(a, b);
        uint32_t i = merge_slot(key, t->merge_mask);
        while (t->merge_keys[i] && t->merge_keys[i] != key) i = (i + 1) & t->merge_mask;
        t->merge_keys[i] = key; /* a repeated merge takes its last rank, as a dict would */
        t->merge_rank[i] = r;
        t->merge_result[i] = c;
    }
    free(joined);
    return rc;
}

void gpt2_free(Tokenizer *t) {
    free(t->merge_keys);
    free(t->merge_rank);
    free(t->merge_result);
}

static int pair_merge(const void *ctx, const BpeSymbol *a, const BpeSymbol *b,
                      double *priority, int *result) {
    const Tokenizer *t = ctx;
    uint64_t key = merge_key(a->id, b->id);
    for (uint32_t i = merge_slot(key, t->merge_mask); t->merge_keys[i];
         i = (i + 1) & t->merge_mask) {
        if (t->merge_keys[i] != key) continue;
        *priority = -(double)t->merge_rank[i];
        *result = t->merge_result[i];
        return 1;
    }
    return 0;
}

/* Class and byte length of the character at s (invalid bytes: other, 1). */
static UnicodeClass char_class(const char *s, size_t n, size_t *clen) {
    uint32_t cp;
    int k = utf8_decode((const unsigned char *)s, n, &cp);
    *clen = k > 0 ? (size_t)k : 1;
    return k > 0 ? unicode_class(cp) : UCLASS_OTHER;
}

/* End of the run of `cls` characters from i. */
static size_t run_end(const char *s, size_t n, size_t i, UnicodeClass cls) {
    size_t clen;
    while (i < n && char_class(s + i, n - i, &clen) == cls) i += clen;
    return i;
}

/* Length of the pre-token that starts at s[i] (the pattern's first
 * alternative that matches there). */
static size_t pretoken_len(const char *s, size_t n, size_t i) {
    const char *p = s + i;
    size_t rest = n - i, clen;
    if (p[0] == '\'' && rest >= 2) {
        if (p[1] && strchr("stmd", p[1])) return 2;
        if (rest >= 3 && (!memcmp(p + 1, "re", 2) || !memcmp(p + 1, "ve", 2) ||
                          !memcmp(p + 1, "ll", 2)))
            return 3;
    }
    size_t j = i + (p[0] == ' ' && rest > 1);
    UnicodeClass cls = char_class(s + j, n - j, &clen);
    if (cls != UCLASS_SPACE) return run_end(s, n, j, cls) - i; /* ` ?\p{L}+` and kin */
    size_t end = run_end(s, n, i, UCLASS_SPACE);
    if (end == n) return end - i;
    /* \s+(?!\S): leave the last space to lead the next word, unless it is alone */
    size_t last = i, k = i;
    while (k < end) {
        last = k;
        char_class(s + k, n - k, &clen);
        k += clen;
    }
    return last > i ? last - i : end - i;
}

int gpt2_encode(const Tokenizer *t, const char *text, size_t len, IntBuf *out, TokScratch *s,
                PosencError *err) {
    if (len >= INT32_MAX) return posenc_error(err, "text too long to encode");
    for (size_t i = 0; i < len;) {
        size_t w = pretoken_len(text, len, i);
        BpeSymbol *syms = scratch_symbols(s, w);
        for (size_t k = 0; k < w; k++) {
            unsigned char b = (unsigned char)text[i + k];
            if (t->byte_ids[b] < 0)
                return posenc_error(err, "byte 0x%02X has no token in the vocabulary", b);
            syms[k] = (BpeSymbol){(int)k - 1, (int)k + 1, t->byte_ids[b], (int)k, 1, 0};
        }
        syms[w - 1].next = -1;
        bpe_merge(syms, (int)w, pair_merge, t, 1, &s->heap);
        for (int k = 0; k >= 0; k = syms[k].next) intbuf_push(out, syms[k].id);
        i += w;
    }
    return 0;
}
