#include "model/context.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Allocates rows x cols floats or fails with a message naming `what`; on
 * cache lines (malloc_lines: one-thread f32 pp512 at 110M went from 687 to
 * 722 tok/s with the activations aligned). */
static void *alloc_elements(size_t rows, size_t cols, size_t size, const char *what,
                            PosencError *err) {
    size_t n;
    void *p = NULL;
    if (size_mul3(&n, rows, cols, size)) p = malloc_lines(n);
    if (!p) posenc_error_oom(err, rows, cols * size, what);
    return p;
}

static float *alloc_matrix(size_t rows, size_t cols, const char *what, PosencError *err) {
    return alloc_elements(rows, cols, sizeof(float), what, err);
}

static void forward_state_free(ForwardState *s) {
    free(s->x); free(s->xb); free(s->xb2); free(s->q); free(s->k); free(s->v);
    free(s->hb); free(s->hb2); free(s->att); free(s->logits);
    free(s->q_grouped); free(s->k_grouped); free(s->att_grouped);
    free(s->router); free(s->picks); free(s->pick_weights); free(s->slots_by_expert);
    free(s->expert_start); free(s->expert_in); free(s->expert_out); free(s->expert_sum);
    free(s->own_x); free(s->own_xb); free(s->own_attn); free(s->own_ffn); free(s->own_hb);
    free(s->own_hb2); free(s->own_router); free(s->own_expert);
    matmul_scratch_free(&s->mm);
    memset(s, 0, sizeof *s);
}

/* The forward state's buffers, rows x cols floats each: one list serves
 * both allocating them and context_memory's sum, so the two cannot drift. */
typedef struct {
    float **dst;        /* a float buffer, or NULL and: */
    int **ints;         /* an int buffer */
    size_t rows, cols;
    const char *what;
} StateBuffer;
#define MAX_STATE_BUFFERS 26

/* The feed-forward's hidden width: an expert's in a mixture of experts. */
static size_t ffn_width(const ModelConfig *c) {
    return (size_t)(c->n_experts ? c->expert_hidden_dim : c->hidden_dim);
}

static int state_buffers(ForwardState *s, const ModelConfig *c, const ContextSize *z,
                         StateBuffer *b) {
    size_t n = (size_t)z->max_tokens, dim = (size_t)c->dim, hidden = ffn_width(c);
    size_t kv_dim = (size_t)model_kv_dim(c), q_dim = (size_t)model_q_dim(c);
    int k = 0;
    b[k++] = (StateBuffer){&s->x, NULL, n, dim, "activations"};
    /* xb holds a normed row (dim), then the heads' outputs (q_dim) */
    b[k++] = (StateBuffer){&s->xb, NULL, n, dim > q_dim ? dim : q_dim, "activations"};
    b[k++] = (StateBuffer){&s->xb2, NULL, n, dim, "activations"};
    b[k++] = (StateBuffer){&s->q, NULL, n, q_dim, "queries"};
    /* new keys and values, before kv_cache_store puts them in their heads' cells */
    b[k++] = (StateBuffer){&s->k, NULL, n, kv_dim, "keys"};
    b[k++] = (StateBuffer){&s->v, NULL, n, kv_dim, "values"};
    b[k++] = (StateBuffer){&s->hb, NULL, n, hidden, "the feed-forward buffers"};
    b[k++] = (StateBuffer){&s->hb2, NULL, n, hidden, "the feed-forward buffers"};
    size_t threads = (size_t)omp_get_max_threads();
    b[k++] = (StateBuffer){&s->att, NULL, threads * ATT_TILE, (size_t)ATT_BLOCK + (size_t)c->head_size,
                           "attention scores"};
    b[k++] = (StateBuffer){&s->logits, NULL, (size_t)z->logit_rows, (size_t)c->vocab_size, "logits"};
    s->own_dim = (dim + 15) / 16 * 16;
    s->own_hidden = (hidden + 15) / 16 * 16;
    b[k++] = (StateBuffer){&s->own_x, NULL, threads, s->own_dim, "the threads' rows"};
    b[k++] = (StateBuffer){&s->own_xb, NULL, threads, s->own_dim, "the threads' rows"};
    b[k++] = (StateBuffer){&s->own_attn, NULL, threads, s->own_dim, "the threads' rows"};
    b[k++] = (StateBuffer){&s->own_ffn, NULL, threads, s->own_dim, "the threads' rows"};
    b[k++] = (StateBuffer){&s->own_hb, NULL, threads, s->own_hidden, "the threads' rows"};
    b[k++] = (StateBuffer){&s->own_hb2, NULL, threads, s->own_hidden, "the threads' rows"};
    if (!c->n_experts) return k;
    size_t experts = (size_t)c->n_experts, used = (size_t)c->n_experts_used;
    b[k++] = (StateBuffer){&s->router, NULL, n, experts, "the router's logits"};
    b[k++] = (StateBuffer){NULL, &s->picks, n, used, "the experts' picks"};
    b[k++] = (StateBuffer){&s->pick_weights, NULL, n, used, "the experts' picks"};
    b[k++] = (StateBuffer){NULL, &s->slots_by_expert, n, used, "the experts' picks"};
    b[k++] = (StateBuffer){NULL, &s->expert_start, 1, experts + 1, "the experts' picks"};
    b[k++] = (StateBuffer){&s->expert_in, NULL, n, dim, "the experts' buffers"};
    b[k++] = (StateBuffer){&s->expert_out, NULL, n, dim, "the experts' buffers"};
    b[k++] = (StateBuffer){&s->expert_sum, NULL, n, dim, "the experts' buffers"};
    s->own_experts = (experts + 15) / 16 * 16;
    b[k++] = (StateBuffer){&s->own_router, NULL, threads, s->own_experts, "the threads' rows"};
    b[k++] = (StateBuffer){&s->own_expert, NULL, threads, s->own_dim, "the threads' rows"};
    return k;
}

