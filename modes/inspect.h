/* `-m inspect`: what a checkpoint holds (architecture, dimensions,
 * positional scheme and its parameters, embedded tokenizer, tensor table)
 * and the memory a run takes with n_ctx cache cells of kv_type, as aligned
 * text, or with `json` as one JSON object on one line. */
#ifndef POSENC_INSPECT_H
#define POSENC_INSPECT_H
#include <stdio.h>

#include "model/model.h"

/* pe: the scheme that would run (the checkpoint's after overrides), layers
 * its per-layer table (model_layers_for and the overrides); the memory
 * section is for a context of n_ctx cells of kv_type. */
void model_inspect(const Model *m, const PeParams *pe, const LayerAttention *layers, FILE *out,
                   int json, int n_ctx, TensorType kv_type);
/* A GGUF without tensors (a vocab-only file): its header and vocabulary. */
void gguf_inspect_vocab(const GgufFile *g, FILE *out, int json);
#endif
