#include "modes/perplexity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/kernels.h"
#include "model/sampler.h"

double ppl_log_normalizer(const float *logits, int vocab) {
    float max;
    double sum = sum_exp(logits, vocab, &max);
    return (double)max + log(sum);
}

double ppl_token_nll(const float *logits, int vocab, int target) {
    return ppl_log_normalizer(logits, vocab) - logits[target];
}

void ppl_mean_se(double sum, double sq_sum, long n, double *mean, double *se) {
    *mean = n > 0 ? sum / n : 0.0;
    double var = n > 1 ? sq_sum / n - *mean * *mean : 0.0; /* population variance */
    *se = var > 0.0 ? sqrt(var / (n - 1)) : 0.0;
}

/* KL(p || q) = sum_i p_i (log p_i - log q_i) from two rows of logits and
 * their log-normalizers, in double.  Terms with p_i = 0 add nothing (and
 * would be 0 * -inf for a token p rules out). */
static double kl_divergence(const float *p_logits, double p_lse, const float *q_logits,
                            double q_lse, int n) {
    double kl = 0.0;
    for (int i = 0; i < n; i++) {
        double lp = p_logits[i] - p_lse, p = exp(lp);
        if (p > 0.0) kl += p * (lp - (q_logits[i] - q_lse));
    }
    return kl;
}

/* The variants running side by side, and the baseline's per-row values of
 * the current chunk, which every other variant is compared with. */
typedef struct {
    Context *ctxs;
    int n_variants, baseline, vocab;
    PplResult *res;
    const PplHooks *hooks;
    double *base_lse;   /* (window) */
    double *base_nll;   /* (window) */
    int *base_top1;     /* (window) */
} Lockstep;

static void add_nll(PplResult *r, int pos_index, double nll) {
    r->nll_sum += nll;
    r->nll_sq_sum += nll * nll;
    r->n_scored++;
    if (pos_index >= 0 && pos_index < r->n_pos) {
        r->nll_by_pos[pos_index] += nll;
        r->nll_sq_by_pos[pos_index] += nll * nll;
        r->count_by_pos[pos_index]++;
    }
}

/* Runs the same chunk through every variant; each keeps its logits. */
static int forward_all(Lockstep *ls, const int *tokens, int n, int pos0, PosencError *err) {
    for (int v = 0; v < ls->n_variants; v++) {
        double t0 = time_now_s();
        if (!context_step(&ls->ctxs[v], tokens, n, pos0, 1, err)) return -1;
        ls->res[v].seconds += time_now_s() - t0;
        ls->res[v].n_chunks++;
    }
    return 0;
}

/* Scores rows [from, n) of the chunk every variant just ran: row i
 * predicts next[i] (= tokens[index0 + i]) from position pos0 + i, which is
 * position pos_index0 + i of the window. */
static void score_chunk(Lockstep *ls, const int *next, long index0, int from, int n, int pos0,
                        int pos_index0) {
    int V = ls->vocab, b = ls->baseline;
    const float *base = ls->ctxs[b].state.logits;
    double t0 = time_now_s();
    for (int i = from; i < n; i++) {
        const float *row = base + (size_t)i * V;
        ls->base_lse[i] = ppl_log_normalizer(row, V);
        ls->base_nll[i] = ls->base_lse[i] - row[next[i]];
        if (ls->n_variants > 1) ls->base_top1[i] = sampler_argmax(row, V);
        add_nll(&ls->res[b], pos_index0 + i, ls->base_nll[i]);
    }
    ls->res[b].seconds += time_now_s() - t0;
    for (int v = 0; v < ls->n_variants; v++) {
        if (v == b) continue;
        PplResult *r = &ls->res[v];
        const float *logits = ls->ctxs[v].state.logits;
        t0 = time_now_s();
        for (int i = from; i < n; i++) {
            const float *row = logits + (size_t)i * V;
            double lse = ppl_log_normalizer(row, V), nll = lse - row[next[i]];
            double diff = nll - ls->base_nll[i];
            add_nll(r, pos_index0 + i, nll);
            r->diff_sum += diff;
            r->diff_sq_sum += diff * diff;
            r->kl_sum += kl_divergence(base + (size_t)i * V, ls->base_lse[i], row, lse, V);
            r->top1_agree += sampler_argmax(row, V) == ls->base_top1[i];
        }
        r->seconds += time_now_s() - t0;
    }
    if (!ls->hooks || !ls->hooks->on_prediction) return;
    for (int v = 0; v < ls->n_variants; v++)
        for (int i = from; i < n; i++) {
            PplPrediction p = {v, index0 + i, pos0 + i,
                               ls->ctxs[v].state.logits + (size_t)i * V, next[i]};
            ls->hooks->on_prediction(&p, ls->hooks->user);
        }
}