/* The widest row a matmul reads: dim, the feed-forward's width, or q_dim
 * (into wo). */
static int matmul_width(const ModelConfig *c) {
    int hidden = (int)ffn_width(c), w = c->dim > hidden ? c->dim : hidden;
    return w > model_q_dim(c) ? w : model_q_dim(c);
}

static int forward_state_build(ForwardState *s, const ModelConfig *c, const ContextSize *z,
                               PosencError *err) {
    memset(s, 0, sizeof *s);
    s->max_tokens = z->max_tokens;
    s->logit_rows = z->logit_rows;
    StateBuffer b[MAX_STATE_BUFFERS];
    int n = state_buffers(s, c, z, b);
    for (int i = 0; i < n; i++) {
        void *p = alloc_elements(b[i].rows, b[i].cols, b[i].dst ? sizeof(float) : sizeof(int),
                                 b[i].what, err);
        if (b[i].dst) *b[i].dst = p;
        else *b[i].ints = p;
        if (!p) {
            forward_state_free(s);
            return -1;
        }
    }
    if (matmul_scratch_build(&s->mm, matmul_width(c), err)) {
        forward_state_free(s);
        return -1;
    }
    return 0;
}

ContextSize context_size_generate(int n_ctx, TensorType kv_type) {
    int chunk = n_ctx < CONTEXT_PREFILL_CHUNK ? n_ctx : CONTEXT_PREFILL_CHUNK;
    return (ContextSize){.n_ctx = n_ctx, .max_tokens = chunk, .logit_rows = 1, .kv_type = kv_type};
}

ContextSize context_size_ppl(int n_ctx, TensorType kv_type) {
    return (ContextSize){.n_ctx = n_ctx, .max_tokens = n_ctx, .logit_rows = n_ctx, .kv_type = kv_type};
}

int context_build(Context *ctx, const Model *m, const PeParams *pe, int n_ctx, int max_tokens,
                  PosencError *err) {
    return context_build_kv(ctx, m, pe, n_ctx, max_tokens, TENSOR_F32, err);
}

int context_build_kv(Context *ctx, const Model *m, const PeParams *pe, int n_ctx, int max_tokens,
                     TensorType kv_type, PosencError *err) {
    if (max_tokens <= 0 || max_tokens > n_ctx) max_tokens = n_ctx;
    ContextSize size = {.n_ctx = n_ctx, .max_tokens = max_tokens, .logit_rows = max_tokens,
                        .kv_type = kv_type};
    return context_build_sized(ctx, m, pe, &size, err);
}

