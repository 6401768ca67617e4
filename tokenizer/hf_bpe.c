/* tokenizer.json BPE over characters with byte fallback (TOKENIZER_HF_BPE:
 * Gemma, Llama 2's tokenizer.json): added pieces split the text (added.c);
 * each section has its spaces as U+2581 (the Replace normalizer), after one
 * more in front (Llama 2's Prepend), and is one word of characters: a
 * character's piece, else its <0xXX> byte pieces, else <unk> (one for a run
 * when fuse_unk), merged by rank (merge_ranks.c).  Decoding keeps the text
 * of control and unknown pieces, joins byte pieces (ByteFallback) and drops
 * the text's first space under Llama 2's Strip. */
#include "tokenizer/tokenizer_impl.h"

static int init(Tokenizer *t, const TokenizerSpec *spec, PosencError *err) {
    t->fuse_unk = spec->fuse_unk;
    t->prepend_space = spec->prepend_space;
    t->strip_leading_space = spec->strip_leading_space;
    t->byte_fallback = spec->byte_fallback;
    added_pieces_init(t);
    lookup_byte_pieces(t);
    for (int id = 0; id < t->vocab_size; id++)
        if (t->types[id] == TOKEN_UNKNOWN) t->unk_id = id;
    return merge_ranks_init(t, spec, err);
}

static void free_hf_bpe(Tokenizer *t) {
    added_pieces_free(t);
    merge_ranks_free(t);
}

static int encode_section(const Tokenizer *t, const char *text, size_t start, size_t end,
                          IntBuf *out, TokScratch *s, PosencError *err) {
    size_t n = end - start;
    text += start;
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
            char name[16];
            if (id < 0 && t->unk_id < 0)
                return posenc_error(err, "%s has no token in the vocabulary",
                                    byte_name((unsigned char)w[i], name));
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

static int encode(const Tokenizer *t, const char *text, size_t len, IntBuf *out, TokScratch *s,
                  PosencError *err) {
    return added_pieces_encode(t, text, len, encode_section, out, s, err);
}

/* Byte pieces are their byte; the others, control and unknown pieces too,
 * their text with U+2581 as a space. */
static void append_surface(const Tokenizer *t, int id, const char *unk_surface, CharBuf *pool) {
    if (t->types[id] == TOKEN_BYTE) charbuf_push(pool, (char)byte_piece_value(t->pieces[id]));
    else append_metaspace_text(pool, t->pieces[id]);
}

/* Runs of byte pieces joined; Strip applies once, to the whole text. */
static void decode_text(const Tokenizer *t, const int *ids, int n, CharBuf *out) {
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size) continue;
        if (t->types[ids[i]] == TOKEN_BYTE) i = append_byte_run(t, ids, i, n, out) - 1;
        else append_piece_surface(t, ids[i], 0, out);
    }
}

const TokenizerOps tokenizer_hf_bpe_ops = {
    .init = init,
    .free = free_hf_bpe,
    .encode = encode,
    .append_surface = append_surface,
    .drops_space = strip_decoder_drops_space,
    .decode_text = decode_text,
    .splits_added = 1,
};
