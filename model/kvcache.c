#include "model/kvcache.h"

#include <stdlib.h>
#include <string.h>

int kv_cache_build(KVCache *kv, int n_layers, int kv_dim, int n_ctx, TensorType type,
                   PosencError *err) {
    memset(kv, 0, sizeof *kv);
    if (type != TENSOR_F32 && type != TENSOR_F16)
        return posenc_error(err, "KV cache type must be f32 or f16 (got %s)", tensor_type_name(type));
    size_t n;
    if (n_ctx <= 0 || !size_mul3(&n, (size_t)n_layers, (size_t)n_ctx, (size_t)kv_dim) ||
        !size_mul(&n, n, type == TENSOR_F16 ? 2 : 4))
        return posenc_error(err, "KV cache of %d cells x %d layers x %d dims is too large",
                            n_ctx, n_layers, kv_dim);
    kv->key = malloc(n);
    kv->value = malloc(n);
    kv->pos = malloc((size_t)n_ctx * sizeof(int));
    kv->token = malloc((size_t)n_ctx * sizeof(int));
    if (!kv->key || !kv->value || !kv->pos || !kv->token) {
        kv_cache_free(kv);
        char what[64];
        snprintf(what, sizeof what, "the KV cache of %d cells", n_ctx);
        return posenc_error_oom(err, 2, n, what);
    }
    kv->n_layers = n_layers;
    kv->kv_dim = kv_dim;
    kv->n_ctx = n_ctx;
    kv->type = type;
    return 0;
}

size_t kv_cache_bytes(int n_layers, int kv_dim, int n_ctx, TensorType type) {
    size_t tensor, cells, total; /* keys and values; positions and tokens */
    if (!size_mul3(&tensor, (size_t)n_layers, (size_t)n_ctx, (size_t)kv_dim) ||
        !size_mul3(&tensor, tensor, 2, type == TENSOR_F16 ? 2 : 4) ||
        !size_mul3(&cells, (size_t)n_ctx, 2, sizeof(int)) || !size_add(&total, tensor, cells))
        return SIZE_MAX;
    return total;
}

void kv_cache_free(KVCache *kv) {
    free(kv->key);
    free(kv->value);
    free(kv->pos);
    free(kv->token);
    memset(kv, 0, sizeof *kv);
}

void kv_cache_clear(KVCache *kv) { kv->n_used = 0; }

void kv_cache_remove(KVCache *kv, int first, int count) {
    int tail = kv->n_used - first - count;
    size_t row = kv_cache_row_bytes(kv);
    for (int l = 0; l < kv->n_layers; l++) {
        memmove(kv_cache_key(kv, l, first), kv_cache_key(kv, l, first + count), (size_t)tail * row);
        memmove(kv_cache_value(kv, l, first), kv_cache_value(kv, l, first + count), (size_t)tail * row);
    }
    memmove(kv->token + first, kv->token + first + count, (size_t)tail * sizeof(int));
    for (int i = 0; i < tail; i++) kv->pos[first + i] = kv->pos[first + count + i] - count;
    kv->n_used -= count;
}

void kv_cache_format_positions(const KVCache *kv, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < kv->n_used && at < n;) {
        int j = i;
        while (j + 1 < kv->n_used && kv->pos[j + 1] == kv->pos[j] + 1) j++;
        int w = i == j ? snprintf(buf + at, n - at, "%s%d", at ? "," : "", kv->pos[i])
                       : snprintf(buf + at, n - at, "%s%d-%d", at ? "," : "", kv->pos[i], kv->pos[j]);
        at += (size_t)w;
        i = j + 1;
    }
    if (kv->n_used == 0) snprintf(buf, n, "empty");
}

int kv_cache_type_from_name(const char *name, TensorType *out) {
    if (!strcmp(name, "f32")) *out = TENSOR_F32;
    else if (!strcmp(name, "f16")) *out = TENSOR_F16;
    else return -1;
    return 0;
}
