/* A loaded model's one-token forward pass, shared by the GGUF and llama2.c
 * model targets. */
#ifndef POSENC_FUZZ_MODEL_RUN_H
#define POSENC_FUZZ_MODEL_RUN_H
#include "model/model.h"

/* Runs token `token` (modulo the vocabulary) at position 0 in a two-cell
 * context, as generate does (context and chunk checked first, the logits
 * after): with the checkpoint's scheme, then with the scheme `token`
 * picks on the checkpoint's parameters, as --pe NAME runs it. */
void fuzz_forward_one(const Model *m, unsigned token);
#endif
