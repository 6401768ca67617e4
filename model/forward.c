/* The forward pass over a chunk of tokens, for every architecture family:
 * what differs between them is data in config.family (family.h).
 * Positions enter only through the scheme's hooks (pe.h); the KV cache
 * stores each cell's position and attention masks by position. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "model/context.h"
#include "model/kernels.h"

/* A chunk's per-token steps are independent, each token's result the
 * same bits whichever thread computes it: from this many tokens they are
 * spread over the threads (f32 pp512 at the 110M shape, 2 threads, three
 * alternating rounds: 1,652 tok/s with one thread doing them, 1,679). */
#define PARALLEL_TOKENS 16

/* The for loop given, spread over the threads when `many`, else run by
 * this thread with no parallel region: one that `if` turns off still costs
 * half a microsecond (a microsecond inside a decoded token's team), and a
 * decoded token met several per layer. */
#define SPREAD_IF(many, ...)                             \
    do {                                                 \
        if (many) {                                      \
            _Pragma("omp parallel for schedule(static)") \
            __VA_ARGS__;                                 \
        } else {                                         \
            __VA_ARGS__;                                 \
        }                                                \
    } while (0)

static void norm_row(const ModelConfig *c, float *out, const float *x, const float *w, const float *b) {
    if (c->family.norm == NORM_RMS) rmsnorm(out, x, w, c->dim, c->norm_eps);
    else layernorm(out, x, w, b, c->dim, c->norm_eps);
}

static void norm_rows(const ModelConfig *c, float *out, const float *x, const float *w,
                      const float *b, int n) {
    SPREAD_IF(n >= PARALLEL_TOKENS, for (int t = 0; t < n; t++)
        norm_row(c, out + (size_t)t * c->dim, x + (size_t)t * c->dim, w, b));
}

/* A branch's input: the n rows of x through the branch's norm w (bias b),
 * or as they are where the family has none there. */
static void branch_input(const ModelConfig *c, float *out, const float *x, const float *w, const float *b, int n) {
    if (w) norm_rows(c, out, x, w, b, n);
    else memcpy(out, x, (size_t)n * c->dim * sizeof(float));
}

/* One vector normalized as the family's norms are, without a bias (the
 * q/k norms). */
static void norm_vector(const ModelConfig *c, float *v, const float *w, int n) {
    if (c->family.norm == NORM_RMS) rmsnorm(v, v, w, n, c->norm_eps);
    else layernorm(v, v, w, NULL, n, c->norm_eps);
}

/* q and k normalized before rotation: per head, or over the whole
 * projection (family.qk_norm). */
static void qk_norm_token(const ModelConfig *c, const LayerWeights *w, float *q, float *k) {
    int hs = model_head_size(c);
    if (c->family.qk_norm == QK_NORM_FULL) {
        norm_vector(c, q, w->q_norm, model_q_dim(c));
        norm_vector(c, k, w->k_norm, model_kv_dim(c));
        return;
    }
    size_t step = w->qk_norm_per_head ? (size_t)hs : 0;
    for (int h = 0; h < c->n_heads; h++) norm_vector(c, q + (size_t)h * hs, w->q_norm + h * step, hs);
    for (int h = 0; h < c->n_kv_heads; h++) norm_vector(c, k + (size_t)h * hs, w->k_norm + h * step, hs);
}

static void qk_norm(const ModelConfig *c, const LayerWeights *w, float *q, float *k, int n) {
    size_t q_dim = (size_t)model_q_dim(c), kv_dim = (size_t)model_kv_dim(c);
    SPREAD_IF(n >= PARALLEL_TOKENS, for (int t = 0; t < n; t++)
        qk_norm_token(c, w, q + (size_t)t * q_dim, k + (size_t)t * kv_dim));
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
    const ModelWeights *w = &ctx->model->weights;
    if (c->family.embed_norm)
        norm_rows(c, ctx->state.x, ctx->state.x, w->embd_norm, w->embd_norm_b, n);
}

static void clamp(float *x, size_t n, float limit) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] > limit ? limit : x[i] < -limit ? -limit : x[i];
}

/* Self-Extend (Jin et al. 2024, "LLM Maybe LongLM"): in rows of raw q.k
 * of query rows [t0, t0 + nt) against cells [c0, c0 + nb), each cell at
 * least W positions before its query takes the grouped query's dot with the
 * grouped key instead, so both kinds meet in one softmax.  Blocks of
 * ATT_BLOCK cells through this thread's att_grouped; a block whose cells
 * are all neighbours of every query in the tile has nothing to replace. */
