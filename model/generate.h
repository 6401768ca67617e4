/* Text generation: the prompt is prefilled as one chunk, then tokens are
 * decoded one at a time; when the cache is full a context shift makes room
 * (or generation stops, with CONTEXT_SHIFT_OFF).  Output follows llama2.c
 * byte for byte: the prompt is echoed, `steps` counts prompt tokens too,
 * BOS ends the text. */
#ifndef POSENC_GENERATE_H
#define POSENC_GENERATE_H
#include <stdio.h>

#include "model/context.h"
#include "model/sampler.h"
#include "model/shift.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char *prompt;
    int steps;          /* total tokens including the prompt; <= 0: the context size */
    int pos_offset;     /* position of the first token */
    int keep;           /* cells a context shift never discards (attention sinks) */
    ContextShiftMode shift;
    int trace;          /* one stderr line per step: query position, cache positions, shifts */
    int verbose_stats;  /* print timing to stderr */
} GenerateOptions;

/* The prompt's ids, BOS first when the vocabulary has one (*ids malloc'd).
 * -1 with a line naming the vocabulary's file when the prompt cannot be
 * encoded or encodes to nothing at all. */
int generate_encode_prompt(const Tokenizer *tok, const char *prompt, int **ids, int *n_ids,
                           PosencError *err);

/* Writes the text to out.  Returns 0, or -1 with a one-line reason. */
int generate_text(Context *ctx, const Tokenizer *tok, Sampler *sampler,
                  const GenerateOptions *opt, FILE *out, PosencError *err);

/* Writes a decoded piece, skipping lone bytes that are neither printable
 * nor whitespace (stray control bytes from byte-fallback tokens). */
void write_piece(FILE *out, const char *piece, size_t len);
#endif
