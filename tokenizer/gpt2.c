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

int gpt2_init(Tokenizer *t, const TokenizerSpec *spec, PosencError *err) {
    if (spec->pretok < 0 || spec->pretok >= PRETOK_COUNT)
        return posenc_error(err, "unknown pre-tokenizer %d", (int)spec->pretok);
    t->pretok = spec->pretok;
    t->ignore_merges = spec->ignore_merges;
    t->leftmost_merges = spec->leftmost_merges;
    t->nfc = spec->nfc;
    added_pieces_init(t);
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
    return merge_ranks_init(t, spec, err);
}

void gpt2_free(Tokenizer *t) {
    added_pieces_free(t);
    merge_ranks_free(t);
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
    bpe_merge(syms, (int)n, merge_ranks_pair, t, !t->leftmost_merges, &s->heap);
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
    bpe_merge(syms, k, merge_ranks_pair, t, 0, &s->heap);
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

int gpt2_encode(const Tokenizer *t, const char *text, size_t len, IntBuf *out, TokScratch *s,
                PosencError *err) {
    return added_pieces_encode(t, text, len, encode_section, out, s, err);
}
