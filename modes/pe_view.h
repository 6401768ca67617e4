/* -m pe: a positional scheme as data, computed through its own hooks
 * (positional/pe.h), never re-derived here:
 *  embed  (sinusoidal, learned): the vector added at each position, and
 *         the cosine similarity of every two positions' vectors;
 *  rotate (rope): each pair's angular frequency and wavelength after
 *         scaling, and the mean q.k/head_size against the distance d between
 *         query and key, k = q rotated d positions apart — for random
 *         Gaussian vectors and for the model's own keys (each layer's cached
 *         keys of a text, moved back to position 0 by the scheme's re-rotation);
 *  bias   (alibi, t5): the bias of every (query, key) position pair per head
 *         (keys after the query are masked), by distance, ALiBi's slopes
 *         and T5's bucket of each distance. */
#ifndef POSENC_PE_VIEW_H
#define POSENC_PE_VIEW_H
#include <stdio.h>

#include "model/context.h"
#include "modes/plot_svg.h"

/* Random vectors the rope q.k curve averages over, from a fixed seed. */
#define PE_VIEW_RANDOM_SAMPLES 1024
#define PE_VIEW_SEED 1234u

typedef struct {
    const char *label;       /* the --pe variant */
    PositionalEncoding pe;
    char layers[512];        /* the variant's per-layer table (model_layers_describe) */
    int n_pos;               /* positions 0..n_pos-1 */
    /* embed */
    float *vectors;          /* (n_pos, dim), or NULL */
    double *cosine;          /* (n_pos, n_pos) */
    /* rotate */
    double *qk_random;       /* (n_pos) by distance, or NULL */
    double *qk_keys;         /* (n_layers, n_pos), or NULL: no text, or not a rotation */
    int n_layers, n_keys;    /* the keys averaged: cells x KV heads per layer */
    /* bias */
    double *bias;            /* (n_heads, n_pos, n_pos) query row, key column; NAN: masked */
    int *bucket;             /* (n_pos) t5's bucket of each distance, or NULL */
} PeView;

/* Builds the scheme `p` on the model and computes its views over n_pos
 * positions, noting its per-layer table `layers`; keys_ctx (or NULL) is a context of the same scheme whose cache
 * holds a text: its keys give qk_keys.  0, or -1 with the reason. */
int pe_view_build(PeView *v, const Model *m, const PeParams *p, const LayerAttention *layers,
                  const char *label, int n_pos, const Context *keys_ctx, PosencError *err);
void pe_view_free(PeView *v);

/* One JSON object for all variants. */
void pe_view_write_json(FILE *f, const char *model_path, const PeView *views, int n);
/* A readable summary, the curves at distances 0, 1, 2, 4, ... */
void pe_view_print(FILE *f, const char *model_path, const PeView *views, int n);
/* The charts to the sink: PREFIX-VARIANT-vectors.svg and -bias.svg (one
 * variant's heatmaps), PREFIX-wavelength.svg and PREFIX-qk.svg (every RoPE
 * variant's curves). */
int pe_view_write_charts(const SvgSink *sink, const PeView *views, int n, PosencError *err);
#endif