static void self_extend_scores(const Context *ctx, const ContextLayer *cl, int layer, int head, int t0,
                               int nt, int pos0, int c0, int nb, float *sc, size_t ld) {
    const ModelConfig *c = &ctx->model->config;
    const KVCache *kv = &ctx->cache;
    int hs = model_head_size(c), kv_head = head / (c->n_heads / c->n_kv_heads);
    int window = cl->self_extend_window, last_q = pos0 + t0 + nt - 1;
    size_t q_dim = (size_t)model_q_dim(c), es = tensor_row_bytes(kv->type, 1);
    const float *q = ctx->state.q_grouped + (size_t)t0 * q_dim + (size_t)head * hs;
    const char *keys = (const char *)kv_cache_head_grouped(kv, layer, kv_head);
    float *grouped = ctx->state.att_grouped + (size_t)omp_get_thread_num() * ATT_TILE * ATT_BLOCK;
    for (int b0 = 0; b0 < nb; b0 += ATT_BLOCK) {
        int bn = nb - b0 < ATT_BLOCK ? nb - b0 : ATT_BLOCK, far = 0;
        const int *pos = kv->pos + c0 + b0;
        for (int cell = 0; cell < bn; cell++) far |= last_q - pos[cell] >= window;
        if (!far) continue;
        dot_rows(grouped, ATT_BLOCK, q, q_dim, kv->type, keys + (size_t)(c0 + b0) * hs * es, (size_t)hs,
                 nt, bn, hs);
        for (int t = 0; t < nt; t++) {
            float *row = sc + (size_t)t * ld + b0;
            const float *g = grouped + (size_t)t * ATT_BLOCK;
            int pos_q = pos0 + t0 + t;
            for (int cell = 0; cell < bn; cell++) row[cell] = pos_q - pos[cell] >= window ? g[cell] : row[cell];
        }
    }
}

/* Scores of query rows [t0, t0 + nt) of one head against cells [c0,
 * c0 + nb), into rows ld apart: q . k scaled, -inf where the cell is not
 * visible, plus the scheme's bias. */
static void block_scores(const Context *ctx, int layer, int head, int t0, int nt, int pos0, int c0, int nb,
                         float *sc, size_t ld) {
    const ModelConfig *c = &ctx->model->config;
    const ContextLayer *cl = &ctx->layers[layer];
    const KVCache *kv = &ctx->cache;
    const PeOps *ops = pe_ops(&cl->pe);
    int hs = model_head_size(c), kv_head = head / (c->n_heads / c->n_kv_heads);
    float div = cl->score_div, cap = cl->softcap;
    size_t q_dim = (size_t)model_q_dim(c), es = tensor_row_bytes(kv->type, 1);
    const float *q = ctx->state.q + (size_t)t0 * q_dim + (size_t)head * hs;
    const char *keys = (const char *)kv_cache_head_keys(kv, layer, kv_head) + (size_t)c0 * hs * es;
    dot_rows(sc, ld, q, q_dim, kv->type, keys, (size_t)hs, nt, nb, hs);
    if (cl->self_extend_group) self_extend_scores(ctx, cl, layer, head, t0, nt, pos0, c0, nb, sc, ld);
    const int *pos = kv->pos + c0;
    for (int t = 0; t < nt; t++) {
        float *row = sc + (size_t)t * ld;
        /* a query sees no later key, nor one that has left the sliding
         * window (the bounds out of the loop, which then vectorizes: the
         * cell by cell test was 3% of f32 pp512 at the 110M shape) */
        int pos_q = pos0 + t0 + t, first = model_visible_first(cl->window, cl->chunk, pos_q);
        if (cap > 0.0f)   /* Gemma 2: scores bent into (-cap, cap) before the mask */
            for (int cell = 0; cell < nb; cell++) row[cell] = cap * tanhf(row[cell] / div / cap);
        else
            for (int cell = 0; cell < nb; cell++) row[cell] /= div;
        for (int cell = 0; cell < nb; cell++)
            row[cell] = pos[cell] <= pos_q && pos[cell] >= first ? row[cell] : -INFINITY;
        if (ops->bias) ops->bias(&cl->pe, head, pos_q, pos, row, nb);
    }
}

/* A softmax whose row has one more logit, the head's learned sink (gpt-oss):
 * it joins the maximum and the denominator and is then dropped, so the
 * cells' weights sum to 1 - the sink's share. */
static void softmax_with_sink(float *row, int n, float sink) {
    float max = sink;
    for (int i = 0; i < n; i++) max = row[i] > max ? row[i] : max;
    float inv = 1.0f / (exp_sum(row, n, max) + expf(sink - max));
    for (int i = 0; i < n; i++) row[i] *= inv;
}

/* Under an observer: each row's softmax over all its cells at once (with
 * the layer's sink, where it has one), which the observer sees, then the
 * weighted sum of the values. */
static void attend_observed(const Context *ctx, int layer, int head, int t0, int nt, int first, int pos0,
                            float *rows) {
    const ModelConfig *c = &ctx->model->config;
    const KVCache *kv = &ctx->cache;
    int hs = model_head_size(c), cells = first + t0 + nt, kv_head = head / (c->n_heads / c->n_kv_heads);
    size_t q_dim = (size_t)model_q_dim(c);
    const float *sinks = ctx->layers[layer].sinks;
    block_scores(ctx, layer, head, t0, nt, pos0, 0, cells, rows, (size_t)kv->n_ctx);
    for (int t = 0; t < nt; t++) {
        float *row = rows + (size_t)t * kv->n_ctx;
        if (sinks) softmax_with_sink(row, cells, sinks[head]);
        else softmax(row, cells);
        ctx->observe_attention(ctx->observer_user, layer, head, pos0 + t0 + t, row, cells);
    }
    mix_rows(ctx->state.xb + (size_t)t0 * q_dim + (size_t)head * hs, q_dim, rows, (size_t)kv->n_ctx, kv->type,
             kv_cache_head_values(kv, layer, kv_head), (size_t)hs, nt, cells, hs);
}

