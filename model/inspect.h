/* `-m inspect`: what a checkpoint holds (architecture, dimensions,
 * positional scheme and its parameters, embedded tokenizer, tensor table)
 * and the memory a run takes with n_ctx cache cells of kv_type, as aligned
 * text, or with `json` as one JSON object on one line. */
#ifndef POSENC_INSPECT_H
#define POSENC_INSPECT_H
#include <stdio.h>

#include "model/model.h"

void model_inspect(const Model *m, FILE *out, int json, int n_ctx, TensorType kv_type);
#endif
