/* The KV cache.  Each cell holds one token's keys (already rotated, for
 * RoPE) and values for every layer, and the token's position.  Positions —
 * not cell indices — decide what a query may see and every positional
 * computation, so moving cells around (context shift) stays correct as long
 * as the stored positions and the rotation of the keys agree.
 *
 * Keys and values are f32 or f16 (half the memory and bandwidth: each
 * element rounded to 11 significant bits, ~2.4e-4 relative).  They are
 * stored head by head: one KV head's cells lie end to end, so attention,
 * which reads one head at a time, streams them instead of picking
 * head_size elements out of every kv_dim (measured on the 110M shape at
 * 4096 cells: see docs/performance.md, "The cache's layout"). */
#ifndef POSENC_KVCACHE_H
#define POSENC_KVCACHE_H
#include "base/tensor.h"
#include "base/util.h"

typedef struct {
    int n_layers, kv_dim;
    int head_size;   /* kv_dim / head_size KV heads */
    int n_ctx;       /* cells */
    int n_used;      /* cells 0..n_used-1 are occupied */
    TensorType type; /* TENSOR_F32 or TENSOR_F16 */
    void *key;       /* (layer, kv_dim / head_size, n_ctx, head_size) of type */
    void *value;     /* (layer, kv_dim / head_size, n_ctx, head_size) of type */
    void *key_grouped; /* (layer, kv_dim / head_size, n_ctx, head_size) of type: Self-Extend's
                          second key store, each key rotated at its grouped position; NULL
                          without Self-Extend (kv_cache_group_keys) */
    int *pos;        /* (n_ctx) position of each occupied cell */
    int *token;      /* (n_ctx) token of each occupied cell, for recomputation */
} KVCache;

int kv_cache_build(KVCache *kv, int n_layers, int kv_dim, int head_size, int n_ctx, TensorType type,
                   PosencError *err);
void kv_cache_free(KVCache *kv);
/* Allocates (on) or frees the grouped keys: as many bytes again as the
 * keys, the cache's memory cost of Self-Extend.  0, or -1 + err. */
int kv_cache_group_keys(KVCache *kv, int on, PosencError *err);
/* Bytes kv_cache_build allocates for these sizes; SIZE_MAX on overflow. */
size_t kv_cache_bytes(int n_layers, int kv_dim, int n_ctx, TensorType type);
void kv_cache_clear(KVCache *kv);
/* Appends a chunk's n cells: their tokens and the positions pos0,
 * pos0+1, ...  Returns the first of them; the caller has checked that they
 * fit.  Their keys and values are stored layer by layer (kv_cache_store)
 * as the forward pass computes them, after their positions are in place
 * for attention to mask by. */
int kv_cache_append(KVCache *kv, const int *tokens, int n, int pos0);
/* Stores the keys and values of cells [first, first+n) for one layer from
 * f32 rows (n, kv_dim), rounded to the cache's type, each head's part in
 * that head's cells.  v NULL stores keys only (a shift re-rotating them). */
void kv_cache_store(KVCache *kv, int layer, int first, int n, const float *k, const float *v);
/* The same into the grouped keys (kv_cache_group_keys), and back. */
void kv_cache_store_grouped(KVCache *kv, int layer, int first, int n, const float *k);
void kv_cache_load_grouped(const KVCache *kv, int layer, int first, int n, float *k);
/* The keys (values) of cells [first, first+n) of one layer as f32 rows
 * (n, kv_dim): with kv_cache_store, what changing cached keys needs
 * whatever the type. */
void kv_cache_load_keys(const KVCache *kv, int layer, int first, int n, float *k);
void kv_cache_load_values(const KVCache *kv, int layer, int first, int n, float *v);
/* Removes cells [first, first+count) and moves the later cells down, their
 * positions lowered by `count` so that positions stay contiguous.  Keys
 * are moved as they are: re-rotating them is the caller's business. */
void kv_cache_remove(KVCache *kv, int first, int count);
/* Writes the occupied positions as ranges, e.g. "0-3,260-516"; positions
 * held by several cells each (group attention) as "0-15 x2". */
void kv_cache_format_positions(const KVCache *kv, char *buf, size_t n);
/* "f32" | "f16" to the cache type; -1 for anything else. */
int kv_cache_type_from_name(const char *name, TensorType *out);

/* The (n_ctx, head_size) keys or values of one KV head of one layer. */
static inline size_t kv_cache_head_offset(const KVCache *kv, int layer, int head) {
    size_t heads = (size_t)(kv->kv_dim / kv->head_size);
    return ((size_t)layer * heads + (size_t)head) * kv->n_ctx * tensor_row_bytes(kv->type, (size_t)kv->head_size);
}
static inline void *kv_cache_head_keys(const KVCache *kv, int layer, int head) {
    return (char *)kv->key + kv_cache_head_offset(kv, layer, head);
}
static inline void *kv_cache_head_grouped(const KVCache *kv, int layer, int head) {
    return (char *)kv->key_grouped + kv_cache_head_offset(kv, layer, head);
}
static inline void *kv_cache_head_values(const KVCache *kv, int layer, int head) {
    return (char *)kv->value + kv_cache_head_offset(kv, layer, head);
}
#endif