/* Query rows [t0, t0 + nt) of one head against the cells they may see,
 * ATT_BLOCK cells at a time with an online softmax: per row a running
 * maximum m, sum l of e^(score - m) and weighted sum of values o; a block
 * whose maximum passes m rescales l and o by e^(m_old - m_new), a learned
 * sink's share of l with the rest.  Every row
 * is computed as it would be alone (decode), in blocks that start at cell
 * 0 whatever the tile: cells past a query's own are -inf, give e^.. = 0,
 * add exactly nothing to l or o, and a block with nothing visible leaves
 * the row as it was.  `att` is this thread's (ATT_TILE, ATT_BLOCK + hs). */
static void attend_tile(const Context *ctx, int layer, int head, int t0, int nt, int first, int pos0,
                        float *att) {
    const ModelConfig *c = &ctx->model->config;
    const KVCache *kv = &ctx->cache;
    int hs = model_head_size(c), cells = first + t0 + nt, kv_head = head / (c->n_heads / c->n_kv_heads);
    size_t q_dim = (size_t)model_q_dim(c), es = tensor_row_bytes(kv->type, 1);
    float *sc = att, *part = att + (size_t)ATT_TILE * ATT_BLOCK, *out = ctx->state.xb + (size_t)t0 * q_dim + (size_t)head * hs;
    float m[ATT_TILE], l[ATT_TILE], rescale[ATT_TILE];
    /* a learned sink is a cell before all others that every row sees and
     * whose value is zero: it starts the running maximum and sum at
     * (sink, e^0) and adds nothing to o */
    const float *sinks = ctx->layers[layer].sinks;
    for (int t = 0; t < nt; t++) {
        m[t] = sinks ? sinks[head] : -INFINITY, l[t] = sinks ? 1.0f : 0.0f;
        memset(out + (size_t)t * q_dim, 0, (size_t)hs * sizeof(float));
    }
    const char *values = kv_cache_head_values(kv, layer, kv_head);
    for (int c0 = 0; c0 < cells; c0 += ATT_BLOCK) {
        int nb = cells - c0 < ATT_BLOCK ? cells - c0 : ATT_BLOCK;
        block_scores(ctx, layer, head, t0, nt, pos0, c0, nb, sc, ATT_BLOCK);
        for (int t = 0; t < nt; t++) {
            float mn = m[t], sum = exp_sum_running(sc + (size_t)t * ATT_BLOCK, nb, &mn);
            /* 0 before the first visible cell, 1 while the maximum holds */
            rescale[t] = mn == -INFINITY ? 1.0f : expf(m[t] - mn);
            l[t] = l[t] * rescale[t] + sum;
            m[t] = mn;
        }
        mix_rows(part, (size_t)hs, sc, ATT_BLOCK, kv->type, values + (size_t)c0 * hs * es, (size_t)hs, nt, nb, hs);
        for (int t = 0; t < nt; t++) {
            float *o = out + (size_t)t * q_dim;
            const float *p = part + (size_t)t * hs;
            if (rescale[t] == 1.0f)
                for (int i = 0; i < hs; i++) o[i] += p[i];
            else
                for (int i = 0; i < hs; i++) o[i] = o[i] * rescale[t] + p[i];
        }
    }
    for (int t = 0; t < nt; t++) {
        float *o = out + (size_t)t * q_dim;
        for (int i = 0; i < hs; i++) o[i] /= l[t];
    }
}

/* Self-Extend's second copies of the chunk's queries and keys, before
 * they are rotated at their own positions: rotated at the grouped ones,
 * the key at floor(p / G), the query at floor(p / G) + W - floor(W / G)
 * (the paper's shift, which makes a grouped distance continue the
 * neighbour window's: a key just past W reads as W or a little more). */
static void self_extend_rotate(Context *ctx, int l, int n, int pos0) {
    const ModelConfig *c = &ctx->model->config;
    const ContextLayer *cl = &ctx->layers[l];
    ForwardState *s = &ctx->state;
    int g = cl->self_extend_group, shift = cl->self_extend_window - cl->self_extend_window / g;
    size_t q_dim = (size_t)model_q_dim(c), kv_dim = (size_t)model_kv_dim(c);
    memcpy(s->q_grouped, s->q, (size_t)n * q_dim * sizeof(float));
    memcpy(s->k_grouped, s->k, (size_t)n * kv_dim * sizeof(float));
    SPREAD_IF(n >= PARALLEL_TOKENS, for (int t = 0; t < n; t++) {
        int grouped = (pos0 + t) / g;
        pe_ops(&cl->pe)->rotate(&cl->pe, s->q_grouped + (size_t)t * q_dim, c->n_heads, grouped + shift);
        pe_ops(&cl->pe)->rotate(&cl->pe, s->k_grouped + (size_t)t * kv_dim, c->n_kv_heads, grouped);
    });
}

/* The attention temperature: each query row (both copies under
 * Self-Extend) times its position's factor, model_temperature_scale. */
static void temperature_scale(Context *ctx, int l, int n, int pos0) {
    const ContextLayer *cl = &ctx->layers[l];
    ForwardState *s = &ctx->state;
    size_t q_dim = (size_t)model_q_dim(&ctx->model->config);
    for (int t = 0; t < n; t++) {
        float f = model_temperature_scale(cl->temperature_beta, cl->temperature_length,
                                          cl->temperature_offset, pos0 + t);
        float *q = s->q + (size_t)t * q_dim, *qg = s->q_grouped ? s->q_grouped + (size_t)t * q_dim : NULL;
        for (size_t i = 0; i < q_dim; i++) q[i] *= f;
        if (qg && cl->self_extend_group)
            for (size_t i = 0; i < q_dim; i++) qg[i] *= f;
    }
}

