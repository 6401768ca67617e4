#include "model/context.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Allocates rows x cols floats or fails with a message naming `what`. */
static float *alloc_matrix(size_t rows, size_t cols, const char *what, PosencError *err) {
    size_t n;
    float *p = NULL;
    if (size_mul3(&n, rows, cols, sizeof(float))) p = malloc(n ? n : 1);
    if (!p) posenc_error_oom(err, rows, cols * sizeof(float), what);
    return p;
}

static void forward_state_free(ForwardState *s) {
    free(s->x); free(s->xb); free(s->xb2); free(s->q); free(s->k); free(s->v);
    free(s->hb); free(s->hb2); free(s->att); free(s->logits);
    matmul_scratch_free(&s->mm);
    memset(s, 0, sizeof *s);
}

static int forward_state_build(ForwardState *s, const ModelConfig *c, int n_ctx, int max_tokens,
                               int f16_cache, PosencError *err) {
    memset(s, 0, sizeof *s);
    size_t n = (size_t)max_tokens;
    s->max_tokens = max_tokens;
    s->att_rows = omp_get_max_threads();
    if (!(s->x = alloc_matrix(n, (size_t)c->dim, "activations", err)) ||
        !(s->xb = alloc_matrix(n, (size_t)c->dim, "activations", err)) ||
        !(s->xb2 = alloc_matrix(n, (size_t)c->dim, "activations", err)) ||
        !(s->q = alloc_matrix(n, (size_t)c->dim, "queries", err)) ||
        (f16_cache && !(s->k = alloc_matrix(n, (size_t)model_kv_dim(c), "keys", err))) ||
        (f16_cache && !(s->v = alloc_matrix(n, (size_t)model_kv_dim(c), "values", err))) ||
        !(s->hb = alloc_matrix(n, (size_t)c->hidden_dim, "feed-forward buffer", err)) ||
        !(s->hb2 = alloc_matrix(n, (size_t)c->hidden_dim, "feed-forward buffer", err)) ||
        !(s->att = alloc_matrix((size_t)s->att_rows * ATT_TILE, (size_t)n_ctx, "attention scores",
                                err)) ||
        !(s->logits = alloc_matrix(n, (size_t)c->vocab_size, "logits", err)) ||
        matmul_scratch_build(&s->mm, c->dim > c->hidden_dim ? c->dim : c->hidden_dim, err)) {
        forward_state_free(s);
        return -1;
    }
    return 0;
}

int context_build(Context *ctx, const Model *m, const PeParams *pe, int n_ctx, int max_tokens,
                  PosencError *err) {
    return context_build_kv(ctx, m, pe, n_ctx, max_tokens, TENSOR_F32, err);
}

int context_build_kv(Context *ctx, const Model *m, const PeParams *pe, int n_ctx, int max_tokens,
                     TensorType kv_type, PosencError *err) {
    memset(ctx, 0, sizeof *ctx);
    const ModelConfig *c = &m->config;
    if (n_ctx <= 0) return posenc_error(err, "--ctx must be positive (got %d)", n_ctx);
    if (max_tokens <= 0 || max_tokens > n_ctx) max_tokens = n_ctx;
    ctx->model = m;
    if (pe_build(&ctx->pe, pe, c->dim, c->n_heads, model_head_size(c), c->seq_len,
                 m->weights.position_embd, m->weights.n_positions, err))
        return -1;
    if (kv_cache_build(&ctx->cache, c->n_layers, model_kv_dim(c), n_ctx, kv_type, err) ||
        forward_state_build(&ctx->state, c, n_ctx, max_tokens, kv_type == TENSOR_F16, err)) {
        context_free(ctx);
        return -1;
    }
    return 0;
}

void context_free(Context *ctx) {
    pe_free(&ctx->pe);
    kv_cache_free(&ctx->cache);
    forward_state_free(&ctx->state);
}

int context_check_chunk(const Context *ctx, const int *tokens, int n, int pos0, PosencError *err) {
    const ModelConfig *c = &ctx->model->config;
    if (n <= 0) return posenc_error(err, "empty chunk");
    if (n > ctx->state.max_tokens)
        return posenc_error(err, "chunk of %d tokens exceeds the batch capacity %d", n,
                            ctx->state.max_tokens);
    if (n > ctx->cache.n_ctx - ctx->cache.n_used)
        return posenc_error(err, "%d tokens do not fit in the context: %d of %d cells used", n,
                            ctx->cache.n_used, ctx->cache.n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return posenc_error(err, "token id %d out of range [0, %d)", tokens[i], c->vocab_size);
    int limit = pe_position_limit(&ctx->pe);
    if (pos0 < 0 || pos0 > limit - n)
        return posenc_error(err, "positions %d..%d are past the %s table of %d positions "
                                 "(see --pe-overflow)",
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
