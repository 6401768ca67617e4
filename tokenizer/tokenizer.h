/* Text <-> token ids.  One interface over the vocabularies posenc reads:
 * llama2.c tokenizer.bin (score-ordered BPE, as llama2.c encodes it), and —
 * from the tokenizer modules — SentencePiece models and GPT-2 byte-level BPE. */
#ifndef POSENC_TOKENIZER_H
#define POSENC_TOKENIZER_H
#include <stddef.h>

#include "model/util.h"

typedef enum {
    TOKENIZER_LLAMA2C,   /* llama2.c tokenizer.bin */
    TOKENIZER_SPM_BPE,   /* SentencePiece BPE */
    TOKENIZER_SPM_UNIGRAM,
    TOKENIZER_GPT2,      /* byte-level BPE */
} TokenizerKind;

typedef struct {
    TokenizerKind kind;
    int vocab_size;
    char **pieces;        /* (vocab_size) NUL-terminated piece text */
    float *scores;        /* (vocab_size) merge priority / log-probability */
    int bos_id, eos_id;   /* -1 when the vocabulary has none */
    int *sorted;          /* (vocab_size) ids ordered by piece, for lookup */
    int max_piece_len;
    char byte_pieces[256][2]; /* single bytes, for <0xXX> pieces */
} Tokenizer;

/* Reads a tokenizer file.  expected_vocab > 0 must match its size. */
int tokenizer_load(Tokenizer *t, const char *path, int expected_vocab, PosencError *err);
void tokenizer_free(Tokenizer *t);

/* Encodes len bytes of text.  ids must hold len + 3 entries (BOS, dummy
 * prefix, EOS); *n_ids receives the count.  Returns 0 or -1 + err. */
int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int add_bos, int add_eos,
                     int *ids, int *n_ids, PosencError *err);

/* The bytes that `token` contributes to the text when it follows `prev`
 * (llama2.c's rule: the leading space of the first piece after BOS is
 * dropped; <0xXX> pieces are raw bytes).  NUL-terminated; *len excludes it. */
const char *tokenizer_decode(const Tokenizer *t, int prev, int token, size_t *len);

/* Id of an exact piece, or -1. */
int tokenizer_lookup(const Tokenizer *t, const char *piece, size_t len);
#endif
