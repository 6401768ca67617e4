/* A loaded model's one-token forward pass, shared by the GGUF and llama2.c
 * model targets. */
#ifndef POSENC_FUZZ_MODEL_RUN_H
#define POSENC_FUZZ_MODEL_RUN_H
#include "model/model.h"

/* Builds a two-cell context with the checkpoint's own scheme and runs
 * token `token` (taken modulo the vocabulary) at position 0, as generate
 * does: the context and chunk are checked first, the logits after. */
void fuzz_forward_one(const Model *m, unsigned token);
#endif
