/* SentencePiece BPE (TOKENIZER_SPM_BPE): characters (user-defined pieces
 * whole and frozen) merged by piece score, highest first, leftmost among
 * equals; a pair merges when its concatenation is a normal, user-defined or
 * unused piece.  Unused pieces in the result are split back into the parts
 * they were last built from, recursively, as the library does. */
#include "tokenizer/tokenizer_impl.h"

typedef struct {
    const Tokenizer *t;
    const char *norm;
    IntBuf *rev; /* (unused piece id, left part length) pairs */
} BpeCtx;

static int *rev_find(IntBuf *rev, int id) {
    for (size_t i = 0; i < rev->n; i += 2)
        if (rev->v[i] == id) return &rev->v[i + 1];
    return NULL;
}

static int pair_piece(const void *ctx, const BpeSymbol *a, const BpeSymbol *b,
                      double *priority, int *result) {
    const BpeCtx *c = ctx;
    int id = tokenizer_lookup(c->t, c->norm + a->start, (size_t)(a->len + b->len));
    if (id < 0) return 0;
    int type = c->t->types[id];
    if (type != TOKEN_NORMAL && type != TOKEN_USER_DEFINED && type != TOKEN_UNUSED) return 0;
    *priority = c->t->scores[id];
    *result = id;
    if (type == TOKEN_UNUSED) { /* remembered at queue time, latest wins */
        int *left = rev_find(c->rev, id);
        if (left) {
            *left = a->len;
        } else {
            intbuf_push(c->rev, id);
            intbuf_push(c->rev, a->len);
        }
    }
    return 1;
}

static void push_span(IntBuf *spans, int start, int len, int id) {
    intbuf_push(spans, start);
    intbuf_push(spans, len);
    intbuf_push(spans, id);
}

static void resegment(const Tokenizer *t, const char *norm, int start, int len, TokScratch *s) {
    int id = tokenizer_lookup(t, norm + start, (size_t)len);
    if (id < 0) id = t->unk_id;
    int *left = t->types[id] == TOKEN_UNUSED ? rev_find(&s->rev, id) : NULL;
    if (!left) {
        push_span(&s->spans, start, len, id);
        return;
    }
    int l = *left;
    resegment(t, norm, start, l, s);
    resegment(t, norm, start + l, len - l, s);
}

static void segment(const Tokenizer *t, const char *norm, size_t len, TokScratch *s) {
    BpeSymbol *syms = scratch_symbols(s, len);
    int n = 0;
    for (size_t i = 0; i < len; n++) {
        size_t k = piece_trie_longest(&t->user_trie, norm + i, len - i);
        int frozen = k > 0;
        if (!frozen) {
            k = (size_t)spm_char_len((unsigned char)norm[i]);
            if (k > len - i) k = len - i;
        }
        syms[n] = (BpeSymbol){n - 1, n + 1, -1, (int)i, (int)k, frozen};
        i += k;
    }
    syms[n - 1].next = -1;
    s->rev.n = 0;
    BpeCtx ctx = {t, norm, &s->rev};
    bpe_merge(syms, n, pair_piece, &ctx, 0, &s->heap);
    for (int k = 0; k >= 0; k = syms[k].next) resegment(t, norm, syms[k].start, syms[k].len, s);
}

static int init(Tokenizer *t, const TokenizerSpec *spec, PosencError *err) {
    return spm_init(t, spec, 1, err);
}

static int encode(const Tokenizer *t, const char *text, size_t len, IntBuf *out, TokScratch *s,
                  PosencError *err) {
    return spm_encode(t, text, len, segment, out, s, err);
}

const TokenizerOps tokenizer_spm_bpe_ops = {
    .init = init,
    .free = spm_free,
    .encode = encode,
    .append_surface = spm_append_surface,
    .drops_space = spm_drops_space,
    .decode_text = spm_decode_text,
};