/* The chunk's new rows of q, k and v (the state's) made ready for
 * attention: biases, the clamp, q/k norms, Self-Extend's copies, rotation
 * and the temperature; then the keys and values stored in their heads'
 * cells from `first`, rounded to the cache's type. */
static void attention_inputs(Context *ctx, int l, int first, int n, int pos0) {
    const ModelConfig *c = &ctx->model->config;
    const LayerWeights *w = &ctx->model->weights.layers[l];
    ForwardState *s = &ctx->state;
    const ContextLayer *cl = &ctx->layers[l];
    const PositionalEncoding *pe = &cl->pe;
    const PeOps *ops = pe_ops(pe);
    int kv_dim = model_kv_dim(c), q_dim = model_q_dim(c);
    add_bias(s->q, w->bq, n, q_dim);
    add_bias(s->k, w->bk, n, kv_dim);
    add_bias(s->v, w->bv, n, kv_dim);
    if (c->clamp_kqv > 0.0f) {
        clamp(s->q, (size_t)n * q_dim, c->clamp_kqv);
        clamp(s->k, (size_t)n * kv_dim, c->clamp_kqv);
        clamp(s->v, (size_t)n * kv_dim, c->clamp_kqv);
    }
    if (w->q_norm) qk_norm(c, w, s->q, s->k, n);
    if (cl->self_extend_group) self_extend_rotate(ctx, l, n, pos0);
    if (ops->rotate)
        SPREAD_IF(n >= PARALLEL_TOKENS, for (int t = 0; t < n; t++) {
            ops->rotate(pe, s->q + (size_t)t * q_dim, c->n_heads, pos0 + t);
            ops->rotate(pe, s->k + (size_t)t * kv_dim, c->n_kv_heads, pos0 + t);
        });
    if (cl->temperature_beta > 0.0f) temperature_scale(ctx, l, n, pos0);
    kv_cache_store(&ctx->cache, l, first, n, s->k, s->v);
    if (cl->self_extend_group) kv_cache_store_grouped(&ctx->cache, l, first, n, s->k_grouped);
}

/* Attention work item `it` of a chunk of n rows whose cells start at
 * `first`: one head of one tile of query rows, into the state's xb, in the
 * calling thread's scratch. */
static void attend_item(Context *ctx, int l, int it, int first, int n, int pos0) {
    const ModelConfig *c = &ctx->model->config;
    int h = it % c->n_heads, t0 = it / c->n_heads * ATT_TILE, nt = n - t0 < ATT_TILE ? n - t0 : ATT_TILE;
    int th = omp_get_thread_num(), hs = model_head_size(c);
    if (ctx->observe_attention)
        attend_observed(ctx, l, h, t0, nt, first, pos0,
                        ctx->observer_rows + (size_t)th * ATT_TILE * ctx->cache.n_ctx);
    else
        attend_tile(ctx, l, h, t0, nt, first, pos0, ctx->state.att + (size_t)th * ATT_TILE * (ATT_BLOCK + hs));
}

/* The output projection's bias and the family's norm after it, on n rows. */
static void attention_output(const ModelConfig *c, const LayerWeights *w, float *out, int n) {
    add_bias(out, w->bo, n, c->dim);
    if (w->attn_post_norm) norm_rows(c, out, out, w->attn_post_norm, NULL, n);
}

/* Attention over the chunk, whose cells start at `first`, into s->xb2 (the
 * caller adds it to the residual).  Keys and values are computed in f32 in
 * the state's k and v, rows of kv_dim; kv_cache_store puts each head's part
 * in that head's cells, rounded to the cache's type. */
static void attention_block(Context *ctx, int l, int first, int n, int pos0) {
    const ModelConfig *c = &ctx->model->config;
    const LayerWeights *w = &ctx->model->weights.layers[l];
    ForwardState *s = &ctx->state;

    branch_input(c, s->xb, s->x, w->attn_norm, w->attn_norm_b, n);
    float *qkv[] = {s->q, s->k, s->v};
    const Tensor *wqkv[] = {&w->wq, &w->wk, &w->wv};
    matmul_many(qkv, s->xb, wqkv, 3, n, &s->mm);
    attention_inputs(ctx, l, first, n, pos0);

    /* Later tiles see more cells: dynamic scheduling evens the load. */
    int items = (n + ATT_TILE - 1) / ATT_TILE * c->n_heads, n_cells = first + n;
    int threads = matmul_scratch_threads(&s->mm), parallel = (size_t)n * model_q_dim(c) * n_cells >= PARALLEL_MIN_MACS && threads > 1;
    double started = time_now_s();
    if (parallel) {
        ctx->stats.regions++;
        #pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int it = 0; it < items; it++) attend_item(ctx, l, it, first, n, pos0);
    } else {
        for (int it = 0; it < items; it++) attend_item(ctx, l, it, first, n, pos0);
    }
    ctx->stats.attention_seconds += time_now_s() - started;
    matmul(s->xb2, s->xb, &w->wo, n, &s->mm);
    attention_output(c, w, s->xb2, n);
}