/* 1 when the run is to stop early, after reporting where it stands. */
static int report_progress(const Lockstep *ls, long done, long total, const PplOptions *o) {
    if (ls->hooks && ls->hooks->progress) {
        PplProgressState state = {(double)done / total, done, total, ls->res, ls->n_variants};
        ls->hooks->progress(&state, ls->hooks->user);
    }
    return o->interrupted && *o->interrupted && done < total;
}

static int eval_windows(Lockstep *ls, const int *tokens, int n_tokens, const PplOptions *o,
                        PosencError *err) {
    int C = o->window, step = o->stride > 0 ? o->stride : C;
    long n_windows = n_tokens - 1 < C ? 0 : (long)(n_tokens - 1 - C) / step + 1;
    if (o->max_chunks > 0 && n_windows > o->max_chunks) n_windows = o->max_chunks;
    if (n_windows == 0)
        return posenc_error(err, "the text has %d tokens: too few for one window of %d", n_tokens, C);
    for (long k = 0; k < n_windows; k++) {
        const int *w = tokens + (size_t)k * step;
        for (int v = 0; v < ls->n_variants; v++) kv_cache_clear(&ls->ctxs[v].cache);
        if (forward_all(ls, w, C, o->pos_offset, err)) return -1;
        int from = o->stride > 0 && k > 0 ? C - o->stride : 0;
        score_chunk(ls, w + 1, k * step + 1, from, C, o->pos_offset, 0);
        if (report_progress(ls, k + 1, n_windows, o)) return 1;
    }
    return 0;
}

/* Every variant's cache has the same size and sees the same chunks, so all
 * fill, and shift, at the same moments: the first one stands for all. */
static int eval_stream(Lockstep *ls, const int *tokens, int n_tokens, const PplOptions *o,
                       PosencError *err) {
    const KVCache *kv = &ls->ctxs[0].cache;
    if (n_tokens < 2)
        return posenc_error(err, "the text has %d tokens: too few to score (at least 2)", n_tokens);
    for (int v = 0; v < ls->n_variants; v++) kv_cache_clear(&ls->ctxs[v].cache);
    for (int at = 0; at < n_tokens - 1;) {
        if (kv->n_used == kv->n_ctx) {
            if (o->shift == CONTEXT_SHIFT_OFF)
                return posenc_error(err, "stream: the context is full and --no-shift is set");
            /* one discard for all (that of the most kept cells), so the caches stay in step */
            int most_kept = o->keep;
            for (int v = 0; o->keeps && v < ls->n_variants; v++)
                if (v == 0 || o->keeps[v] > most_kept) most_kept = o->keeps[v];
            int discard = context_shift_discard(&ls->ctxs[0], most_kept);
            for (int v = 0; v < ls->n_variants; v++) {
                Context *ctx = &ls->ctxs[v];
                double t0 = time_now_s();
                if (context_shift(ctx, o->keeps ? o->keeps[v] : o->keep, discard, o->shift, err))
                    return -1;
                ls->res[v].seconds += time_now_s() - t0;
            }
        }
        int chunk = kv->n_ctx - kv->n_used;
        if (chunk > ls->ctxs[0].state.max_tokens) chunk = ls->ctxs[0].state.max_tokens;
        if (chunk > n_tokens - 1 - at) chunk = n_tokens - 1 - at;
        int pos = kv->n_used ? kv->pos[kv->n_used - 1] + 1 : o->pos_offset;
        if (forward_all(ls, tokens + at, chunk, pos, err)) return -1;
        score_chunk(ls, tokens + at + 1, at + 1, 0, chunk, pos, pos - o->pos_offset);
        at += chunk;
        if (report_progress(ls, at, n_tokens - 1, o)) return 1;
    }
    return 0;
}