int context_build_sized(Context *ctx, const Model *m, const PeParams *pe, const ContextSize *size,
                        PosencError *err) {
    memset(ctx, 0, sizeof *ctx);
    const ModelConfig *c = &m->config;
    if (size->n_ctx <= 0)
        return posenc_error(err, "a context needs at least one cell (got %d)", size->n_ctx);
    if (size->max_tokens < 1 || size->max_tokens > size->n_ctx || size->logit_rows < 1 ||
        size->logit_rows > size->max_tokens)
        return posenc_error(err, "chunks of %d tokens with %d rows of logits do not fit %d cells",
                            size->max_tokens, size->logit_rows, size->n_ctx);
    ctx->model = m;
    if (model_build_scheme(m, pe, &ctx->pe, err)) return -1;
    ctx->layers = calloc_or_exit((size_t)c->n_layers, sizeof *ctx->layers, "the layers' attention");
    if (kv_cache_build(&ctx->cache, c->n_layers, model_kv_dim(c), model_head_size(c), size->n_ctx, size->kv_type,
                       err) ||
        forward_state_build(&ctx->state, c, size, err)) {
        context_free(ctx);
        return -1;
    }
    LayerAttention *table = model_layers_for(m, pe);
    int rc = context_use_layers(ctx, table, err);
    free(table);
    if (rc) context_free(ctx);
    return rc;
}

static size_t sat_add(size_t a, size_t b) {
    size_t r;
    return size_add(&r, a, b) ? r : SIZE_MAX;
}

ContextMemory context_memory(const Model *m, const ContextSize *size) {
    const ModelConfig *c = &m->config;
    ContextMemory mem = {
        .weights = sat_add(sat_add(m->gguf ? m->gguf->map.size : m->file.size, m->owned_bytes),
                           m->packed_bytes),
        .kv_cache = kv_cache_bytes(c->n_layers, model_kv_dim(c), size->n_ctx, size->kv_type),
        .scratch = matmul_scratch_bytes(matmul_width(c)),
    };
    ForwardState unused;
    StateBuffer b[MAX_STATE_BUFFERS];
    int n = state_buffers(&unused, c, size, b);
    for (int i = 0; i < n; i++) {
        size_t bytes;
        if (!size_mul3(&bytes, b[i].rows, b[i].cols, b[i].dst ? sizeof(float) : sizeof(int)))
            bytes = SIZE_MAX;
        mem.scratch = sat_add(mem.scratch, bytes);
    }
    if (size->self_extend) { /* what self_extend_buffers allocates */
        size_t keys, rows, scores; /* kv_cache_group_keys's store: the cache's keys again */
        if (!size_mul3(&keys, (size_t)c->n_layers * (size_t)size->n_ctx, (size_t)model_kv_dim(c),
                       tensor_row_bytes(size->kv_type, 1)))
            keys = SIZE_MAX;
        mem.kv_cache = sat_add(mem.kv_cache, keys);
        if (!size_mul(&rows, (size_t)size->max_tokens, (size_t)(model_q_dim(c) + model_kv_dim(c)) * sizeof(float)))
            rows = SIZE_MAX;
        if (!size_mul3(&scores, (size_t)omp_get_max_threads() * ATT_TILE, ATT_BLOCK, sizeof(float)))
            scores = SIZE_MAX;
        mem.scratch = sat_add(sat_add(mem.scratch, rows), scores);
    }
    mem.total = sat_add(sat_add(mem.weights, mem.kv_cache), mem.scratch);
    return mem;
}

int context_observe_attention(Context *ctx, AttentionObserver fn, void *user, PosencError *err) {
    free(ctx->observer_rows);
    ctx->observer_rows = NULL;
    ctx->observe_attention = NULL;
    ctx->observer_user = NULL;
    if (!fn) return 0;
    if (!(ctx->observer_rows = alloc_matrix((size_t)omp_get_max_threads() * ATT_TILE, (size_t)ctx->cache.n_ctx,
                                            "the observed attention rows", err)))
        return -1;
    ctx->observe_attention = fn;
    ctx->observer_user = user;
    return 0;
}

