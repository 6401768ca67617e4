/* The KV cache.  Each cell holds one token's keys (already rotated, for
 * RoPE) and values for every layer, and the token's position.  Positions —
 * not cell indices — decide what a query may see and every positional
 * computation, so moving cells around (context shift) stays correct as long
 * as the stored positions and the rotation of the keys agree. */
#ifndef POSENC_KVCACHE_H
#define POSENC_KVCACHE_H
#include "model/util.h"

typedef struct {
    int n_layers, kv_dim;
    int n_ctx;     /* cells */
    int n_used;    /* cells 0..n_used-1 are occupied */
    float *key;    /* (layer, n_ctx, kv_dim) */
    float *value;  /* (layer, n_ctx, kv_dim) */
    int *pos;      /* (n_ctx) position of each occupied cell */
    int *token;    /* (n_ctx) token of each occupied cell, for recomputation */
} KVCache;

int kv_cache_build(KVCache *kv, int n_layers, int kv_dim, int n_ctx, PosencError *err);
void kv_cache_free(KVCache *kv);
void kv_cache_clear(KVCache *kv);
/* Removes cells [first, first+count) and moves the later cells down, their
 * positions lowered by `count` so that positions stay contiguous.  Keys
 * are moved as they are: re-rotating them is the caller's business. */
void kv_cache_remove(KVCache *kv, int first, int count);
/* Writes the occupied positions as ranges, e.g. "0-3,260-516". */
void kv_cache_format_positions(const KVCache *kv, char *buf, size_t n);

static inline float *kv_cache_key(const KVCache *kv, int layer, int cell) {
    return kv->key + ((size_t)layer * kv->n_ctx + cell) * kv->kv_dim;
}
static inline float *kv_cache_value(const KVCache *kv, int layer, int cell) {
    return kv->value + ((size_t)layer * kv->n_ctx + cell) * kv->kv_dim;
}
#endif
