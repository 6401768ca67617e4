/* A loaded checkpoint: configuration, weights (mmap'd where possible) and
 * the positional scheme it was trained with. */
#ifndef POSENC_MODEL_H
#define POSENC_MODEL_H
#include <math.h>

#include "base/gguf.h"
#include "base/tensor.h"
#include "base/util.h"
#include "model/family.h"
#include "model/kernels.h"
#include "positional/pe.h"

typedef struct {
    ModelFamily family; /* what the architecture does (family.h) */
    int dim;          /* residual width */
    int hidden_dim;   /* feed-forward width */
    int n_layers;
    int n_heads;
    int n_kv_heads;   /* < n_heads: grouped-query attention */
    int head_size;    /* of q, k and v; n_heads * head_size may differ from dim */
    int vocab_size;
    int seq_len;      /* trained context length */
    float norm_eps;
    float embed_scale; /* token embeddings are multiplied by this (1 or sqrt(dim)) */
    float clamp_kqv;   /* q, k, v clamped to [-clamp_kqv, clamp_kqv] (mpt); 0 = not */
    float residual_scale; /* each sub-layer's output is scaled before it is added (Granite: 1
                             elsewhere) */
    float logit_scale;    /* the logits are multiplied by it (Command R; 1 / Granite's
                             logits_scaling) */
    float final_softcap;  /* logits become c * tanh(logit / c) (Gemma 2); 0 = not */
    int n_experts;        /* family.experts: experts a layer holds (expert_count); 0 = dense */
    int n_experts_used;   /* the router's top k, 1..n_experts (expert_used_count) */
    int expert_hidden_dim; /* one expert's feed-forward width (expert_feed_forward_length, else
                              feed_forward_length) */
    int expert_weights_norm; /* ROUTER_SOFTMAX_TOPK: the top k's weights renormalised to sum 1 */
} ModelConfig;

/* How one layer attends: where it takes position from and what it sees.
 * Every layer has one (Model.layers); the families of 2023 give every
 * layer the same, the checkpoint's scheme.  The forward pass, the cache,
 * a context shift and the views read this table. */
typedef struct {
    PeParams pe;        /* the layer's scheme: PE_NONE for a layer without position (NoPE);
                           theta and scaling per layer (Gemma 3's local and global) */
    int window;         /* a query sees the keys of the last W positions, its own included
                           (sliding-window layers); 0 = every earlier position */
    int chunk;          /* a query sees only the keys of its own chunk of C positions, chunks
                           starting at 0, C, 2C, ... (Llama 4's chunked layers); 0 = none */
    float score_div;    /* q.k is divided by it: sqrt(head_size), or sqrt(query_pre_attn_scalar) */
    float softcap;      /* scores become softcap * tanh(score / softcap) (Gemma 2); 0 = not */
    int self_extend_group;  /* Self-Extend (Jin et al. 2024): a key at least self_extend_window
                               positions before the query scores as if the key were at
                               floor(p_k / G) and the query at floor(p_q / G) + W - floor(W / G),
                               in the same softmax as the nearer keys at their exact positions;
                               G here, 0 = off (a rotating layer only) */
    int self_extend_window; /* W: the neighbour window of exact positions */
    float temperature_beta; /* the attention temperature of Llama 4 and Mistral 3: q is multiplied
                               by 1 + beta ln(1 + floor((p + temperature_offset) /
                               temperature_length)); 0 = off */
    int temperature_length; /* L, positions per step of the logarithm */
    int temperature_offset; /* 1: Llama 4's floor((p + 1) / L); 0: Mistral 3's floor(p / L) */
    int sinks_off;          /* the layer's learned sinks (LayerWeights.attn_sinks) left out of its
                               softmax (the A/B switch --sinks off); 0 where it has none */
} LayerAttention;

/* Vectors are always f32 (norms and biases are tiny); matrices may be any
 * TensorType.  A NULL bias means "no bias". */