/* Self-Extend's buffers where a layer of `table` groups, freed where none
 * does. */
static int self_extend_buffers(Context *ctx, const LayerAttention *table, PosencError *err) {
    const ModelConfig *c = &ctx->model->config;
    ForwardState *s = &ctx->state;
    int on = 0;
    for (int l = 0; l < c->n_layers; l++) on |= table[l].self_extend_group > 0;
    if (kv_cache_group_keys(&ctx->cache, on, err)) return -1;
    if (!on) {
        free(s->q_grouped), free(s->k_grouped), free(s->att_grouped);
        s->q_grouped = s->k_grouped = s->att_grouped = NULL;
        return 0;
    }
    if (s->q_grouped) return 0;
    size_t n = (size_t)s->max_tokens;
    if (!(s->q_grouped = alloc_matrix(n, (size_t)model_q_dim(c), "Self-Extend's queries", err)) ||
        !(s->k_grouped = alloc_matrix(n, (size_t)model_kv_dim(c), "Self-Extend's keys", err)) ||
        !(s->att_grouped = alloc_matrix((size_t)omp_get_max_threads() * ATT_TILE, ATT_BLOCK,
                                        "Self-Extend's scores", err)))
        return -1;
    return 0;
}

int context_use_layers(Context *ctx, const LayerAttention *table, PosencError *err) {
    const Model *m = ctx->model;
    if (self_extend_buffers(ctx, table, err)) return -1;
    for (int l = 0; l < m->config.n_layers; l++) {
        ContextLayer *cl = &ctx->layers[l];
        char where[32];
        snprintf(where, sizeof where, "layer %d", l);
        if (table[l].window < 0 || table[l].chunk < 0) {
            posenc_error(err, "a window of %d or a chunk of %d is negative", table[l].window,
                         table[l].chunk);
            return posenc_error_prefix(err, where);
        }
        if (table[l].self_extend_group && !pe_kind_ops(table[l].pe.kind)->rotate) {
            posenc_error(err, "Self-Extend groups rotary positions and the layer's scheme %s has none",
                         pe_kind_name(table[l].pe.kind));
            return posenc_error_prefix(err, where);
        }
        PositionalEncoding built;
        if (model_build_scheme(m, &table[l].pe, &built, err)) return posenc_error_prefix(err, where);
        pe_free(&cl->pe);
        const LayerAttention *la = &table[l];
        *cl = (ContextLayer){.pe = built, .window = la->window, .chunk = la->chunk,
                             .score_div = la->score_div, .softcap = la->softcap,
                             .self_extend_group = la->self_extend_group,
                             .self_extend_window = la->self_extend_window,
                             .temperature_beta = la->temperature_beta,
                             .temperature_length = la->temperature_length,
                             .temperature_offset = la->temperature_offset,
                             .sinks = la->sinks_off ? NULL : m->weights.layers[l].attn_sinks};
    }
    return 0;
}

int context_self_extend_layer(const Context *ctx) {
    for (int l = 0; l < ctx->model->config.n_layers; l++)
        if (ctx->layers[l].self_extend_group) return l;
    return -1;
}

int context_narrowest_window(const Context *ctx, int *layers) {
    int window = 0;
    *layers = 0;
    for (int l = 0; l < ctx->model->config.n_layers; l++) {
        int w = ctx->layers[l].window;
        if (!w) continue;
        if (!window || w < window) window = w, *layers = 0;
        if (w == window) ++*layers;
    }
    return window;
}

/* Where the model-wide scheme puts position in the hidden states (the
 * embedding's schemes, and `none`, whose states count positions through the
 * causal mask) the moved tokens are run again.  Otherwise each layer needs
 * its own: a rotating layer re-rotates its keys (or recomputes, where the
 * rotation follows the sequence's length); a layer without position among
 * positioned ones (SmolLM3's NoPE layers), like alibi's and t5's, only has
 * its cells' positions updated, as llama.cpp does. */
