/* llama2.c's tokenizer.bin and its kind (TOKENIZER_LLAMA2C): llama2.c's
 * encoder and decoder.  File layout: int32 max_token_length, then per piece:
 * f32 score, int32 byte length, bytes.  The count is not stored: it is
 * whatever the file holds. */
#include "tokenizer/tokenizer_impl.h"

/* Walks the records: the first pass (fill = 0) validates and counts them,
 * the second points the spec's arrays into the mapping. */
static int walk_records(const uint8_t *data, size_t size, TokenizerSpec *spec, int fill,
                        PosencError *err) {
    size_t off = 4;
    int n = 0;
    for (; off < size; n++) {
        if (size - off < 8) return posenc_error(err, "truncated record header for piece %d", n);
        float score;
        int32_t len;
        memcpy(&score, data + off, 4);
        memcpy(&len, data + off + 4, 4);
        off += 8;
        if (len < 0 || len > TOKENIZER_MAX_PIECE_BYTES)
            return posenc_error(err, "piece %d has invalid length %d", n, len);
        if ((size_t)len > size - off)
            return posenc_error(err, "piece %d (%d bytes) runs past the end of the file", n, len);
        if (fill) {
            ((const char **)spec->pieces)[n] = (const char *)data + off;
            ((uint32_t *)spec->piece_lens)[n] = (uint32_t)len;
            ((float *)spec->scores)[n] = score;
        }
        off += (size_t)len;
    }
    if (n == 0) return posenc_error(err, "tokenizer has no pieces");
    spec->n_pieces = n;
    return 0;
}

static int read_records(const uint8_t *data, size_t size, TokenizerSpec *spec,
                        PosencError *err) {
    if (walk_records(data, size, spec, 0, err)) return -1;
    size_t n = (size_t)spec->n_pieces;
    spec->pieces = malloc_or_exit(n * sizeof(char *), "the pieces");
    spec->piece_lens = malloc_or_exit(n * sizeof(uint32_t), "the piece lengths");
    spec->scores = malloc_or_exit(n * sizeof(float), "the piece scores");
    return walk_records(data, size, spec, 1, err);
}

int llama2c_read(Tokenizer *t, const char *path, PosencError *err) {
    MappedFile f;
    if (mapped_file_open(&f, path, err)) return -1;
    TokenizerSpec spec = {.kind = TOKENIZER_LLAMA2C};
    PosencError e;
    int rc = f.size < 4 ? posenc_error(&e, "truncated tokenizer file")
                        : read_records(f.data, f.size, &spec, &e);
    if (rc == 0) {
        spec.bos_id = spec.n_pieces > 1 ? 1 : -1; /* llama2.c's fixed ids */
        spec.eos_id = spec.n_pieces > 2 ? 2 : -1;
        rc = tokenizer_build(t, &spec, &e);
    }
    if (rc) posenc_error(err, "%s: %s", path, e.msg);
    free((void *)spec.pieces);
    free((void *)spec.piece_lens);
    free((void *)spec.scores);
    mapped_file_close(&f);
    return rc;
}

typedef struct {
    const Tokenizer *t;
    char *buf; /* 2 * max_piece_len + 1 */
} PairCtx;

/* llama2.c merges a pair when its concatenation is a piece scoring above
 * -1e10 (its initial best score). */
static int pair_piece(const void *ctx, const BpeSymbol *a, const BpeSymbol *b,
                      double *priority, int *result) {
    const PairCtx *c = ctx;
    const char *pa = c->t->pieces[a->id], *pb = c->t->pieces[b->id];
    size_t la = (size_t)c->t->piece_lens[a->id], lb = (size_t)c->t->piece_lens[b->id];
    memcpy(c->buf, pa, la);
    memcpy(c->buf + la, pb, lb);
    int id = tokenizer_lookup(c->t, c->buf, la + lb);
    if (id < 0 || !(c->t->scores[id] > -1e10f)) return 0;
    *priority = c->t->scores[id];
    *result = id;
    return 1;
}

static void add_symbol(BpeSymbol *syms, int *n, int id, int start, int len) {
    syms[*n] = (BpeSymbol){*n - 1, *n + 1, id, start, len, 0};
    (*n)++;
}

static int encode(const Tokenizer *t, const char *text, size_t len, IntBuf *out, TokScratch *s,
                  PosencError *err) {
    if (len == 0) return 0;
    if (len >= INT32_MAX) return posenc_error(err, "text too long to encode");
    /* llama2.c always prepends a space ("dummy prefix") to non-empty text. */
    int space = tokenizer_lookup(t, " ", 1);
    if (space < 0) return posenc_error(err, "tokenizer has no piece for the space character");
    BpeSymbol *syms = scratch_symbols(s, len + 1);
    int n = 0;
    add_symbol(syms, &n, space, -1, 1);
    /* Code points as llama2.c splits them (a lead byte and up to three
     * continuation bytes), or their bytes as <0xXX> pieces (id = byte + 3). */
    size_t i = 0;
    while (i < len) {
        size_t start = i++;
        while (i < len && ((unsigned char)text[i] & 0xC0) == 0x80 && i - start < 4) i++;
        int id = tokenizer_lookup(t, text + start, i - start);
        if (id >= 0) {
            add_symbol(syms, &n, id, (int)start, (int)(i - start));
            continue;
        }
        for (size_t b = start; b < i; b++) {
            int byte_id = (unsigned char)text[b] + 3;
            char name[16];
            if (byte_id >= t->vocab_size)
                return posenc_error(err, "tokenizer has no byte fallback for %s",
                                    byte_name((unsigned char)text[b], name));
            add_symbol(syms, &n, byte_id, (int)b, 1);
        }
    }
    syms[n - 1].next = -1;
    PairCtx ctx = {t, malloc_or_exit((size_t)t->max_piece_len * 2 + 1, "a merge buffer")};
    bpe_merge(syms, n, pair_piece, &ctx, 0, &s->heap);
    free(ctx.buf);
    for (int k = 0; k >= 0; k = syms[k].next) intbuf_push(out, syms[k].id);
    return 0;
}

/* <0xXX> pieces are their byte; the rest is the piece as written. */
static void append_surface(const Tokenizer *t, int id, const char *unk_surface, CharBuf *pool) {
    const char *p = t->pieces[id];
    int byte = byte_piece_value(p);
    if (byte >= 0) charbuf_push(pool, (char)byte);
    else charbuf_append(pool, p, strlen(p));
}

/* llama2.c drops a piece's leading space after BOS only. */
static int drops_space(const Tokenizer *t, int prev, int token) {
    return prev == t->bos_id && t->pieces[token][0] == ' ';
}

const TokenizerOps tokenizer_llama2c_ops = {
    .encode = encode,
    .append_surface = append_surface,
    .drops_space = drops_space,
    .first_repeat_wins = 1,
};
