/* Perplexity of a token stream, three ways:
 *  windows:  window k feeds tokens [kC, (k+1)C) as one chunk from an empty
 *            cache and scores predictions of [kC+1, (k+1)C], so each token
 *            after the first is scored once;
 *  stride S: windows of C tokens advancing by S; the first scores all its
 *            predictions, later ones only their last S (a sliding window);
 *  stream:   the tokens flow through one cache of C cells with context
 *            shifts when it fills, as in a long generation.
 *
 * Several contexts (variants: one model, different positional schemes) run
 * in lockstep, window by window or chunk by chunk, so every variant scores
 * exactly the same predictions and each can be compared with a baseline
 * token by token — paired NLL difference, KL divergence, top-1 agreement —
 * while only one window's logits per variant are ever held. */
#ifndef POSENC_PERPLEXITY_H
#define POSENC_PERPLEXITY_H
#include <signal.h>

#include "model/context.h"
#include "model/shift.h"

typedef struct {
    int window;         /* C; the context must hold C cells and C-token chunks */
    int stride;         /* 0: consecutive windows */
    int max_chunks;     /* windows to score at most; 0: all */
    int stream;
    int keep;           /* stream: cells kept by every shift */
    const int *keeps;   /* stream: (n_variants) each variant's kept cells instead of keep
                           (StreamingLLM's sinks compared); NULL: keep for every variant */
    ContextShiftMode shift;
    int pos_offset;     /* position of each window's (or the stream's) first token */
    volatile sig_atomic_t *interrupted; /* set (by a SIGINT handler) to stop after the window
                                           or chunk in hand, keeping what was scored; or NULL */
} PplOptions;

typedef struct {
    double nll_sum, nll_sq_sum;  /* nats; the squares give the standard error */
    long n_scored;
    double *nll_by_pos;          /* (n_pos) NLL summed per position within the window */
    double *nll_sq_by_pos;       /* (n_pos) squares */
    long *count_by_pos;          /* (n_pos) */
    int n_pos;
    long n_chunks;               /* windows, or forward chunks of a stream */
    double seconds;              /* this variant's forward passes and scoring */
    /* Against the baseline, per prediction; the baseline itself has zero
     * sums and agrees with itself on every token. */
    double diff_sum, diff_sq_sum; /* NLL(this) - NLL(baseline) */
    double kl_sum;                /* KL(baseline || this) in nats */
    long top1_agree;              /* predictions whose argmax is the baseline's */
} PplResult;

/* One scored prediction of one variant, for --logits-out. */
typedef struct {
    int variant;
    long index;          /* the predicted token is tokens[index] */
    int pos;             /* position of the token whose logits these are */
    const float *logits; /* (vocab) raw logits */
    int target;          /* tokens[index] */
} PplPrediction;

/* Where a run stands after each window (or stream chunk): the share of the
 * work done and every variant's totals so far. */
typedef struct {
    double fraction;
    long done, total;          /* windows, or tokens of a stream */
    const PplResult *res;      /* (n_variants) */
    int n_variants;
} PplProgressState;

typedef void (*PplProgress)(const PplProgressState *state, void *user);

typedef struct {
    PplProgress progress;                                      /* or NULL */
    void (*on_prediction)(const PplPrediction *p, void *user); /* or NULL */
    void *user;
} PplHooks;

/* Scores `tokens` under ctxs[0..n_variants) in lockstep; res[v] gets
 * variant v's totals and its comparison with ctxs[baseline].  All contexts
 * must have the same model and at least `window` cells and chunk capacity.
 * Returns 0 (1 when opt->interrupted stopped it early: the results hold
 * what was scored), or -1 with a one-line reason (and no results to free). */
int ppl_evaluate_variants(Context *ctxs, int n_variants, int baseline, const int *tokens,
                          int n_tokens, const PplOptions *opt, PplResult *res,
                          const PplHooks *hooks, PosencError *err);
/* One context, no comparison. */
int ppl_evaluate(Context *ctx, const int *tokens, int n_tokens, const PplOptions *opt,
                 PplResult *res, PplProgress progress, void *user, PosencError *err);
void ppl_result_free(PplResult *res);

/* Mean of n samples from their sum and sum of squares, and its standard
 * error sqrt((E[x^2] - E[x]^2) / (n - 1)) — the sample standard deviation
 * over sqrt(n), as llama.cpp's perplexity reports it; 0 when n < 2. */
void ppl_mean_se(double sum, double sq_sum, long n, double *mean, double *se);

/* log sum_i exp(logits[i]): the softmax's log-normalizer, so that a log
 * probability is logits[i] minus it.  The sum of exponentials is float
 * (within ~vocab ulp relative), the rest double, at any logit magnitude. */
double ppl_log_normalizer(const float *logits, int vocab);
/* -log softmax(logits)[target]. */
double ppl_token_nll(const float *logits, int vocab, int target);
#endif
