#include "model/kvcache.h"

#include <stdlib.h>
#include <string.h>

int kv_cache_build(KVCache *kv, int n_layers, int kv_dim, int n_ctx, PosencError *err) {
    memset(kv, 0, sizeof *kv);
    size_t n;
    if (n_ctx <= 0 || !size_mul3(&n, (size_t)n_layers, (size_t)n_ctx, (size_t)kv_dim) ||
        !size_mul(&n, n, sizeof(float)))
        return posenc_error(err, "KV cache of %d cells x %d layers x %d dims is too large",
                            n_ctx, n_layers, kv_dim);
    kv->key = malloc(n);
    kv->value = malloc(n);
    kv->pos = malloc((size_t)n_ctx * sizeof(int));
    if (!kv->key || !kv->value || !kv->pos) {
        kv_cache_free(kv);
        return posenc_error(err, "KV cache: out of memory for %d cells (%zu bytes per tensor)",
                            n_ctx, n);
    }
    kv->n_layers = n_layers;
    kv->kv_dim = kv_dim;
    kv->n_ctx = n_ctx;
    return 0;
}

void kv_cache_free(KVCache *kv) {
    free(kv->key);
    free(kv->value);
    free(kv->pos);
    memset(kv, 0, sizeof *kv);
}

void kv_cache_clear(KVCache *kv) { kv->n_used = 0; }