typedef struct {
    const float *attn_norm, *attn_norm_b; /* (dim); NULL where the norms are post-only */
    Tensor wq, wk, wv;                    /* (q_dim, dim) (kv_dim, dim) (kv_dim, dim) */
    const float *bq, *bk, *bv;            /* (q_dim) (kv_dim) (kv_dim) */
    const float *q_norm, *k_norm;         /* family.qk_norm: (head_size), (n_heads, head_size) and
                                             (n_kv_heads, head_size), or (q_dim) and (kv_dim) */
    int qk_norm_per_head;                 /* q_norm and k_norm hold one vector a head */
    const float *attn_post_norm;          /* (dim) sandwich and post-only norms */
    const float *ffn_post_norm;           /* (dim) */
    Tensor wo;                            /* (dim, q_dim) */
    const float *bo;                      /* (dim) */
    const float *ffn_norm, *ffn_norm_b;   /* (dim) */
    Tensor w_gate;                        /* (hidden_dim, dim), gated feed-forward only */
    Tensor w_up;                          /* (hidden_dim, dim) */
    const float *b_up;                    /* (hidden_dim) */
    Tensor w_down;                        /* (dim, hidden_dim) */
    const float *b_down;                  /* (dim) */
    /* A mixture of experts (config.n_experts > 0) in place of w_gate, w_up and w_down: expert
     * e's matrices are rows [e * expert_hidden_dim, (e + 1) * expert_hidden_dim) of gate_exps
     * and up_exps and rows [e * dim, (e + 1) * dim) of down_exps (GGUF's 3-D tensors, one
     * matrix per expert, as views: model_expert_matrix) */
    Tensor router;                        /* (n_experts, dim) ffn_gate_inp */
    Tensor gate_exps, up_exps;            /* (n_experts * expert_hidden_dim, dim) */
    Tensor down_exps;                     /* (n_experts * dim, expert_hidden_dim) */
    /* family.biases == BIAS_ATTN_EXPERTS (gpt-oss), else NULL: */
    const float *b_router;                /* (n_experts) */
    const float *b_gate_exps, *b_up_exps; /* (n_experts, expert_hidden_dim) */
    const float *b_down_exps;             /* (n_experts, dim) */
    const float *attn_sinks;              /* (n_heads) family.attn_sinks: each head's sink logit */
} LayerWeights;

/* A layer's matrices, as an initializer of an array of LAYER_MATRICES
 * (const) Tensor pointers; w_gate has no data outside gated families. */
/* The most layers a checkpoint may have (loaders refuse more). */
#define MODEL_MAX_LAYERS 1024

#define LAYER_MATRICES 7
#define LAYER_MATRIX_LIST(lw) {&(lw)->wq, &(lw)->wk, &(lw)->wv, &(lw)->wo, &(lw)->w_gate, &(lw)->w_up, &(lw)->w_down}

typedef struct {
    Tensor token_embd;                     /* (vocab_size, dim) */
    const float *embd_norm, *embd_norm_b;  /* (dim) family.embed_norm only */
    PeTables positional;                   /* the tables positional schemes may use */
    LayerWeights *layers;                  /* (n_layers) */
    const float *output_norm, *output_norm_b; /* (dim) */
    Tensor output;                         /* (vocab_size, dim); token_embd when tied */
    const float *output_b;                 /* (vocab_size) family.output_bias only */
} ModelWeights;

typedef struct {
    ModelConfig config;
    ModelWeights weights;
    PeParams pe;            /* the scheme the checkpoint was trained with, model-wide: the one
                               its positioned layers use (each layer's own is in layers) */
    LayerAttention *layers; /* (n_layers) each layer's attention */
    MappedFile file;        /* llama2.c .bin: the mapping the weights point into */
    GgufFile *gguf;         /* GGUF: the open file (weights point into its mapping),
                               kept for its tokenizer.ggml.* vocabulary; NULL for .bin */
    void *owned;            /* buffers converted at load time, freed with the model */
    size_t owned_bytes;
    void *packed;           /* decode's packed copies of the matrices (kernels_pack) */
    size_t packed_bytes;
    int experts_packed;     /* a mixture's experts are in the copy (else read from the file's pages) */
    char path[512];
} Model;

/* Loads a llama2.c legacy .bin or a GGUF file (by magic).  0 or -1 + err. */
int model_load(Model *m, const char *path, PosencError *err);
int model_load_llama2c(Model *m, const char *path, PosencError *err);
/* GGUF with llama.cpp's names, any architecture of family.c (load_gguf.c). */
int model_load_gguf(Model *m, const char *path, PosencError *err);
void model_free(Model *m);

/* Expert e's matrix in one of a layer's stacked expert tensors (gate_exps,
 * up_exps or down_exps): a view of its rows in the mapping. */
static inline Tensor model_expert_matrix(const Tensor *stacked, int n_experts, int e) {
    int rows = stacked->rows / n_experts;
    return kernels_rows(stacked, e * rows, rows);
}

int model_kv_dim(const ModelConfig *c);
int model_q_dim(const ModelConfig *c);   /* n_heads * head_size */
int model_head_size(const ModelConfig *c);
/* The bytes of a GGUF model's file a decoded token reads: every tensor's,
 * less the share of the stacked expert tensors (and their biases) of the
 * experts it does not pick and, unless the head is the embedding, all but
 * one row of the embedding. */