/* gpt-oss's clamped SwiGLU of gate h and up g, into h (HF's GptOssExperts,
 * llama.cpp's swiglu_oai): the gate bounded above by the limit, up within
 * +-limit and shifted by 1, the sigmoid sharpened by alpha = 1.702.  Scalar:
 * it runs on an expert's rows only, a small part of the expert's matmuls. */
static void swiglu_oai(float *h, const float *g, int n, float limit) {
    for (int i = 0; i < n; i++) {
        float x = h[i] < limit ? h[i] : limit;
        float u = g[i] > limit ? limit : g[i] < -limit ? -limit : g[i];
        h[i] = x / (1.0f + expf(-1.702f * x)) * (u + 1.0f);
    }
}

/* h (n) = the family's gated activation of the gate h and the up g. */
static void gated_activation(const ModelFamily *f, float *h, const float *g, int n) {
    if (f->ffn == FFN_SWIGLU) {
        swiglu(h, g, n);
    } else if (f->ffn == FFN_SWIGLU_OAI) {
        swiglu_oai(h, g, n, f->swiglu_limit);
    } else {
        gelu(h, n);
        for (int i = 0; i < n; i++) h[i] *= g[i];
    }
}

/* Expert e's row of a stacked bias (n_experts, width), or NULL without one. */
static const float *expert_bias(const float *b, int e, size_t width) {
    return b ? b + (size_t)e * width : NULL;
}

/* Expert e's gate rows h and up rows g (rows, expert_hidden_dim) with the
 * expert's biases, through the family's gated activation into h. */
static void expert_activation(const ModelConfig *c, const LayerWeights *w, int e, float *h, float *g, int rows) {
    size_t hidden = (size_t)c->expert_hidden_dim;
    add_bias(h, expert_bias(w->b_gate_exps, e, hidden), rows, (int)hidden);
    add_bias(g, expert_bias(w->b_up_exps, e, hidden), rows, (int)hidden);
    SPREAD_IF(rows >= PARALLEL_TOKENS, for (int r = 0; r < rows; r++)
        gated_activation(&c->family, h + (size_t)r * hidden, g + (size_t)r * hidden, (int)hidden));
}

/* One token's router logits (n_experts, overwritten) into its k experts
 * and their weights, as the family's modeling code weighs them: the top k
 * of the softmax over every expert (renormalised where the config says),
 * or a softmax over the top k logits.  Of equal values the lower expert
 * wins, as a stable sort's top k. */
static void route(const ModelConfig *c, float *logits, int *picks, float *weights) {
    int n_experts = c->n_experts, k = c->n_experts_used;
    int softmax_first = c->family.router == ROUTER_SOFTMAX_TOPK;
    if (softmax_first) softmax(logits, n_experts);
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n_experts; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++) taken |= picks[i] == e;
            if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
        }
        picks[j] = best;
        weights[j] = logits[best];
    }
    if (!softmax_first) {
        softmax(weights, k);
    } else if (c->expert_weights_norm) {
        float sum = 0.0f;
        for (int j = 0; j < k; j++) sum += weights[j];
        for (int j = 0; j < k; j++) weights[j] /= sum;
    }
}

/* A mixture of experts over the normed chunk in s->xb, into s->xb: each
 * token's experts (route, from the router's logits plus its bias where it
 * has one), then expert by expert the rows of the tokens that picked it
 * through its gated feed-forward (with gpt-oss's biases), so that an expert's
 * matrices are read once per chunk (a token decoded alone reads only its
 * own experts' rows), each output added to its token's sum by weight.
 * Every token sums its experts in expert order, whatever the chunk, so
 * chunked prefill and decode round alike. */
static void moe_block(Context *ctx, int l, int n) {
    const ModelConfig *c = &ctx->model->config;
    const LayerWeights *w = &ctx->model->weights.layers[l];
    ForwardState *s = &ctx->state;
    int n_experts = c->n_experts, k = c->n_experts_used, slots = n * k;
    size_t dim = (size_t)c->dim;

    matmul(s->router, s->xb, &w->router, n, &s->mm);
    add_bias(s->router, w->b_router, n, n_experts);
    SPREAD_IF(n >= PARALLEL_TOKENS, for (int t = 0; t < n; t++)
        route(c, s->router + (size_t)t * n_experts, s->picks + (size_t)t * k,
              s->pick_weights + (size_t)t * k));
    /* the slots grouped by expert, in slot order within each (a counting
     * sort: expert_start[e + 1] counts, then accumulates, then each slot
     * takes its place, leaving expert_start[e] at the next expert's start) */
    int *start = s->expert_start;
    memset(start, 0, (size_t)(n_experts + 1) * sizeof *start);
    for (int i = 0; i < slots; i++) start[s->picks[i] + 1]++;
    for (int e = 0; e < n_experts; e++) start[e + 1] += start[e];
    for (int i = 0; i < slots; i++) s->slots_by_expert[start[s->picks[i]]++] = i;
    memmove(start + 1, start, (size_t)n_experts * sizeof *start);
    start[0] = 0;

    memset(s->expert_sum, 0, (size_t)n * dim * sizeof(float));
    for (int e = 0; e < n_experts; e++) {
        int rows = start[e + 1] - start[e];
        const int *mine = s->slots_by_expert + start[e];
        if (!rows) continue;
        for (int r = 0; r < rows; r++)
            memcpy(s->expert_in + (size_t)r * dim, s->xb + (size_t)(mine[r] / k) * dim, dim * sizeof(float));
        Tensor gate = model_expert_matrix(&w->gate_exps, n_experts, e);
        Tensor up = model_expert_matrix(&w->up_exps, n_experts, e);
        Tensor down = model_expert_matrix(&w->down_exps, n_experts, e);
        float *gate_up[] = {s->hb, s->hb2};
        const Tensor *wgu[] = {&gate, &up};
        matmul_many(gate_up, s->expert_in, wgu, 2, rows, &s->mm);
        expert_activation(c, w, e, s->hb, s->hb2, rows);
        matmul(s->expert_out, s->hb, &down, rows, &s->mm);
        add_bias(s->expert_out, expert_bias(w->b_down_exps, e, dim), rows, (int)dim);
        for (int r = 0; r < rows; r++) {
            float weight = s->pick_weights[mine[r]];
            float *sum = s->expert_sum + (size_t)(mine[r] / k) * dim;
            const float *out = s->expert_out + (size_t)r * dim;
            for (size_t i = 0; i < dim; i++) sum[i] += weight * out[i];
        }
        ctx->expert_passes++;
    }
    memcpy(s->xb, s->expert_sum, (size_t)n * dim * sizeof(float));
}

