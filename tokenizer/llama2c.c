/* llama2.c's tokenizer.bin and its encoder.  File layout: int32
 * max_token_length, then per piece: f32 score, int32 byte length, bytes.
 * The count is not stored: it is whatever the file holds. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

void tokenizer_finish(Tokenizer *t);

#define MAX_PIECE_BYTES 4096

/* Parses the records once to count them, then again to store them. */
static int read_pieces(Tokenizer *t, const uint8_t *data, size_t size, const char *path,
                       PosencError *err) {
    size_t off = 4;
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        off = 4;
        for (int i = 0; off < size; i++) {
            if (size - off < 8)
                return posenc_error(err, "%s: truncated record header for piece %d", path, i);
            float score;
            int32_t len;
            memcpy(&score, data + off, 4);
            memcpy(&len, data + off + 4, 4);
            off += 8;
            if (len < 0 || len > MAX_PIECE_BYTES)
                return posenc_error(err, "%s: piece %d has invalid length %d", path, i, len);
            if ((size_t)len > size - off)
                return posenc_error(err, "%s: piece %d (%d bytes) runs past the end of the file",
                                    path, i, len);
            if (pass == 1) {
                t->scores[i] = score;
                t->pieces[i] = mallocCheck((size_t)len + 1);
                memcpy(t->pieces[i], data + off, (size_t)len);
                t->pieces[i][len] = '\0';
                if (len > t->max_piece_len) t->max_piece_len = len;
            }
            off += (size_t)len;
            if (pass == 0) n++;
        }
        if (pass == 0) {
            if (n == 0) return posenc_error(err, "%s: tokenizer has no pieces", path);
            t->vocab_size = n;
            t->pieces = callocCheck((size_t)n, sizeof(char *));
            t->scores = mallocCheck((size_t)n * sizeof(float));
        }
    }
    return 0;
}

int tokenizer_load_llama2c(Tokenizer *t, const char *path, int expected_vocab, PosencError *err) {
    MappedFile f;
    if (mapped_file_open(&f, path, err)) return -1;
    int rc = f.size < 4 ? posenc_error(err, "%s: truncated tokenizer file", path)
                        : read_pieces(t, f.data, f.size, path, err);
    mapped_file_close(&f);
    if (rc == 0 && expected_vocab > 0 && t->vocab_size != expected_vocab)
        rc = posenc_error(err, "%s: tokenizer has %d pieces but the model's vocabulary is %d",
                          path, t->vocab_size, expected_vocab);
    if (rc) {
        tokenizer_free(t);
        return -1;
    }
    t->kind = TOKENIZER_LLAMA2C;
    t->bos_id = t->vocab_size > 1 ? 1 : -1; /* llama2.c's fixed ids */
    t->eos_id = t->vocab_size > 2 ? 2 : -1;
    tokenizer_finish(t);
    return 0;
}

/* Splits text into UTF-8 code points the way llama2.c does (a lead byte and
 * up to three continuation bytes), maps each to its piece, or to byte
 * pieces (id = byte + 3) when the vocabulary lacks it. */
static int initial_tokens(const Tokenizer *t, const char *text, size_t len, int *ids) {
    int n = 0;
    size_t i = 0;
    while (i < len) {
        size_t start = i++;
        while (i < len && ((unsigned char)text[i] & 0xC0) == 0x80 && i - start < 4) i++;
        int id = tokenizer_lookup(t, text + start, i - start);
        if (id >= 0) {
            ids[n++] = id;
        } else {
            for (size_t b = start; b < i; b++) ids[n++] = (unsigned char)text[b] + 3;
        }
    }
    return n;
}

/* Greedy merges: repeatedly fuse the adjacent pair whose concatenation is
 * the highest-scoring piece (leftmost on ties) until no pair is a piece. */
static int merge_pairs(const Tokenizer *t, int *ids, int n) {
    char *buf = mallocCheck((size_t)t->max_piece_len * 2 + 1);
    for (;;) {
        float best_score = -1e10f;
        int best_id = -1, best_at = -1;
        for (int i = 0; i + 1 < n; i++) {
            size_t la = strlen(t->pieces[ids[i]]), lb = strlen(t->pieces[ids[i + 1]]);
            memcpy(buf, t->pieces[ids[i]], la);
            memcpy(buf + la, t->pieces[ids[i + 1]], lb);
            int id = tokenizer_lookup(t, buf, la + lb);
            if (id >= 0 && t->scores[id] > best_score) {
                best_score = t->scores[id];
                best_id = id;
                best_at = i;
            }
        }
        if (best_at < 0) break;
        ids[best_at] = best_id;
        memmove(ids + best_at + 1, ids + best_at + 2, (size_t)(n - best_at - 2) * sizeof(int));
        n--;
    }
    free(buf);
    return n;
}

int tokenizer_encode_llama2c(const Tokenizer *t, const char *text, size_t len, int add_bos,
                             int add_eos, int *ids, int *n_ids, PosencError *err) {
    int n = 0;
    if (add_bos && t->bos_id >= 0) ids[n++] = t->bos_id;
    /* llama2.c always prepends a space ("dummy prefix") to non-empty text. */
    if (len > 0) {
        int space = tokenizer_lookup(t, " ", 1);
        if (space < 0) return posenc_error(err, "tokenizer has no piece for the space character");
        ids[n++] = space;
    }
    int body = initial_tokens(t, text, len, ids + n);
    for (int i = n; i < n + body; i++)
        if (ids[i] >= t->vocab_size)
            return posenc_error(err, "tokenizer has no byte fallback for byte 0x%02X",
                                ids[i] - 3);
    n += body;
    n = merge_pairs(t, ids, n);
    if (add_eos && t->eos_id >= 0) ids[n++] = t->eos_id;
    *n_ids = n;
    return 0;
}
