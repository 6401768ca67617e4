/* Byte-level BPE (GPT-2 and the vocabularies built like it): added pieces
 * split the text, a pre-tokenizer pattern (pretok.c) splits the rest, then
 * each word's bytes are mapped to printable characters and merged by rank:
 * all occurrences of the best-ranked bigram per pass (encoder.py), or the
 * leftmost one at a time (Hugging Face).  Bytes that are not UTF-8 are kept as
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
    if (spec->pretok < 0 || spec->pretok >= PRETOK_COUNT)
        return posenc_error(err, "unknown pre-tokenizer %d", (int)spec->pretok);
    t->pretok = spec->pretok;
    t->ignore_merges = spec->ignore_merges;
    t->leftmost_merges = spec->leftmost_merges;
    t->nfc = spec->nfc;
    static const int user_only[7] = {[TOKEN_USER_DEFINED] = 1};
    static const int user_and_control[7] = {[TOKEN_USER_DEFINED] = 1, [TOKEN_CONTROL] = 1};
    piece_trie_build(&t->added_trie, t, user_only);
    piece_trie_build(&t->special_trie, t, user_and_control);
    for (int b = 0; b < 256; b++) { /* the byte's symbol, or its <0xXX> piece (HF_BPE/UNIGRAM) */
        char buf[8];
        int n = t->kind != TOKENIZER_GPT2 ? snprintf(buf, sizeof buf, "<0x%02X>", b)
                                            : utf8_encode(gpt2_byte_char((unsigned char)b), buf);
        t->byte_ids[b] = tokenizer_lookup(t, buf, (size_t)n);
    }
    t->fuse_unk = spec->fuse_unk;
    t->prepend_space = spec->prepend_space;
    t->strip_leading_space = spec->strip_leading_space;
    t->byte_fallback = spec->byte_fallback;
    for (int id = 0; id < t->vocab_size; id++)
        if (t->types[id] == TOKEN_UNKNOWN) t->unk_id = id;
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
    piece_trie_free(&t->added_trie);
    piece_trie_free(&t->special_trie);
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

/* One pre-token: its bytes as byte-level symbols, merged. */
static int encode_word(const Tokenizer *t, const char *w, size_t n, IntBuf *out, TokScratch *s,
                       PosencError *err) {
    if (t->ignore_merges) {
        s->norm.n = 0;
        for (size_t k = 0; k < n; k++) {
            char u[4];
            charbuf_append(&s->norm, u, (size_t)utf8_encode(gpt2_byte_char((unsigned char)w[k]), u));
        }
        int id = tokenizer_lookup(t, s->norm.v, s->norm.n);
        if (id >= 0) {
            intbuf_push(out, id);
            return 0;
        }
    }
    BpeSymbol *syms = scratch_symbols(s, n);
    for (size_t k = 0; k < n; k++) {
        unsigned char b = (unsigned char)w[k];
        if (t->byte_ids[b] < 0)
            return posenc_error(err, "byte 0x%02X has no token in the vocabulary", b);
        syms[k] = (BpeSymbol){(int)k - 1, (int)k + 1, t->byte_ids[b], (int)k, 1, 0};
    }
    syms[n - 1].next = -1;
    bpe_merge(syms, (int)n, pair_merge, t, !t->leftmost_merges, &s->heap);
    for (int k = 0; k >= 0; k = syms[k].next) intbuf_push(out, syms[k].id);
    return 0;
}

/* HF_BPE: the section with spaces as U+2581 (the Replace normalizer), after
 * one more (Llama 2's Prepend), one word of characters: a character's piece,
 * else its <0xXX> byte pieces, else <unk> (one for a run when fuse_unk);
 * then merged by rank. */
