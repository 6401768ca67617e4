/* Everything needed to run a model: the chosen positional scheme, the KV
 * cache and the activation buffers.  Several contexts can share one Model,
 * which is how `--pe a,b,c` compares schemes on the same weights. */
#ifndef POSENC_CONTEXT_H
#define POSENC_CONTEXT_H
#include "model/kernels.h"
#include "model/kvcache.h"
#include "model/model.h"
#include "positional/pe.h"

/* Query rows per attention work item: a tile reads each cached key and
 * value once for all of them. */
#define ATT_TILE 4

typedef struct {
    int max_tokens;     /* largest chunk one forward call accepts */
    float *x;           /* (max_tokens, dim) residual stream */
    float *xb, *xb2;    /* (max_tokens, dim) */
    float *q;           /* (max_tokens, dim) */
    float *k, *v;       /* (max_tokens, kv_dim) new keys and values before an f16 cache */
    float *hb, *hb2;    /* (max_tokens, hidden_dim) */
    float *att;         /* (att_rows, ATT_TILE, n_ctx) attention scores, one tile per thread */
    int att_rows;
    float *logits;      /* (max_tokens, vocab_size) */
    MatmulScratch mm;
} ForwardState;

typedef struct {
    const Model *model;
    PositionalEncoding pe;
    KVCache cache;
    ForwardState state;
} Context;

/* n_ctx: cache cells; max_tokens: chunk capacity (<= n_ctx); the cache
 * holds f32. */
int context_build(Context *ctx, const Model *m, const PeParams *pe, int n_ctx, int max_tokens,
                  PosencError *err);
/* The same with the cache's element type: TENSOR_F32 or TENSOR_F16. */
int context_build_kv(Context *ctx, const Model *m, const PeParams *pe, int n_ctx, int max_tokens,
                     TensorType kv_type, PosencError *err);
void context_free(Context *ctx);

/* Runs tokens[0..n) at positions pos0, pos0+1, ... and appends them to the
 * cache.  Returns the logits: (n, vocab) when all_logits, else (1, vocab)
 * for the last token.  The caller guarantees 1 <= n <= max_tokens, room in
 * the cache, ids in range and positions the scheme can encode;
 * context_check_chunk() tells whether that holds. */
const float *context_forward(Context *ctx, const int *tokens, int n, int pos0, int all_logits);
int context_check_chunk(const Context *ctx, const int *tokens, int n, int pos0, PosencError *err);
/* 0 if `rows` rows of logits (the first at position pos0) are all finite;
 * else -1 with a line naming the model file and the position.  NaN or
 * infinite weights, or activations that overflow, end here instead of in
 * a sampler that cannot choose or a perplexity of nan. */
int context_check_logits(const Context *ctx, const float *logits, int rows, int pos0,
                         PosencError *err);
#endif
