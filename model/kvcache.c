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

int kv_cache_build(KVCache *kv, int n_layers, int kv_dim, int head_size, int n_ctx, TensorType type,
                   PosencError *err) {
    memset(kv, 0, sizeof *kv);
    if (!kv_type_known(type))
        return posenc_error(err, "KV cache type must be f32 or f16 (got %s)", tensor_type_name(type));
    if (head_size <= 0 || kv_dim % head_size)
        return posenc_error(err, "KV cache rows of %d are not whole heads of %d", kv_dim, head_size);
    size_t n;
    if (n_ctx <= 0 || !size_mul3(&n, (size_t)n_layers, (size_t)n_ctx, (size_t)kv_dim) ||
        !size_mul(&n, n, tensor_row_bytes(type, 1)))
        return posenc_error(err, "KV cache of %d cells x %d layers x %d dims is too large",
                            n_ctx, n_layers, kv_dim);
    kv->key = malloc_lines(n);
    kv->value = malloc_lines(n);
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
    kv->head_size = head_size;
    kv->n_ctx = n_ctx;
    kv->type = type;
    return 0;
}

int kv_cache_group_keys(KVCache *kv, int on, PosencError *err) {
    if (!on || kv->key_grouped) {
        if (!on) free(kv->key_grouped), kv->key_grouped = NULL;
        return 0;
    }
    /* key's size, which kv_cache_build checked for overflow */
    size_t n = (size_t)kv->n_layers * kv->n_ctx * kv->kv_dim * tensor_row_bytes(kv->type, 1);
    if (!(kv->key_grouped = malloc_lines(n))) {
        char what[80];
        snprintf(what, sizeof what, "Self-Extend's grouped keys of %d cells", kv->n_ctx);
        return posenc_error_oom(err, 1, n, what);
    }
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
    free(kv->key_grouped);
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

static size_t head_row_bytes(const KVCache *kv) { return tensor_row_bytes(kv->type, (size_t)kv->head_size); }

/* Rows (n, kv_dim) into cells [first, first+n) of every head of a layer's
 * keys or values (base: the layer's first head). */
static void store_rows(const KVCache *kv, char *base, const float *rows, int first, int n) {
    size_t hs = (size_t)kv->head_size, row = head_row_bytes(kv);
    for (int h = 0; h < kv->kv_dim / kv->head_size; h++)
        for (int t = 0; t < n; t++) {
            char *cell = base + ((size_t)h * kv->n_ctx + (size_t)(first + t)) * row;
            const float *src = rows + (size_t)t * kv->kv_dim + (size_t)h * hs;
            if (kv->type == TENSOR_F16) convert_to_f16((uint16_t *)cell, src, hs);
            else memcpy(cell, src, hs * sizeof(float));
        }
}

static void load_rows(const KVCache *kv, const char *base, float *rows, int first, int n) {
    size_t hs = (size_t)kv->head_size, row = head_row_bytes(kv);
    for (int h = 0; h < kv->kv_dim / kv->head_size; h++)
        for (int t = 0; t < n; t++)
            convert_to_f32(rows + (size_t)t * kv->kv_dim + (size_t)h * hs,
                           base + ((size_t)h * kv->n_ctx + (size_t)(first + t)) * row, kv->type, hs);
}

void kv_cache_store(KVCache *kv, int layer, int first, int n, const float *k, const float *v) {
    store_rows(kv, kv_cache_head_keys(kv, layer, 0), k, first, n);
    if (v) store_rows(kv, kv_cache_head_values(kv, layer, 0), v, first, n);
}

void kv_cache_store_grouped(KVCache *kv, int layer, int first, int n, const float *k) {
    store_rows(kv, kv_cache_head_grouped(kv, layer, 0), k, first, n);
}

void kv_cache_load_grouped(const KVCache *kv, int layer, int first, int n, float *k) {
    load_rows(kv, kv_cache_head_grouped(kv, layer, 0), k, first, n);
}

void kv_cache_load_keys(const KVCache *kv, int layer, int first, int n, float *k) {
    load_rows(kv, kv_cache_head_keys(kv, layer, 0), k, first, n);
}

void kv_cache_load_values(const KVCache *kv, int layer, int first, int n, float *v) {
    load_rows(kv, kv_cache_head_values(kv, layer, 0), v, first, n);
}

void kv_cache_remove(KVCache *kv, int first, int count) {
    int tail = kv->n_used - first - count;
    size_t row = head_row_bytes(kv);
    for (int l = 0; l < kv->n_layers; l++)
        for (int h = 0; h < kv->kv_dim / kv->head_size; h++) {
            char *k = kv_cache_head_keys(kv, l, h), *v = kv_cache_head_values(kv, l, h);
            memmove(k + (size_t)first * row, k + (size_t)(first + count) * row, (size_t)tail * row);
            memmove(v + (size_t)first * row, v + (size_t)(first + count) * row, (size_t)tail * row);
            if (!kv->key_grouped) continue;
            char *g = kv_cache_head_grouped(kv, l, h);
            memmove(g + (size_t)first * row, g + (size_t)(first + count) * row, (size_t)tail * row);
        }
    memmove(kv->token + first, kv->token + first + count, (size_t)tail * sizeof(int));
    for (int i = 0; i < tail; i++) kv->pos[first + i] = kv->pos[first + count + i] - count;
    kv->n_used -= count;
}

/* Runs of positions a, a+1, ..., b, each held by `times` consecutive cells
 * (more than one after llama.cpp's group attention divided them). */
void kv_cache_format_positions(const KVCache *kv, char *buf, size_t n) {
    const int *pos = kv->pos;
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < kv->n_used && at < n;) {
        int times = 1;
        while (i + times < kv->n_used && pos[i + times] == pos[i]) times++;
        int last = i + times - 1;
        for (;;) { /* whole blocks of `times` cells holding the next position */
            int b = last + 1, v = pos[last] + 1, k = 0;
            while (k < times && b + k < kv->n_used && pos[b + k] == v) k++;
            if (k < times || (b + k < kv->n_used && pos[b + k] == v)) break;
            last = b + k - 1;
        }
        const char *sep = at ? "," : "";
        int w = pos[last] == pos[i] ? snprintf(buf + at, n - at, "%s%d", sep, pos[i])
                                    : snprintf(buf + at, n - at, "%s%d-%d", sep, pos[i], pos[last]);
        if (times > 1 && w >= 0 && at + (size_t)w < n)
            w += snprintf(buf + at + (size_t)w, n - at - (size_t)w, " x%d", times);
        at += (size_t)w;
        i = last + 1;
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