PeShiftAction context_shift_needs(const Context *ctx) {
    if (pe_shift_action(&ctx->pe) == PE_SHIFT_RECOMPUTE) return PE_SHIFT_RECOMPUTE;
    PeShiftAction need = PE_SHIFT_POSITIONS;
    for (int l = 0; l < ctx->model->config.n_layers; l++) {
        const PositionalEncoding *pe = &ctx->layers[l].pe;
        PeShiftAction a = pe->params.kind == PE_NONE ? PE_SHIFT_POSITIONS : pe_shift_action(pe);
        if (a == PE_SHIFT_RECOMPUTE) return a;
        if (a == PE_SHIFT_REROTATE) need = a;
    }
    return need;
}

void context_free(Context *ctx) {
    free(ctx->observer_rows);
    if (ctx->layers)
        for (int l = 0; l < ctx->model->config.n_layers; l++) pe_free(&ctx->layers[l].pe);
    free(ctx->layers);
    pe_free(&ctx->pe);
    kv_cache_free(&ctx->cache);
    forward_state_free(&ctx->state);
}

int context_check_chunk(const Context *ctx, const int *tokens, int n, int pos0, PosencError *err) {
    if (n > ctx->state.max_tokens)
        return posenc_error(err, "chunk of %d tokens exceeds the batch capacity %d", n,
                            ctx->state.max_tokens);
    return context_check_tokens(ctx, tokens, n, pos0, err);
}

const float *context_prefill(Context *ctx, const int *tokens, int n, int pos0) {
    const float *logits = NULL;
    for (int done = 0; done < n;) {
        int chunk = n - done < ctx->state.max_tokens ? n - done : ctx->state.max_tokens;
        logits = context_forward(ctx, tokens + done, chunk, pos0 + done, 0);
        done += chunk;
    }
    return logits;
}

const float *context_step(Context *ctx, const int *tokens, int n, int pos0, int all_logits,
                          PosencError *err) {
    if (context_check_chunk(ctx, tokens, n, pos0, err)) return NULL;
    const float *logits = context_forward(ctx, tokens, n, pos0, all_logits);
    int rows = all_logits ? n : 1, first = all_logits ? pos0 : pos0 + n - 1;
    return context_check_logits(ctx, logits, rows, first, err) ? NULL : logits;
}

int context_check_tokens(const Context *ctx, const int *tokens, int n, int pos0, PosencError *err) {
    const ModelConfig *c = &ctx->model->config;
    if (n <= 0) return posenc_error(err, "empty chunk");
    if (n > ctx->cache.n_ctx - ctx->cache.n_used)
        return posenc_error(err, "%d tokens do not fit in the context: %d of %d cells used", n,
                            ctx->cache.n_used, ctx->cache.n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return posenc_error(err, "token id %d out of range [0, %d)", tokens[i], c->vocab_size);
    if (pos0 < 0) return posenc_error(err, "position %d is negative", pos0);
    int limit = pe_position_limit(&ctx->pe);
    if (pos0 > limit - n)
        return posenc_error(err, "positions %d..%d are past the %s table of %d positions "
                                 "(overflow policy: error)",
                            pos0, pos0 + n - 1, pe_kind_name(ctx->pe.params.kind), limit);
    return 0;
}

int context_check_logits(const Context *ctx, const float *logits, int rows, int pos0,
                         PosencError *err) {
    size_t vocab = (size_t)ctx->model->config.vocab_size;
    for (int r = 0; r < rows; r++) {
        /* The largest magnitude as bits: an integer reduction, which the
         * compiler vectorizes; inf and NaN are the bit patterns from
         * 0x7f800000 up. */
        uint32_t max_bits = 0;
        for (size_t i = 0; i < vocab; i++) {
            uint32_t bits;
            memcpy(&bits, logits + (size_t)r * vocab + i, sizeof bits);
            bits &= 0x7fffffffu;
            max_bits = bits > max_bits ? bits : max_bits;
        }
        if (max_bits >= 0x7f800000u)
            return posenc_error(err, "%s: the model produced non-finite logits (NaN or infinity) "
                                     "at position %d", ctx->model->path, pos0 + r);
    }
    return 0;
}
