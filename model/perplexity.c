#include "model/perplexity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/kernels.h"

double ppl_token_nll(const float *logits, int vocab, int target) {
    float max;
    double sum = sum_exp(logits, vocab, &max);
    return ((double)max - logits[target]) + log(sum);
}

/* Scores rows [from, n) of a chunk's logits against the tokens that follow. */
static void score_rows(const Context *ctx, const float *logits, const int *next_tokens, int from,
                       int n, int pos_index0, PplResult *res) {
    int vocab = ctx->model->config.vocab_size;
    for (int i = from; i < n; i++) {
        double nll = ppl_token_nll(logits + (size_t)i * vocab, vocab, next_tokens[i]);
        res->nll_sum += nll;
        res->n_scored++;
        int p = pos_index0 + i;
        if (p >= 0 && p < res->n_pos) {
            res->nll_by_pos[p] += nll;
            res->count_by_pos[p]++;
        }
    }
}

static int eval_windows(Context *ctx, const int *tokens, int n_tokens, const PplOptions *o,
                        PplResult *res, PplProgress progress, void *user, PosencError *err) {
    int C = o->window, step = o->stride > 0 ? o->stride : C;
    long n_windows = n_tokens - 1 < C ? 0 : (long)(n_tokens - 1 - C) / step + 1;
    if (o->max_chunks > 0 && n_windows > o->max_chunks) n_windows = o->max_chunks;
    if (n_windows == 0)
        return posenc_error(err, "the text has %d tokens: too few for one window of %d", n_tokens, C);
    for (long k = 0; k < n_windows; k++) {
        const int *w = tokens + (size_t)k * step;
        kv_cache_clear(&ctx->cache);
        if (context_check_chunk(ctx, w, C, o->pos_offset, err)) return -1;
        const float *logits = context_forward(ctx, w, C, o->pos_offset, 1);
        if (context_check_logits(ctx, logits, C, o->pos_offset, err)) return -1;
        int from = o->stride > 0 && k > 0 ? C - o->stride : 0;
        score_rows(ctx, logits, w + 1, from, C, 0, res);
        if (progress) progress((double)(k + 1) / n_windows, user);
    }
    return 0;
}

static int eval_stream(Context *ctx, const int *tokens, int n_tokens, const PplOptions *o,
                       PplResult *res, PplProgress progress, void *user, PosencError *err) {
    KVCache *kv = &ctx->cache;
    if (n_tokens < 2)
        return posenc_error(err, "the text has %d tokens: too few to score (at least 2)", n_tokens);
    kv_cache_clear(kv);
    for (int at = 0; at < n_tokens - 1;) {
        if (kv->n_used == kv->n_ctx) {
            if (o->shift == CONTEXT_SHIFT_OFF)
                return posenc_error(err, "stream: the context is full and --no-shift is set");
            if (context_shift(ctx, o->keep, context_shift_discard(ctx, o->keep), o->shift, err))
                return -1;
        }
        int chunk = kv->n_ctx - kv->n_used;
        if (chunk > ctx->state.max_tokens) chunk = ctx->state.max_tokens;
        if (chunk > n_tokens - 1 - at) chunk = n_tokens - 1 - at;
        int pos = kv->n_used ? kv->pos[kv->n_used - 1] + 1 : o->pos_offset;
        if (context_check_chunk(ctx, tokens + at, chunk, pos, err)) return -1;
        const float *logits = context_forward(ctx, tokens + at, chunk, pos, 1);
        if (context_check_logits(ctx, logits, chunk, pos, err)) return -1;
        score_rows(ctx, logits, tokens + at + 1, 0, chunk, pos - o->pos_offset, res);
        at += chunk;
        if (progress) progress((double)at / (n_tokens - 1), user);
    }
    return 0;
}

int ppl_evaluate(Context *ctx, const int *tokens, int n_tokens, const PplOptions *opt,
                 PplResult *res, PplProgress progress, void *user, PosencError *err) {
    memset(res, 0, sizeof *res);
    if (opt->window <= 0 || opt->window > ctx->cache.n_ctx || opt->window > ctx->state.max_tokens)
        return posenc_error(err, "window %d does not fit the context (%d cells)", opt->window,
                            ctx->cache.n_ctx);
    if (opt->stride < 0 || opt->stride > opt->window)
        return posenc_error(err, "--stride %d must be in 1..%d (the window)", opt->stride, opt->window);
    if (opt->stream && opt->shift != CONTEXT_SHIFT_OFF &&
        context_shift_check_keep(ctx->cache.n_ctx, opt->keep, err))
        return -1;
    res->n_pos = opt->window;
    res->nll_by_pos = callocCheck((size_t)opt->window, sizeof(double), "the NLL by position");
    res->count_by_pos = callocCheck((size_t)opt->window, sizeof(long), "the counts by position");
    double t0 = time_now_s();
    int rc = opt->stream ? eval_stream(ctx, tokens, n_tokens, opt, res, progress, user, err)
                         : eval_windows(ctx, tokens, n_tokens, opt, res, progress, user, err);
    res->seconds = time_now_s() - t0;
    if (rc) ppl_result_free(res);
    return rc;
}

void ppl_result_free(PplResult *res) {
    free(res->nll_by_pos);
    free(res->count_by_pos);
    res->nll_by_pos = NULL;
    res->count_by_pos = NULL;
}
