/* Everything needed to run a model: the chosen positional scheme, the KV
 * cache and the activation buffers.  Several contexts can share one Model,
 * which is how `--pe a,b,c` compares schemes on the same weights. */
#ifndef POSENC_CONTEXT_H
#define POSENC_CONTEXT_H
#include "model/kernels.h"
#include "model/kvcache.h"
#include "model/model.h"
#include "positional/pe.h"

/* Query rows per attention work item: a tile reads each cached key and
 * value once for all of them.  The cells are taken ATT_BLOCK at a time
 * with an online softmax (forward.c), so a tile's scores are (ATT_TILE,
 * ATT_BLOCK) floats whatever the context's length. */
#define ATT_TILE 16
#define ATT_BLOCK 256

typedef struct {
    int max_tokens;     /* largest chunk one forward call accepts */
    int logit_rows;     /* rows of logits one call may return */
    float *x;           /* (max_tokens, dim) residual stream */
    float *xb;          /* (max_tokens, max(dim, q_dim)) a normed row, then the heads' outputs */
    float *xb2;         /* (max_tokens, dim) */
    float *q;           /* (max_tokens, q_dim) queries, q_dim = n_heads * head_size */
    float *k, *v;       /* (max_tokens, kv_dim) new keys and values before a cache of another
                           type than f32 rounds them; NULL when they go straight in the cells */
    float *hb, *hb2;    /* (max_tokens, hidden_dim), or expert_hidden_dim for experts */
    float *att;         /* (threads, ATT_TILE, ATT_BLOCK + head_size) a tile's scores of one block
                           of cells and their weighted values, per thread */
    float *logits;      /* (logit_rows, vocab_size) */
    /* Self-Extend's, allocated by context_use_layers only where a layer groups: */
    float *q_grouped;   /* (max_tokens, q_dim) the queries at their grouped positions */
    float *k_grouped;   /* (max_tokens, kv_dim) the new keys at theirs */
    float *att_grouped; /* (threads, ATT_TILE, ATT_BLOCK) a tile's grouped scores of one block */
    /* A mixture of experts' (config.n_experts > 0; else NULL), k = n_experts_used: */
    float *router;      /* (max_tokens, n_experts) the router's logits, then probabilities */
    int *picks;         /* (max_tokens, k) each token's experts, a slot t * k + j each */
    float *pick_weights; /* (max_tokens, k) their weights */
    int *slots_by_expert; /* (max_tokens * k) the slots, expert e's from expert_start[e] */
    int *expert_start;  /* (n_experts + 1) */
    float *expert_in;   /* (max_tokens, dim) the rows of the tokens that picked one expert */
    float *expert_out;  /* (max_tokens, dim) that expert's output for them */
    float *expert_sum;  /* (max_tokens, dim) each token's weighted sum over its experts */
    /* A decoded token's team (forward.c), each thread's own rows, whose
     * strides (dim and hidden_dim rounded up to a cache line) keep the
     * threads' writes apart: */
    size_t own_dim, own_hidden, own_experts;
    float *own_x;       /* (threads, own_dim) the residual stream */
    float *own_xb;      /* (threads, own_dim) a normed row */
    float *own_attn;    /* (threads, own_dim) the attention's output */
    float *own_ffn;     /* (threads, own_dim) the feed-forward's output */
    float *own_hb, *own_hb2; /* (threads, own_hidden) the feed-forward's hidden rows */
    /* a mixture of experts' (else NULL): */
    float *own_router;  /* (threads, own_experts) the router's logits */
    float *own_expert;  /* (threads, own_dim) one expert's output */
    MatmulScratch mm;
} ForwardState;

/* Sees each softmax row of attention: one query's weights (at position
 * pos_q) of one head over cells 0..n_cells-1, masked cells exactly 0.
 * Called from the attention threads, once per row: it may only write where
 * no other row writes. */
typedef void (*AttentionObserver)(void *user, int layer, int head, int pos_q,
                                  const float *weights, int n_cells);

/* Where the forward passes' time went besides the matmuls (state.mm's
 * stats), summed until the caller resets it (-m bench shows it). */
typedef struct {
    double attention_seconds; /* scores, softmax and values over the cached cells */
    long regions;             /* parallel regions of attention, and decoded tokens' teams */
    long barriers;            /* in those teams, the barriers besides the matmuls' */
} ForwardStats;

/* One layer's attention as this context runs it: the model's table entry
 * (LayerAttention) with the context's scheme (model_layer_scheme) and the
 * overrides of context_set_layer. */
typedef struct {
    PositionalEncoding pe; /* rotate and bias act per layer */
    int window;            /* 0: every earlier position */
    int chunk;             /* 0: no chunks */
    float score_div, softcap;
    int self_extend_group, self_extend_window; /* LayerAttention's; group 0: off */
    float temperature_beta;                    /* LayerAttention's; 0: off */
    int temperature_length, temperature_offset;
    const float *sinks;    /* (n_heads) each head's learned sink logit (LayerWeights.attn_sinks);
                              NULL: none, or left out (LayerAttention.sinks_off) */
} ContextLayer;

/* Whether a decoded token runs as one team of threads (forward.c): when its
 * matrices are worth sharing (the default), never, or whenever it can
 * (tests compare the three on models of any size). */
typedef enum { TEAM_WHEN_LARGE, TEAM_NEVER, TEAM_ALWAYS } TeamPolicy;

