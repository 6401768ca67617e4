#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tokenizer_load_llama2c(Tokenizer *t, const char *path, int expected_vocab, PosencError *err);

int tokenizer_load(Tokenizer *t, const char *path, int expected_vocab, PosencError *err) {
    memset(t, 0, sizeof *t);
    return tokenizer_load_llama2c(t, path, expected_vocab, err);
}

void tokenizer_free(Tokenizer *t) {
    if (t->pieces)
        for (int i = 0; i < t->vocab_size; i++) free(t->pieces[i]);
    free(t->pieces);
    free(t->scores);
    free(t->sorted);
    memset(t, 0, sizeof *t);
}

static const Tokenizer *sort_ctx; /* qsort has no context argument */

static int cmp_piece_ids(const void *a, const void *b) {
    return strcmp(sort_ctx->pieces[*(const int *)a], sort_ctx->pieces[*(const int *)b]);
}

/* Builds the lookup index and byte table once the pieces are in. */
void tokenizer_finish(Tokenizer *t) {
    t->sorted = mallocCheck((size_t)t->vocab_size * sizeof(int));
    for (int i = 0; i < t->vocab_size; i++) t->sorted[i] = i;
    sort_ctx = t;
    qsort(t->sorted, (size_t)t->vocab_size, sizeof(int), cmp_piece_ids);
    sort_ctx = NULL;
    for (int b = 0; b < 256; b++) {
        t->byte_pieces[b][0] = (char)b;
        t->byte_pieces[b][1] = '\0';
    }
}

int tokenizer_lookup(const Tokenizer *t, const char *piece, size_t len) {
    if (memchr(piece, '\0', len)) return -1; /* pieces are C strings */
    int lo = 0, hi = t->vocab_size - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const char *p = t->pieces[t->sorted[mid]];
        int c = strncmp(p, piece, len);
        if (c == 0 && p[len] != '\0') c = 1; /* p is longer: it sorts after */
        if (c == 0) return t->sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* "<0xAB>" -> 0xAB, or -1 when the piece is not a byte piece. */
static int byte_piece_value(const char *p) {
    unsigned v;
    char tail;
    if (strlen(p) == 6 && sscanf(p, "<0x%2X%c", &v, &tail) == 2 && tail == '>') return (int)v;
    return -1;
}

const char *tokenizer_decode(const Tokenizer *t, int prev, int token, size_t *len) {
    if (token < 0 || token >= t->vocab_size) {
        *len = 0;
        return "";
    }
    const char *p = t->pieces[token];
    if (prev == t->bos_id && p[0] == ' ') p++;
    int byte = byte_piece_value(p);
    if (byte >= 0) {
        *len = 1;
        return t->byte_pieces[byte];
    }
    *len = strlen(p);
    return p;
}

int tokenizer_encode_llama2c(const Tokenizer *t, const char *text, size_t len, int add_bos,
                             int add_eos, int *ids, int *n_ids, PosencError *err);

int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int add_bos, int add_eos,
                     int *ids, int *n_ids, PosencError *err) {
    return tokenizer_encode_llama2c(t, text, len, add_bos, add_eos, ids, n_ids, err);
}