static int check_contexts(const Context *ctxs, int n_variants, int baseline, const PplOptions *opt,
                          PosencError *err) {
    if (n_variants < 1 || baseline < 0 || baseline >= n_variants)
        return posenc_error(err, "baseline %d is not one of %d variants", baseline, n_variants);
    for (int v = 0; v < n_variants; v++) {
        const Context *c = &ctxs[v];
        if (opt->window <= 0 || opt->window > c->cache.n_ctx || opt->window > c->state.max_tokens)
            return posenc_error(err, "window %d does not fit the context (%d cells)", opt->window,
                                c->cache.n_ctx);
        if (c->model != ctxs[0].model || c->cache.n_ctx != ctxs[0].cache.n_ctx ||
            c->state.max_tokens != ctxs[0].state.max_tokens)
            return posenc_error(err, "the variants' contexts differ in model or size");
    }
    if (opt->stride < 0 || opt->stride > opt->window)
        return posenc_error(err, "--stride %d must be in 1..%d (the window)", opt->stride, opt->window);
    for (int v = 0; opt->stream && opt->shift != CONTEXT_SHIFT_OFF && v < n_variants; v++)
        if (context_shift_check_keep(ctxs[0].cache.n_ctx, opt->keeps ? opt->keeps[v] : opt->keep, err))
            return -1;
    return 0;
}

int ppl_evaluate_variants(Context *ctxs, int n_variants, int baseline, const int *tokens,
                          int n_tokens, const PplOptions *opt, PplResult *res,
                          const PplHooks *hooks, PosencError *err) {
    if (check_contexts(ctxs, n_variants, baseline, opt, err)) return -1;
    size_t W = (size_t)opt->window;
    for (int v = 0; v < n_variants; v++) {
        memset(&res[v], 0, sizeof res[v]);
        res[v].n_pos = opt->window;
        res[v].nll_by_pos = calloc_or_exit(W, sizeof(double), "the NLL by position");
        res[v].nll_sq_by_pos = calloc_or_exit(W, sizeof(double), "the squared NLL by position");
        res[v].count_by_pos = calloc_or_exit(W, sizeof(long), "the counts by position");
    }
    Lockstep ls = {ctxs, n_variants, baseline, ctxs[0].model->config.vocab_size, res, hooks,
                   malloc_or_exit(W * sizeof(double), "the baseline's log-sum-exp"),
                   malloc_or_exit(W * sizeof(double), "the baseline's NLL"),
                   malloc_or_exit(W * sizeof(int), "the baseline's top-1")};
    int rc = opt->stream ? eval_stream(&ls, tokens, n_tokens, opt, err)
                         : eval_windows(&ls, tokens, n_tokens, opt, err);
    res[baseline].top1_agree = res[baseline].n_scored;
    free(ls.base_lse);
    free(ls.base_nll);
    free(ls.base_top1);
    if (rc < 0)
        for (int v = 0; v < n_variants; v++) ppl_result_free(&res[v]);
    return rc;
}

int ppl_evaluate(Context *ctx, const int *tokens, int n_tokens, const PplOptions *opt,
                 PplResult *res, PplProgress progress, void *user, PosencError *err) {
    PplHooks hooks = {.progress = progress, .user = user};
    return ppl_evaluate_variants(ctx, 1, 0, tokens, n_tokens, opt, res, &hooks, err);
}

void ppl_result_free(PplResult *res) {
    free(res->nll_by_pos);
    free(res->nll_sq_by_pos);
    free(res->count_by_pos);
    res->nll_by_pos = res->nll_sq_by_pos = NULL;
    res->count_by_pos = NULL;
}