typedef struct {
    const Model *model;
    PositionalEncoding pe;  /* the model-wide scheme: the embedding's hook, the positions it
                               covers, what views and traces name */
    ContextLayer *layers;   /* (n_layers) */
    KVCache cache;
    ForwardState state;
    AttentionObserver observe_attention; /* NULL (the default): never called */
    void *observer_user;
    float *observer_rows; /* (threads, ATT_TILE, n_ctx): whole softmax rows for the observer */
    ForwardStats stats;
    TeamPolicy team;
    size_t expert_passes; /* expert feed-forwards run so far: each reads one expert's matrices
                             once, for all the tokens of a chunk that picked it (tests count) */
} Context;

/* Calls fn(user, ...) with every softmax row of the following forward
 * passes (fn NULL: stops).  Attention then scores each row over all its
 * cells at once, as the observer sees it, in (threads, ATT_TILE, n_ctx)
 * floats allocated here: 0, or -1 + err when they do not fit. */
int context_observe_attention(Context *ctx, AttentionObserver fn, void *user, PosencError *err);

/* Prompts are prefilled in chunks of at most this many tokens: the GEMM
 * has long amortized each weight read by then (pp512 is the benchmark's
 * prefill), and the activations stay bounded whatever --ctx is. */
#define CONTEXT_PREFILL_CHUNK 512

/* What a context allocates for: everything but the weights scales with
 * these, so they are chosen by what a mode uses, never by a header field
 * alone. */
typedef struct {
    int n_ctx;          /* cache cells */
    int max_tokens;     /* largest chunk one forward call takes, 1..n_ctx */
    int logit_rows;     /* rows of logits a call may return: max_tokens when every row's
                           are wanted (ppl), 1 when only the last one's (generation) */
    TensorType kv_type; /* the cache's elements: TENSOR_F32 or TENSOR_F16 */
    int self_extend;    /* a layer groups (Self-Extend): a second store of keys, and grouped
                           queries, keys and scores in the scratch (context_use_layers) */
} ContextSize;

/* Generation: chunks of CONTEXT_PREFILL_CHUNK, the last row's logits. */
ContextSize context_size_generate(int n_ctx, TensorType kv_type);
/* Perplexity: one chunk of n_ctx tokens with every row's logits. */
ContextSize context_size_ppl(int n_ctx, TensorType kv_type);

int context_build_sized(Context *ctx, const Model *m, const PeParams *pe, const ContextSize *size,
                        PosencError *err);
/* Test seams: n_ctx cells, chunks of max_tokens (<= n_ctx) with every
 * row's logits; the cache holds f32, or kv_type.  The engine's callers size
 * a context with context_build_sized. */
int context_build(Context *ctx, const Model *m, const PeParams *pe, int n_ctx, int max_tokens,
                  PosencError *err);
int context_build_kv(Context *ctx, const Model *m, const PeParams *pe, int n_ctx, int max_tokens,
                     TensorType kv_type, PosencError *err);
void context_free(Context *ctx);

/* Runs every layer as `table` says (model_layers_for, then
 * model_layer_override): each layer's scheme is built again.  0, or -1 with
 * the layer and the reason (a scheme the model cannot carry).  A window
 * wider than the context is a full attention there.  Self-Extend on a layer
 * allocates the grouped keys and queries (kv_cache_group_keys). */
int context_use_layers(Context *ctx, const LayerAttention *table, PosencError *err);
/* The first layer with Self-Extend, -1 where none has it. */
int context_self_extend_layer(const Context *ctx);
/* The narrowest sliding window of any layer (0: none slides), and in
 * *layers how many layers have it. */
int context_narrowest_window(const Context *ctx, int *layers);
/* What a context shift must do: the strongest action any layer needs
 * (recompute > re-rotate > positions only). */
PeShiftAction context_shift_needs(const Context *ctx);


/* Bytes a run holds: the weights (the mapped file and vectors converted at
 * load), the KV cache, and the scratch of a context of that size
 * (activations, attention scores, logits, matmul panels; the scores and
 * panels per thread at omp_get_max_threads()).  Their total is the peak
 * but for the tokenizer and sampler; SIZE_MAX where a sum overflows. */
typedef struct {
    size_t weights, kv_cache, scratch, total;
} ContextMemory;
ContextMemory context_memory(const Model *m, const ContextSize *size);

/* Runs tokens[0..n) at positions pos0, pos0+1, ... and appends them to the
 * cache.  Returns the logits: (n, vocab) when all_logits (which needs
 * n <= logit_rows), else (1, vocab) for the last token.  The caller
 * guarantees 1 <= n <= max_tokens, room in the cache, ids in range and
 * positions the scheme can encode; context_check_chunk() tells whether
 * that holds. */
const float *context_forward(Context *ctx, const int *tokens, int n, int pos0, int all_logits);
int context_check_chunk(const Context *ctx, const int *tokens, int n, int pos0, PosencError *err);
/* Any number of tokens, in chunks of max_tokens: the last token's logits.
 * context_check_tokens() checks all but the chunk bound. */
const float *context_prefill(Context *ctx, const int *tokens, int n, int pos0);
int context_check_tokens(const Context *ctx, const int *tokens, int n, int pos0, PosencError *err);
/* 0 if `rows` rows of logits (the first at position pos0) are all finite;
 * else -1 with a line naming the model file and the position.  NaN or
 * infinite weights, or activations that overflow, end here instead of in
 * a sampler that cannot choose or a perplexity of nan. */
int context_check_logits(const Context *ctx, const float *logits, int rows, int pos0,
                         PosencError *err);
/* One step of generate, chat and ppl: the chunk checked, run and its logits
 * checked (context_check_chunk, context_forward, context_check_logits);
 * NULL with err set when a check fails. */
const float *context_step(Context *ctx, const int *tokens, int n, int pos0, int all_logits,
                          PosencError *err);
#endif
