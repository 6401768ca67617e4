/* -m attention: where each head of each layer attends for a prompt, read
 * from the forward pass itself (Context.observe_attention sees every
 * softmax row): the weights of every (query, key) pair, the attention mass
 * by relative distance and the entropy of each head; several --pe variants
 * side by side on the same weights. */
#ifndef POSENC_ATTENTION_VIEW_H
#define POSENC_ATTENTION_VIEW_H
#include <stdio.h>

#include "model/context.h"
#include "modes/plot_svg.h"

typedef struct {
    const char *label;    /* the --pe variant */
    int n_layers, n_heads, n_tokens;
    float *weights;       /* (n_layers, n_heads, n_tokens queries, n_tokens keys); masked: 0 */
    double *mass;         /* (n_layers, n_heads, n_tokens) by distance d = q - k: the weight
                             at distance d averaged over every query (0 for q < d), so each
                             head's sums to 1, less its sink's share */
    double *entropy;      /* (n_layers, n_heads) mean over queries of -sum w ln w over the
                             cells, nats */
    double *sink;         /* (n_layers, n_heads) mean over queries of the mass the head's learned
                             sink takes (1 - the row's sum: the sink's logit joins the softmax and
                             has no value); NULL where no layer has sinks (or --sinks off) */
} AttentionView;

/* Which layers and heads the weights, charts and summary show; -1: all. */
typedef struct {
    int layer, head;
} AttentionSelection;

/* Runs ids (positions 0..n-1) through ctx, whose cache must be empty and
 * hold n cells, recording every softmax row.  0, or -1 with the reason
 * (non-finite logits). */
int attention_view_build(AttentionView *v, Context *ctx, const int *ids, int n, const char *label,
                         PosencError *err);
void attention_view_free(AttentionView *v);

void attention_view_write_json(FILE *f, const char *model_path, const int *ids,
                               const AttentionView *views, int n, AttentionSelection sel);
void attention_view_print(FILE *f, const char *model_path, const AttentionView *views, int n,
                          AttentionSelection sel);
/* variant,layer,head,query,key,weight: one row per cell at or before the
 * query, of the selected heads. */
int attention_view_write_csv(const char *path, const AttentionView *views, int n,
                             AttentionSelection sel, PosencError *err);
/* The charts to the sink: PREFIX-VARIANT-weights.svg (a heatmap per
 * selected head, its axes named by token_names (n_tokens), or by position
 * when NULL), PREFIX-mass.svg and PREFIX-entropy.svg (a curve per variant). */
int attention_view_write_charts(const SvgSink *sink, const AttentionView *views, int n,
                                AttentionSelection sel, const char *const *token_names,
                                PosencError *err);
#endif
