/* llama2.c legacy checkpoints: a header of 7 int32 followed by f32 arrays in
 * a fixed order, mmap'd and viewed in place.  A negative vocab size means
 * the classifier is stored separately at the end. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

typedef struct {
    const uint8_t *p;  /* next unread byte */
    size_t left;
} Cursor;

/* Views `rows x cols` f32 values at the cursor and advances past them.
 * Sizes were validated against the file before any view is taken. */
static const float *take(Cursor *c, size_t rows, size_t cols) {
    const float *v = (const float *)c->p;
    c->p += rows * cols * sizeof(float);
    c->left -= rows * cols * sizeof(float);
    return v;
}

static Tensor take_matrix(Cursor *c, int rows, int cols) {
    Tensor t = {TENSOR_F32, take(c, (size_t)rows, (size_t)cols), rows, cols, NULL};
    return t;
}

/* Floats the file must hold after the header, or 0 on overflow. */
static size_t expected_floats(const ModelConfig *c, int shared) {
    size_t d = (size_t)c->dim, h = (size_t)c->hidden_dim, L = (size_t)c->n_layers;
    size_t kv = (size_t)model_kv_dim(c), v = (size_t)c->vocab_size;
    size_t hs = (size_t)model_head_size(c), s = (size_t)c->seq_len;
    /* Each term is bounded by model_config_validate's limits (< 2^50), so
     * the sum below cannot overflow a 64-bit size_t. */
    size_t per_layer = 2 * d + 2 * d * d + 2 * kv * d + 3 * h * d;
    return v * d + L * per_layer + d + s * hs + (shared ? 0 : v * d);
}

int model_load_llama2c(Model *m, const char *path, PosencError *err) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    if (mapped_file_open(&m->file, path, err)) return -1;
    size_t size = m->file.size; /* model_free() clears m: errors read this */
    if (size < 7 * sizeof(int32_t)) {
        model_free(m);
        return posenc_error(err, "%s: truncated: %zu bytes is shorter than the 28-byte "
                                 "llama2.c header", path, size);
    }
    int32_t h[7];
    memcpy(h, m->file.data, sizeof h);
    ModelConfig *c = &m->config;
    int shared = h[5] > 0;
    *c = (ModelConfig){*model_family_find("llama"), h[0], h[1], h[2], h[3], h[4],
                       h[3] > 0 ? h[0] / h[3] : 0, h[5] == INT32_MIN ? 0 : abs(h[5]), h[6],
                       1e-5f, 1.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0, 0, 0, 0};
    if (model_config_validate(c, path, err) ||
        (c->dim % c->n_heads && posenc_error(err, "%s: dim %d is not a multiple of n_heads %d",
                                             path, c->dim, c->n_heads)) ||
        (model_head_size(c) % 2 &&
        posenc_error(err, "%s: head size %d is odd; RoPE needs pairs", path,
                     model_head_size(c)))) {
        model_free(m);
        return -1;
    }
    size_t need = expected_floats(c, shared) * sizeof(float) + sizeof h;
    if (need != size) {
        model_free(m);
        return posenc_error(err, "%s: header describes %zu bytes of weights but the file has "
                                 "%zu (truncated, or not a llama2.c checkpoint)",
                            path, need, size);
    }

    Cursor cur = {m->file.data + sizeof h, m->file.size - sizeof h};
    int d = c->dim, hd = c->hidden_dim, kv = model_kv_dim(c), L = c->n_layers;
    ModelWeights *w = &m->weights;
    w->layers = calloc_or_exit((size_t)L, sizeof *w->layers, "the layer table");
    w->token_embd = take_matrix(&cur, c->vocab_size, d);
    /* The file stores each kind of weight for all layers together. */
    for (int l = 0; l < L; l++) w->layers[l].attn_norm = take(&cur, 1, (size_t)d);
    for (int l = 0; l < L; l++) w->layers[l].wq = take_matrix(&cur, d, d);
    for (int l = 0; l < L; l++) w->layers[l].wk = take_matrix(&cur, kv, d);
    for (int l = 0; l < L; l++) w->layers[l].wv = take_matrix(&cur, kv, d);
    for (int l = 0; l < L; l++) w->layers[l].wo = take_matrix(&cur, d, d);
    for (int l = 0; l < L; l++) w->layers[l].ffn_norm = take(&cur, 1, (size_t)d);
    for (int l = 0; l < L; l++) w->layers[l].w_gate = take_matrix(&cur, hd, d);
    for (int l = 0; l < L; l++) w->layers[l].w_down = take_matrix(&cur, d, hd);
    for (int l = 0; l < L; l++) w->layers[l].w_up = take_matrix(&cur, hd, d);
    w->output_norm = take(&cur, 1, (size_t)d);
    take(&cur, (size_t)c->seq_len, (size_t)model_head_size(c)); /* RoPE tables: recomputed */
    w->output = shared ? w->token_embd : take_matrix(&cur, c->vocab_size, d);

    m->pe = pe_params_default(PE_ROPE); /* llama2.c: interleaved pairs, theta 10000 */
    model_layers_uniform(m, 0);
    return 0;
}