/* The hidden rows h (n, hidden_dim) through the family's activation: gated
 * by the up rows g, or after the up projection's bias. */
static void ffn_activation(const ModelConfig *c, const LayerWeights *w, float *h, const float *g, int n) {
    size_t hidden = (size_t)c->hidden_dim;
    if (model_family_gated(&c->family)) {
        SPREAD_IF(n >= PARALLEL_TOKENS, for (int t = 0; t < n; t++)
            gated_activation(&c->family, h + (size_t)t * hidden, g + (size_t)t * hidden, c->hidden_dim));
        return;
    }
    add_bias(h, w->b_up, n, c->hidden_dim);
    if (c->family.ffn == FFN_GELU_ERF) gelu_erf(h, (int)((size_t)n * hidden));
    else gelu(h, (int)((size_t)n * hidden));
}

/* The down projection's bias and the family's norm after it, on n rows. */
static void ffn_output(const ModelConfig *c, const LayerWeights *w, float *out, int n) {
    add_bias(out, w->b_down, n, c->dim);
    if (w->ffn_post_norm) norm_rows(c, out, out, w->ffn_post_norm, NULL, n);
}

/* The feed-forward network of the chunk into s->xb. */
static void ffn_block(Context *ctx, int l, int n) {
    const ModelConfig *c = &ctx->model->config;
    const LayerWeights *w = &ctx->model->weights.layers[l];
    ForwardState *s = &ctx->state;

    branch_input(c, s->xb, s->x, w->ffn_norm, w->ffn_norm_b, n);
    if (c->n_experts) {
        moe_block(ctx, l, n);
        if (w->ffn_post_norm) norm_rows(c, s->xb, s->xb, w->ffn_post_norm, NULL, n);
        return;
    }
    float *gate_up[] = {s->hb, s->hb2};
    const Tensor *wgu[] = {&w->w_gate, &w->w_up};
    if (model_family_gated(&c->family)) matmul_many(gate_up, s->xb, wgu, 2, n, &s->mm);
    else matmul(s->hb, s->xb, &w->w_up, n, &s->mm);
    ffn_activation(c, w, s->hb, s->hb2, n);
    matmul(s->xb, s->hb, &w->w_down, n, &s->mm);
    ffn_output(c, w, s->xb, n);
}

/* A branch's output (len) times the residual scale (Granite's), in place. */
static void scale_branch(float *branch, size_t len, float r, int many) {
    if (r != 1.0f) SPREAD_IF(many, for (size_t i = 0; i < len; i++) branch[i] *= r);
}

/* x (len) += a, or a + b where a parallel residual adds both branches. */
static void add_residual(float *x, const float *a, const float *b, size_t len, int many) {
    if (b) SPREAD_IF(many, for (size_t i = 0; i < len; i++) x[i] += a[i] + b[i]);
    else SPREAD_IF(many, for (size_t i = 0; i < len; i++) x[i] += a[i]);
}

/* x += attn(norm1 x); x += ffn(norm2 x) — or, with a parallel residual,
 * both branches read the same x: x += attn(norm1 x) + ffn(norm2 x).  The
 * family's norm placement may add a norm after each branch or have only
 * that one; Granite scales each branch by residual_scale. */
static void transformer_layer(Context *ctx, int l, int first_cell, int n, int pos0) {
    const ModelConfig *c = &ctx->model->config;
    ForwardState *s = &ctx->state;
    size_t len = (size_t)n * c->dim;
    int many = n >= PARALLEL_TOKENS, parallel = c->family.parallel_residual;
    attention_block(ctx, l, first_cell, n, pos0);
    scale_branch(s->xb2, len, c->residual_scale, many);
    if (!parallel) add_residual(s->x, s->xb2, NULL, len, many);
    ffn_block(ctx, l, n);
    scale_branch(s->xb, len, c->residual_scale, many);
    add_residual(s->x, s->xb, parallel ? s->xb2 : NULL, len, many);
}

/* ---- a decoded token's team ------------------------------------------------ */

