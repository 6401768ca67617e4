/* Perplexity of a token stream under one context, three ways:
 *  windows:  window k feeds tokens [kC, (k+1)C) as one chunk from an empty
 *            cache and scores predictions of [kC+1, (k+1)C], so each token
 *            after the first is scored once;
 *  stride S: windows of C tokens advancing by S; the first scores all its
 *            predictions, later ones only their last S (a sliding window);
 *  stream:   the tokens flow through one cache of C cells with context
 *            shifts when it fills, as in a long generation. */
#ifndef POSENC_PERPLEXITY_H
#define POSENC_PERPLEXITY_H
#include "model/context.h"
#include "model/shift.h"

typedef struct {
    int window;         /* C; the context must hold C cells and C-token chunks */
    int stride;         /* 0: consecutive windows */
    int max_chunks;     /* windows to score at most; 0: all */
    int stream;
    int keep;           /* stream: cells kept by every shift */
    ContextShiftMode shift;
    int pos_offset;     /* position of each window's (or the stream's) first token */
} PplOptions;

typedef struct {
    double nll_sum;       /* nats */
    long n_scored;
    double *nll_by_pos;   /* (window) NLL summed per position within the window */
    long *count_by_pos;   /* (window) */
    int n_pos;
    double seconds;
} PplResult;

typedef void (*PplProgress)(double fraction, void *user);

int ppl_evaluate(Context *ctx, const int *tokens, int n_tokens, const PplOptions *opt,
                 PplResult *res, PplProgress progress, void *user, PosencError *err);
void ppl_result_free(PplResult *res);

/* -log softmax(logits)[target]: float sum of exponentials, the rest in double. */
double ppl_token_nll(const float *logits, int vocab, int target);
#endif
