/* `-m inspect`: what a checkpoint holds (architecture, dimensions,
 * positional scheme and its parameters, embedded tokenizer, tensor table)
 * as aligned text, or with `json` as one JSON object on one line. */
#ifndef POSENC_INSPECT_H
#define POSENC_INSPECT_H
#include <stdio.h>

#include "model/model.h"

/* pe: the scheme that would run (the checkpoint's after overrides). */
void model_inspect(const Model *m, const PeParams *pe, FILE *out, int json);
/* A GGUF without tensors (a vocab-only file): its header and vocabulary. */
void gguf_inspect_vocab(const GgufFile *g, FILE *out, int json);
#endif