double model_bytes_active(const Model *m);
/* The first position a query at pos_q sees through a window of W (pos_q -
 * W + 1, at least 0); 0 without one (W = 0). */
static inline int model_window_first(int window, int pos_q) {
    int first = pos_q - window + 1;
    return window && first > 0 ? first : 0;
}

/* The same through a window of W and chunks of C (either 0: none): the
 * later of the window's first position and the chunk's start. */
static inline int model_visible_first(int window, int chunk, int pos_q) {
    int first = model_window_first(window, pos_q), start = chunk ? pos_q / chunk * chunk : 0;
    return start > first ? start : first;
}

/* Every layer's attention as the 2023 families have it: the model's scheme
 * `pe`, `window` (0: none), q.k / sqrt(head_size), no soft-cap.  Allocates
 * m->layers. */
void model_layers_uniform(Model *m, int window);

/* Layer l's scheme when the model-wide scheme is `p` (the checkpoint's,
 * m->pe, or a variant of it): a layer without position stays so; a
 * positioned layer takes p's scheme, and where p is the checkpoint's scheme
 * it keeps its own values except those p changes (a model-wide --rope-theta
 * gives Gemma 3's local and global layers one theta). */
PeParams model_layer_scheme(const Model *m, const PeParams *p, int l);

/* The model's table with variant p applied to every layer
 * (model_layer_scheme), malloc'd (n_layers entries). */
LayerAttention *model_layers_for(const Model *m, const PeParams *p);

/* One line of a layer's attention, "rope theta=10000 yarn x4 window=8",
 * in buf. */
void model_layer_describe(const LayerAttention *la, char *buf, size_t size);
/* The last layer of the run of layers that read as layer l does
 * (model_layer_describe), l itself when the next differs. */
int model_layers_run_end(const LayerAttention *table, int n_layers, int l);
/* The table in runs of equal layers, "0-4: rope theta=10000 window=8; 5:
 * ...", in buf. */
void model_layers_describe(const LayerAttention *table, int n_layers, char *buf, size_t size);

/* Overrides entry l of such a table: its scheme (scheme >= 0: PE_NONE or a
 * scheme that acts in attention, with the variant's values where it is the
 * variant's scheme, the checkpoint's where it is that, else its defaults)
 * and its window (window >= 0; 0: full attention).  0, or -1 with the
 * reason. */
int model_layer_override(const Model *m, const PeParams *variant, LayerAttention *table, int l,
                         int scheme, int window, PosencError *err);
/* Sets entry l's chunk size (chunked attention; 0: none). */
int model_layer_chunk(const Model *m, LayerAttention *table, int l, int chunk, PosencError *err);
/* Self-Extend with group G and neighbour window W (both >= 1) on every
 * rotating layer of the table (a layer without rotation keeps its
 * attention: it has no positions to group).  0, or -1 when no layer
 * rotates. */
int model_layers_self_extend(const Model *m, LayerAttention *table, int group, int window,
                             PosencError *err);
/* The attention temperature (beta > 0, length >= 1) on the layers its form
 * names: Mistral 3's (llama4 = 0) on every layer, Llama 4's on the layers
 * without position.  0, or -1 when the form names no layer. */
int model_layers_temperature(const Model *m, LayerAttention *table, float beta, int length,
                             int llama4, PosencError *err);
/* Every layer's learned sinks left out of its softmax (--sinks off: the
 * model as if trained without them).  0, or -1 when the model has none. */
int model_layers_sinks_off(const Model *m, LayerAttention *table, PosencError *err);
/* A query's factor at pos_q under an attention temperature (beta 0: 1). */
static inline float model_temperature_scale(float beta, int length, int offset, int pos_q) {
    if (beta <= 0.0f) return 1.0f;
    return 1.0f + beta * logf(1.0f + (float)((pos_q + offset) / length));
}

/* Checks dimensions for sanity and overflow; used by every loader. */
int model_config_validate(const ModelConfig *c, const char *path, PosencError *err);

/* The scheme `p` instantiated for this model's shapes (and its position
 * table, if any); model_check_scheme only tells whether that works (e.g.
 * `learned` needs a table): 0, or -1 with the reason. */
int model_build_scheme(const Model *m, const PeParams *p, PositionalEncoding *pe, PosencError *err);
int model_check_scheme(const Model *m, const PeParams *p, PosencError *err);
#endif