/* A decoded token runs in one parallel region (decode_in_team) where it
 * would start one per matrix-vector product: each thread carries its own
 * copy of the residual stream through every layer, doing the norms, the
 * activations' quantization, the activation function and the residual on
 * its copy (the same bits in every copy, so nothing waits for them), and
 * the threads meet only where the data needs it: at the end of each
 * product (matmul_team), after one thread has made the attention's inputs
 * ready and stored the new cell, and after the heads, split among them.
 * Each step is the one the per-step path runs, on the same rows, so the
 * bits are those of any thread count and of prefill.  It takes one token,
 * at least two threads and matrices worth sharing; Self-Extend's grouped
 * copies, an observer's whole rows and a mixture that picks more experts
 * than one team product takes (2k > MATMUL_MANY_MAX) or than the state
 * has rows for (max_tokens) keep the per-step path. */
static int team_threads(const Context *ctx, int n) {
    const ModelConfig *c = &ctx->model->config;
    int threads = matmul_scratch_threads(&ctx->state.mm);
    if (n != 1 || threads < 2 || ctx->observe_attention || ctx->team == TEAM_NEVER) return 0;
    if (c->n_experts && (2 * c->n_experts_used > MATMUL_MANY_MAX || ctx->state.max_tokens < c->n_experts_used))
        return 0;
    if (ctx->team == TEAM_WHEN_LARGE && (size_t)model_kv_dim(c) * c->dim < PARALLEL_MIN_MACS) return 0;
    return context_self_extend_layer(ctx) < 0 ? threads : 0;
}

/* A mixture of experts over the token's normed row xb into sum (dim), as
 * moe_block computes it for one token: the router's product shared, the
 * route each thread's own, the gate and up products of all k picked experts
 * shared as one, then expert by expert in increasing order (moe_block's for
 * one token) the down product shared (into its own row of expert_out, so
 * that no thread writes where another still reads) and the weighted sum on
 * each thread's rows. */
static void team_experts(Context *ctx, int l, const float *xb, float *sum) {
    const ModelConfig *c = &ctx->model->config;
    const LayerWeights *w = &ctx->model->weights.layers[l];
    ForwardState *s = &ctx->state;
    int th = omp_get_thread_num(), n_experts = c->n_experts, k = c->n_experts_used;
    size_t dim = (size_t)c->dim, hidden = (size_t)c->expert_hidden_dim;
    float *hb = s->own_hb + th * s->own_hidden, *hb2 = s->own_hb2 + th * s->own_hidden;
    float *logits = s->own_router + th * s->own_experts, *out = s->own_expert + th * s->own_dim;
    int picks[MATMUL_MANY_MAX / 2];
    float weights[MATMUL_MANY_MAX / 2];

    const Tensor *router = &w->router;
    matmul_team(&s->router, xb, &router, 1, &s->mm);
    memcpy(logits, s->router, (size_t)n_experts * sizeof(float));
    add_bias(logits, w->b_router, 1, n_experts);
    route(c, logits, picks, weights);
    for (int j = 1; j < k; j++) /* the picks in increasing order, their weights with them */
        for (int i = j; i > 0 && picks[i - 1] > picks[i]; i--) {
            int e = picks[i];
            float wt = weights[i];
            picks[i] = picks[i - 1], weights[i] = weights[i - 1];
            picks[i - 1] = e, weights[i - 1] = wt;
        }
    Tensor gates[MATMUL_MANY_MAX / 2], ups[MATMUL_MANY_MAX / 2];
    float *outs[MATMUL_MANY_MAX];
    const Tensor *ws[MATMUL_MANY_MAX];
    for (int j = 0; j < k; j++) {
        gates[j] = model_expert_matrix(&w->gate_exps, n_experts, picks[j]);
        ups[j] = model_expert_matrix(&w->up_exps, n_experts, picks[j]);
        outs[2 * j] = s->hb + j * hidden, outs[2 * j + 1] = s->hb2 + j * hidden;
        ws[2 * j] = &gates[j], ws[2 * j + 1] = &ups[j];
    }
    matmul_team(outs, xb, ws, 2 * k, &s->mm);

    memset(sum, 0, dim * sizeof(float));
    for (int j = 0; j < k; j++) {
        int e = picks[j];
        memcpy(hb, s->hb + j * hidden, hidden * sizeof(float));
        memcpy(hb2, s->hb2 + j * hidden, hidden * sizeof(float));
        expert_activation(c, w, e, hb, hb2, 1);
        Tensor down = model_expert_matrix(&w->down_exps, n_experts, e);
        const Tensor *wd = &down;
        float *row = s->expert_out + j * dim;
        matmul_team(&row, hb, &wd, 1, &s->mm);
        memcpy(out, row, dim * sizeof(float));
        add_bias(out, expert_bias(w->b_down_exps, e, dim), 1, (int)dim);
        for (size_t i = 0; i < dim; i++) sum[i] += weights[j] * out[i];
    }
    if (th == 0) ctx->expert_passes += (size_t)k;
}

/* Layer l of the token at pos0 (its cell `first`), run by every thread of
 * the team on its own rows. */
