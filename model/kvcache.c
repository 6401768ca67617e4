#include "model/kvcache.h"

#include <stdlib.h>
#include <string.h>

#include "model/kernels.h"

/* The types a cache can hold (kv_cache_store rounds to them), known on the
 * command line by their tensor_type_name. */
static const TensorType KV_TYPES[] = {TENSOR_F32, TENSOR_F16};
#define N_KV_TYPES (sizeof KV_TYPES / sizeof KV_TYPES[0])

static int kv_type_known(TensorType t) {
    for (size_t i = 0; i < N_KV_TYPES; i++)
        if (KV_TYPES[i] == t) return 1;
    return 0;
}

int kv_cache_build(KVCache *kv, int n_layers, int kv_dim, int n_ctx, TensorType type,
                   PosencError *err) {
    memset(kv, 0, sizeof *kv);
    if (!kv_type_known(type))
        return posenc_error(err, "KV cache type must be f32 or f16 (got %s)", tensor_type_name(type));
    size_t n;
    if (n_ctx <= 0 || !size_mul3(&n, (size_t)n_layers, (size_t)n_ctx, (size_t)kv_dim) ||
        !size_mul(&n, n, tensor_row_bytes(type, 1)))
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
        !size_mul3(&tensor, tensor, 2, tensor_row_bytes(type, 1)) ||
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

int kv_cache_append(KVCache *kv, const int *tokens, int n, int pos0) {
    int first = kv->n_used;
    memcpy(kv->token + first, tokens, (size_t)n * sizeof(int));
    for (int t = 0; t < n; t++) kv->pos[first + t] = pos0 + t;
    kv->n_used += n;
    return first;
}

/* Rows computed in the cells themselves (an f32 cache) need no copy. */
static void store_rows(const KVCache *kv, void *cells, const float *rows, size_t n) {
    if (cells == rows) return;
    if (kv->type == TENSOR_F16) convert_to_f16(cells, rows, n);
    else memcpy(cells, rows, n * sizeof(float));
}

void kv_cache_store(KVCache *kv, int layer, int first, int n, const float *k, const float *v) {
    size_t count = (size_t)n * kv->kv_dim;
    store_rows(kv, kv_cache_key(kv, layer, first), k, count);
    if (v) store_rows(kv, kv_cache_value(kv, layer, first), v, count);
}

void kv_cache_load_keys(const KVCache *kv, int layer, int first, int n, float *k) {
    const void *cells = kv_cache_key(kv, layer, first);
    if (cells != k) convert_to_f32(k, cells, kv->type, (size_t)n * kv->kv_dim);
}

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
    for (size_t i = 0; i < N_KV_TYPES; i++)
        if (!strcmp(name, tensor_type_name(KV_TYPES[i]))) {
            *out = KV_TYPES[i];
            return 0;
        }
    return -1;
}
