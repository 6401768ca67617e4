/* The forward pass over a chunk of tokens, for both architecture families.
 * Positions enter only through the scheme's hooks (pe.h); the KV cache
 * stores each cell's position and attention masks by position. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "model/context.h"
#include "model/kernels.h"

static void norm_rows(const ModelConfig *c, float *out, const float *x, const float *w,
                      const float *b, int n) {
    for (int t = 0; t < n; t++) {
        const float *xi = x + (size_t)t * c->dim;
        float *oi = out + (size_t)t * c->dim;
        if (c->arch == MODEL_ARCH_LLAMA) rmsnorm(oi, xi, w, c->dim, c->norm_eps);
        else layernorm(oi, xi, w, b, c->dim, c->norm_eps);
    }
}

static void embed_tokens(Context *ctx, const int *tokens, int n, int pos0) {
    const ModelConfig *c = &ctx->model->config;
    const PeOps *ops = pe_ops(&ctx->pe);
    for (int t = 0; t < n; t++) {
        float *x = ctx->state.x + (size_t)t * c->dim;
        tensor_row_to_f32(&ctx->model->weights.token_embd, tokens[t], x);
        if (c->embed_scale != 1.0f)
            for (int i = 0; i < c->dim; i++) x[i] *= c->embed_scale;
        if (ops->embed) ops->embed(&ctx->pe, x, pos0 + t);
    }
}

/* One query row of one head against every visible cell; writes (head_size)
 * to out.  `scores` is this thread's (n_ctx) scratch row. */
static void attend(const Context *ctx, int layer, int head, const float *q, int pos_q, int n_cells,
                   float *scores, float *out) {
    const ModelConfig *c = &ctx->model->config;
    const KVCache *kv = &ctx->cache;
    const PeOps *ops = pe_ops(&ctx->pe);
    int hs = model_head_size(c);
    int kv_off = head / (c->n_heads / c->n_kv_heads) * hs;
    float scale = ctx->pe.attn_scale;
    for (int cell = 0; cell < n_cells; cell++) {
        if (kv->pos[cell] > pos_q) { scores[cell] = -INFINITY; continue; }
        const float *k = kv_cache_key(kv, layer, cell) + kv_off;
        float s = 0.0f;
        for (int i = 0; i < hs; i++) s += q[i] * k[i];
        scores[cell] = s / sqrtf((float)hs) * scale;
    }
    if (ops->bias) ops->bias(&ctx->pe, head, pos_q, kv->pos, scores, n_cells);
    softmax(scores, n_cells);
    memset(out, 0, (size_t)hs * sizeof(float));
    for (int cell = 0; cell < n_cells; cell++) {
        if (kv->pos[cell] > pos_q) continue;
        const float *v = kv_cache_value(kv, layer, cell) + kv_off;
        float a = scores[cell];
        for (int i = 0; i < hs; i++) out[i] += a * v[i];
    }
}

/* q, k, v for the chunk; k and v go straight into their cache cells. */
static void attention_block(Context *ctx, int l, int n, int pos0) {
    const ModelConfig *c = &ctx->model->config;
    const LayerWeights *w = &ctx->model->weights.layers[l];
    ForwardState *s = &ctx->state;
    KVCache *kv = &ctx->cache;
    const PeOps *ops = pe_ops(&ctx->pe);
    int kv_dim = model_kv_dim(c), hs = model_head_size(c);
    int first = kv->n_used;
    float *kc = kv_cache_key(kv, l, first), *vc = kv_cache_value(kv, l, first);

    norm_rows(c, s->xb, s->x, w->attn_norm, w->attn_norm_b, n);
    matmul(s->q, s->xb, &w->wq, n);
    matmul(kc, s->xb, &w->wk, n);
    matmul(vc, s->xb, &w->wv, n);
    add_bias(s->q, w->bq, n, c->dim);
    add_bias(kc, w->bk, n, kv_dim);
    add_bias(vc, w->bv, n, kv_dim);
    if (ops->rotate)
        for (int t = 0; t < n; t++) {
            ops->rotate(&ctx->pe, s->q + (size_t)t * c->dim, c->n_heads, pos0 + t);
            ops->rotate(&ctx->pe, kc + (size_t)t * kv_dim, c->n_kv_heads, pos0 + t);
        }
    for (int t = 0; t < n; t++) kv->pos[first + t] = pos0 + t;

    int n_cells = first + n;
    #pragma omp parallel for schedule(dynamic, 1) \
        if ((size_t)n * c->n_heads * n_cells * hs >= PARALLEL_MIN_MACS)
    for (int th = 0; th < n * c->n_heads; th++) {
        int t = th / c->n_heads, h = th % c->n_heads;
        float *scores = s->att + (size_t)omp_get_thread_num() * kv->n_ctx;
        attend(ctx, l, h, s->q + (size_t)t * c->dim + (size_t)h * hs, pos0 + t, n_cells, scores,
               s->xb + (size_t)t * c->dim + (size_t)h * hs);
    }
    matmul(s->xb2, s->xb, &w->wo, n);
    add_bias(s->xb2, w->bo, n, c->dim);
    for (size_t i = 0; i < (size_t)n * c->dim; i++) s->x[i] += s->xb2[i];
}

static void ffn_block(Context *ctx, int l, int n) {
    const ModelConfig *c = &ctx->model->config;
    const LayerWeights *w = &ctx->model->weights.layers[l];
    ForwardState *s = &ctx->state;

    norm_rows(c, s->xb, s->x, w->ffn_norm, w->ffn_norm_b, n);
    if (c->arch == MODEL_ARCH_LLAMA) {
        matmul(s->hb, s->xb, &w->w_gate, n);
        matmul(s->hb2, s->xb, &w->w_up, n);
        swiglu(s->hb, s->hb2, (int)((size_t)n * c->hidden_dim));
    } else {
        matmul(s->hb, s->xb, &w->w_up, n);
        add_bias(s->hb, w->b_up, n, c->hidden_dim);
        gelu(s->hb, (int)((size_t)n * c->hidden_dim));
    }
    matmul(s->xb, s->hb, &w->w_down, n);
    add_bias(s->xb, w->b_down, n, c->dim);
    for (size_t i = 0; i < (size_t)n * c->dim; i++) s->x[i] += s->xb[i];
}

const float *context_forward(Context *ctx, const int *tokens, int n, int pos0, int all_logits) {
    const ModelConfig *c = &ctx->model->config;
    const ModelWeights *w = &ctx->model->weights;
    ForwardState *s = &ctx->state;

    embed_tokens(ctx, tokens, n, pos0);
    memcpy(ctx->cache.token + ctx->cache.n_used, tokens, (size_t)n * sizeof(int));
    for (int l = 0; l < c->n_layers; l++) {
        attention_block(ctx, l, n, pos0);
        ffn_block(ctx, l, n);
    }
    ctx->cache.n_used += n;

    /* Only the rows whose logits are wanted go through the classifier. */
    int first = all_logits ? 0 : n - 1, rows = n - first;
    float *x = s->x + (size_t)first * c->dim;
    norm_rows(c, x, x, w->output_norm, w->output_norm_b, rows);
    matmul(s->logits, x, &w->output, rows);
    return s->logits;
}