static void team_layer(Context *ctx, int l, int first, int pos0) {
    const ModelConfig *c = &ctx->model->config;
    const LayerWeights *w = &ctx->model->weights.layers[l];
    ForwardState *s = &ctx->state;
    int th = omp_get_thread_num(), parallel = c->family.parallel_residual;
    size_t dim = (size_t)c->dim;
    float *x = s->own_x + th * s->own_dim, *xb = s->own_xb + th * s->own_dim;
    float *attn = s->own_attn + th * s->own_dim, *ffn = s->own_ffn + th * s->own_dim;
    float *hb = s->own_hb + th * s->own_hidden;

    branch_input(c, xb, x, w->attn_norm, w->attn_norm_b, 1);
    float *qkv[] = {s->q, s->k, s->v};
    const Tensor *wqkv[] = {&w->wq, &w->wk, &w->wv};
    matmul_team(qkv, xb, wqkv, 3, &s->mm);
    #pragma omp single
    attention_inputs(ctx, l, first, 1, pos0);
    double started = time_now_s();
    #pragma omp for schedule(static)
    for (int h = 0; h < c->n_heads; h++) attend_item(ctx, l, h, first, 1, pos0);
    if (th == 0) {
        ctx->stats.attention_seconds += time_now_s() - started;
        ctx->stats.barriers += 2; /* the single's end and the heads' */
    }
    const Tensor *wo = &w->wo;
    matmul_team(&s->xb2, s->xb, &wo, 1, &s->mm);
    memcpy(attn, s->xb2, dim * sizeof(float));
    attention_output(c, w, attn, 1);
    scale_branch(attn, dim, c->residual_scale, 0);
    if (!parallel) add_residual(x, attn, NULL, dim, 0);

    branch_input(c, xb, x, w->ffn_norm, w->ffn_norm_b, 1);
    if (c->n_experts) {
        team_experts(ctx, l, xb, ffn);
        if (w->ffn_post_norm) norm_row(c, ffn, ffn, w->ffn_post_norm, NULL);
    } else {
        float *gate_up[] = {s->hb, s->hb2};
        const Tensor *wgu[] = {&w->w_gate, &w->w_up};
        const Tensor *up = &w->w_up, *down = &w->w_down;
        if (model_family_gated(&c->family)) matmul_team(gate_up, xb, wgu, 2, &s->mm);
        else matmul_team(&s->hb, xb, &up, 1, &s->mm);
        /* the activation writes h in place and only reads g */
        memcpy(hb, s->hb, (size_t)c->hidden_dim * sizeof(float));
        ffn_activation(c, w, hb, s->hb2, 1);
        matmul_team(&s->xb, hb, &down, 1, &s->mm);
        memcpy(ffn, s->xb, dim * sizeof(float));
        ffn_output(c, w, ffn, 1);
    }
    scale_branch(ffn, dim, c->residual_scale, 0);
    add_residual(x, ffn, parallel ? attn : NULL, dim, 0);
}

/* The embedded token (s->x) through every layer and the final norm into
 * the classifier, in one region of `threads`. */
static void decode_in_team(Context *ctx, int first, int pos0, int threads) {
    const ModelConfig *c = &ctx->model->config;
    const ModelWeights *w = &ctx->model->weights;
    ForwardState *s = &ctx->state;
    ctx->stats.regions++;
    #pragma omp parallel num_threads(threads)
    {
        int th = omp_get_thread_num();
        float *x = s->own_x + th * s->own_dim, *xb = s->own_xb + th * s->own_dim;
        const Tensor *output = &w->output;
        memcpy(x, s->x, (size_t)c->dim * sizeof(float));
        for (int l = 0; l < c->n_layers; l++) team_layer(ctx, l, first, pos0);
        norm_row(c, xb, x, w->output_norm, w->output_norm_b);
        matmul_team(&s->logits, xb, &output, 1, &s->mm);
        matmul_team_end(&s->mm);
    }
}

const float *context_forward(Context *ctx, const int *tokens, int n, int pos0, int all_logits) {
    const ModelConfig *c = &ctx->model->config;
    const ModelWeights *w = &ctx->model->weights;
    ForwardState *s = &ctx->state;

    embed_tokens(ctx, tokens, n, pos0);
    int first_cell = kv_cache_append(&ctx->cache, tokens, n, pos0);
    for (int l = 0; l < c->n_layers; l++) pe_prepare(&ctx->layers[l].pe, pos0 + n - 1, ctx->cache.n_ctx);
    /* Only the rows whose logits are wanted go through the classifier. */
    int first = all_logits ? 0 : n - 1, rows = n - first, team = team_threads(ctx, n);
    if (team) {
        decode_in_team(ctx, first_cell, pos0, team);
    } else {
        for (int l = 0; l < c->n_layers; l++) transformer_layer(ctx, l, first_cell, n, pos0);
        float *x = s->x + (size_t)first * c->dim;
        norm_rows(c, x, x, w->output_norm, w->output_norm_b, rows);
        matmul(s->logits, x, &w->output, rows, &s->mm);
    }
    add_bias(s->logits, w->output_b, rows, c->vocab_size);
    size_t n_logits = (size_t)rows * c->vocab_size;
    if (c->logit_scale != 1.0f)
        for (size_t i = 0; i < n_logits; i++) s->logits[i] *= c->logit_scale;
    if (c->final_softcap > 0.0f)   /* Gemma 2: logits bent into (-cap, cap) */
        for (size_t i = 0; i < n_logits; i++)
            s->logits[i] = c->final_softcap * tanhf(s->logits[i] / c->final_softcap);
    return s->logits;
}
