/* Byte-level BPE (TOKENIZER_GPT2: GPT-2 and the vocabularies built like
 * it): added pieces split the text (added.c), a pre-tokenizer pattern
 * (pretok.c) splits the rest, then each word's bytes are mapped to printable
 * characters and merged by rank (merge_ranks.c): all occurrences of the
 * best-ranked bigram per pass (encoder.py), or the leftmost one at a time
 * (Hugging Face).  Bytes that are not UTF-8 are kept as bytes and count as
 * "other" characters (the reference decodes them with surrogateescape, whose
 * lone surrogates are neither \s, \p{L} nor \p{N}). */
#include "tokenizer/tokenizer_impl.h"

/* bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other
 * 68 take the code points from 256 up, in byte order. */
static int byte_is_printable(int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

static uint32_t byte_char(unsigned char b) {
    if (byte_is_printable(b)) return b;
    uint32_t n = 0;
    for (int c = 0; c < b; c++) n += !byte_is_printable(c);
    return 256 + n;
}

/* -1 when cp is not in the map */
static int char_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable((int)cp) ? (int)cp : -1;
    uint32_t n = cp - 256; /* the n-th byte that is not printable */
    for (int b = 0; b < 256; b++)
        if (!byte_is_printable(b) && n-- == 0) return b;
    return -1;
}

static int init(Tokenizer *t, const TokenizerSpec *spec, PosencError *err) {
    if (spec->pretok < 0 || spec->pretok >= PRETOK_COUNT)
        return posenc_error(err, "unknown pre-tokenizer %d", (int)spec->pretok);
    t->pretok = spec->pretok;
    t->ignore_merges = spec->ignore_merges;
    t->leftmost_merges = spec->leftmost_merges;
    t->nfc = spec->nfc;
    added_pieces_init(t);
    for (int b = 0; b < 256; b++) {
        char symbol[4];
        int n = utf8_encode(byte_char((unsigned char)b), symbol);
        t->byte_ids[b] = tokenizer_lookup(t, symbol, (size_t)n);
    }
    return merge_ranks_init(t, spec, err);
}

static void free_gpt2(Tokenizer *t) {
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
            charbuf_append(&s->norm, u, (size_t)utf8_encode(byte_char((unsigned char)w[k]), u));
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
        char name[16];
        if (t->byte_ids[b] < 0)
            return posenc_error(err, "%s has no token in the vocabulary", byte_name(b, name));
        syms[k] = (BpeSymbol){(int)k - 1, (int)k + 1, t->byte_ids[b], (int)k, 1, 0};
    }
    syms[n - 1].next = -1;
    bpe_merge(syms, (int)n, merge_ranks_pair, t, !t->leftmost_merges, &s->heap);
    for (int k = 0; k >= 0; k = syms[k].next) intbuf_push(out, syms[k].id);
    return 0;
}

/* Text between added pieces: normalized, then pre-tokens, each merged on its own. */
static int encode_section(const Tokenizer *t, const char *text, size_t start, size_t end,
                          IntBuf *out, TokScratch *s, PosencError *err) {
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

static int encode(const Tokenizer *t, const char *text, size_t len, IntBuf *out, TokScratch *s,
                  PosencError *err) {
    return added_pieces_encode(t, text, len, encode_section, out, s, err);
}

/* The bytes the piece's byte-level characters stand for. */
static void append_surface(const Tokenizer *t, int id, const char *unk_surface, CharBuf *pool) {
    const char *p = t->pieces[id];
    for (size_t i = 0, n = strlen(p); i < n;) {
        uint32_t cp;
        int k = utf8_decode((const unsigned char *)p + i, n - i, &cp);
        int b = k > 0 ? char_byte(cp) : -1;
        if (b >= 0) {
            charbuf_push(pool, (char)b);
        } else { /* not a byte-level character: kept as written */
            charbuf_append(pool, p + i, k > 0 ? (size_t)k : 1);
        }
        i += k > 0 ? (size_t)k : 1;
    }
}

const TokenizerOps tokenizer_gpt2_ops = {
    .init = init,
    .free = free_gpt2,
    .encode = encode,
    .append_surface = append_surface,
    .splits_added = 1,
};