static int encode_chars(const Tokenizer *t, const char *text, size_t n, IntBuf *out,
                        TokScratch *s, PosencError *err) {
    s->nfc.n = 0;
    if (t->prepend_space && n > 0) charbuf_append(&s->nfc, "\xE2\x96\x81", 3);
    for (size_t i = 0; i < n; i++)
        charbuf_append(&s->nfc, text[i] == ' ' ? "\xE2\x96\x81" : text + i, text[i] == ' ' ? 3 : 1);
    const char *w = s->nfc.v;
    size_t len = s->nfc.n;
    BpeSymbol *syms = scratch_symbols(s, len);
    int k = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int c = utf8_decode((const unsigned char *)w + i, len - i, &cp);
        size_t clen = c ? (size_t)c : 1;
        int id = c ? tokenizer_lookup(t, w + i, clen) : -1, bytes_ok = t->byte_fallback;
        for (size_t b = 0; id < 0 && b < clen; b++) bytes_ok &= t->byte_ids[(unsigned char)w[i + b]] >= 0;
        if (id >= 0 || !bytes_ok) {
            if (id < 0 && t->unk_id < 0)
                return posenc_error(err, "byte 0x%02X has no token in the vocabulary", (unsigned char)w[i]);
            if (id < 0 && t->fuse_unk && k > 0 && syms[k - 1].id == t->unk_id) {
                syms[k - 1].len += (int)clen;
            } else {
                syms[k] = (BpeSymbol){k - 1, k + 1, id >= 0 ? id : t->unk_id, (int)i, (int)clen, id < 0};
                k++;
            }
        } else {
            for (size_t b = 0; b < clen; b++, k++)
                syms[k] = (BpeSymbol){k - 1, k + 1, t->byte_ids[(unsigned char)w[i + b]], (int)(i + b), 1, 0};
        }
        i += clen;
    }
    if (k == 0) return 0;
    syms[k - 1].next = -1;
    bpe_merge(syms, k, pair_merge, t, 0, &s->heap);
    for (int j = 0; j >= 0; j = syms[j].next) intbuf_push(out, syms[j].id);
    return 0;
}

/* Text between added pieces: normalized, then pre-tokens, each merged on its own. */
static int encode_section(const Tokenizer *t, const char *text, size_t start, size_t end,
                          IntBuf *out, TokScratch *s, PosencError *err) {
    if (t->kind == TOKENIZER_HF_BPE) return encode_chars(t, text + start, end - start, out, s, err);
    if (t->kind == TOKENIZER_HF_UNIGRAM)
        return hf_unigram_encode(t, text + start, end - start, start == 0, out, s, err);
    if (t->nfc) {
        text = nfc_normalize(text + start, end - start, &end, &s->nfc, &s->cps);
        start = 0;
    }
    s->spans.n = 0;
    pretokenize(t->pretok, text, start, end, &s->spans);
    for (size_t k = 0, a = start; k < s->spans.n; k++) {
        size_t b = (size_t)s->spans.v[k];
        if (encode_word(t, text + a, b - a, out, s, err)) return -1;
        a = b;
    }
    return 0;
}

/* Where the run of White_Space characters that ends at s[end] starts, no
 * earlier than `lo` (an lstrip token takes it). */
static size_t space_run_start(const char *s, size_t lo, size_t end) {
    while (end > lo) {
        size_t c = end - 1, clen;
        while (c > lo && ((unsigned char)s[c] & 0xC0) == 0x80 && end - c < 4) c--;
        if (utf8_class(s + c, end - c, &clen) != UCLASS_SPACE || c + clen != end) break;
        end = c;
    }
    return end;
}

/* Where the run of White_Space characters that starts at s[start] ends
 * (an rstrip token takes it). */
static size_t space_run_end(const char *s, size_t start, size_t len) {
    size_t clen;
    while (start < len && utf8_class(s + start, len - start, &clen) == UCLASS_SPACE) start += clen;
    return start;
}

/* Added pieces split the text first (the longest at the leftmost place
 * where one starts, as Hugging Face's added-token splitter does), taking
 * the whitespace beside them when they lstrip/rstrip; the pattern never
 * sees them, and the text on either side is split alone. */
int gpt2_encode(const Tokenizer *t, const char *text, size_t len, IntBuf *out, TokScratch *s,
                PosencError *err) {
    if (len >= INT32_MAX) return posenc_error(err, "text too long to encode");
    const PieceTrie *added = t->parse_special ? &t->special_trie : &t->added_trie;
    size_t section = 0;
    for (size_t i = 0; added->n_nodes && i < len; i++) {
        size_t m = piece_trie_longest(added, text + i, len - i);
        if (m == 0) continue;
        int id = tokenizer_lookup(t, text + i, m), flags = t->added_flags ? t->added_flags[id] : 0;
        size_t start = flags & ADDED_LSTRIP ? space_run_start(text, section, i) : i;
        size_t stop = flags & ADDED_RSTRIP ? space_run_end(text, i + m, len) : i + m;
        if (section < start && encode_section(t, text, section, start, out, s, err)) return -1;
        intbuf_push(out, id);
        section = stop;
        i = section - 1;
    }
    return section < len ? encode_section(t, text, section, len, out, s, err) : 0;
}
