/* What an architecture family does, as data: the loader fills it from the
 * GGUF general.architecture (and the few keys that vary within a family),
 * and the forward pass reads it instead of switching on a name. */
#ifndef POSENC_FAMILY_H
#define POSENC_FAMILY_H
#include <stddef.h>

#include "positional/pe.h"

typedef enum {
    NORM_RMS,   /* x / rms(x) * w */
    NORM_LAYER, /* (x - mean) / std * w + b */
} NormKind;

typedef enum {
    FFN_SWIGLU,    /* down(silu(gate x) * up x)               llama, qwen2 */
    FFN_GEGLU,     /* down(gelu_tanh(gate x) * up x)          gemma */
    FFN_GELU_TANH, /* down(gelu_tanh(up x + b) + b)           gpt2, bloom, starcoder, phi2 */
    FFN_GELU_ERF,  /* down(gelu_erf(up x + b) + b)            gptneox, mpt */
    FFN_SWIGLU_OAI, /* down((clamp(up x, -L, L) + 1) * g sigmoid(1.702 g)), g = min(gate x, L):
                       gpt-oss's clamped SwiGLU, L = swiglu_limit (llama.cpp's swiglu_oai) */
} FfnKind;

/* Which biases a family must have; the others are taken when present. */
typedef enum {
    BIAS_OPTIONAL, /* none required (llama, mpt, gemma) */
    BIAS_QKV,      /* q, k and v (qwen2) */
    BIAS_ALL,      /* every linear layer and LayerNorm (gpt2, gptneox, bloom, ...) */
    BIAS_ATTN_EXPERTS, /* q, k, v and the attention's output, the router and every expert's
                          gate, up and down (gpt-oss); no norm has one */
} BiasRule;

/* Where q and k are normalized before rotation (attn_q_norm, attn_k_norm),
 * with the family's norm. */
typedef enum {
    QK_NORM_NONE,
    QK_NORM_HEAD, /* each head over head_size, one weight vector for all heads (Qwen3,
                     Gemma 3, EXAONE 4) or one per head ((n_heads, head_size): StableLM 2) */
    QK_NORM_FULL, /* the whole projection, q_dim and kv_dim (OLMo 2) */
} QkNorm;

/* How a mixture of experts weighs the experts its router picks (Hugging
 * Face's modeling code of each family). */
typedef enum {
    ROUTER_SOFTMAX_TOPK, /* softmax over every expert's logit, then the top k of those
                            probabilities, renormalised to sum 1 where expert_weights_norm
                            (Qwen3 MoE: norm_topk_prob; OLMoE: not) */
    ROUTER_TOPK_SOFTMAX, /* the top k logits, then a softmax over those k (Granite MoE) */
} RouterKind;

/* Where a layer's norms sit around its two sub-layers. */
typedef enum {
    NORMS_PRE,      /* x + f(norm x) */
    NORMS_SANDWICH, /* x + post_norm(f(norm x)) (Gemma 2 and 3) */
    NORMS_POST,     /* x + post_norm(f(x)): no norm before (OLMo 2, EXAONE 4) */
} NormPlacement;

typedef struct {
    const char *name;       /* general.architecture, the prefix of its keys */
    NormKind norm;
    FfnKind ffn;
    BiasRule biases;
    int parallel_residual;  /* x + attn(norm1 x) + ffn(norm2 x), not one after the other
                               (gptneox's default; its use_parallel_residual key decides) */
    int shared_norm;        /* the feed-forward reads the attention's norm: no ffn_norm (phi2) */
    int output_bias;        /* the classifier has a bias (output.bias) */
    int embed_norm;         /* a norm right after the token embedding (token_embd_norm) */
    int embed_scale_sqrt;   /* token embeddings x sqrt(dim) */
    QkNorm qk_norm;
    int qk_norm_optional;   /* the q/k norm tensors may be absent (StableLM 2's qk_layernorm) */
    int parallel_shares_norm; /* with a parallel residual the feed-forward reads the attention's
                                 norm, and the file has no ffn_norm (StableLM 2) */
    NormPlacement norms;
    const char *ffn_norm_name; /* the feed-forward's pre-norm tensor, blk.N.NAME.weight: NULL for
                                  ffn_norm; gpt-oss's is post_attention_norm (llama.cpp's
                                  attn_post_norm, read before the experts) */
    int logit_scale_divides; /* {arch}.logit_scale divides the logits (Granite) instead of
                                multiplying them (Command R) */
    PeKind pe;              /* the scheme the family is trained with */
    int nope_step;          /* every nope_step-th layer has no position (SmolLM3: 4; llama.cpp
                               writes no key for it); 0: none */
    int swa_period;         /* without sliding_window_pattern, sliding windows slide in all but
                               every swa_period-th layer (llama.cpp's defaults: Gemma 2's 2,
                               Gemma 3's 6, Command R7B's and EXAONE 4's 4); 0: every layer */
    int rope_swa_only;      /* only the sliding layers rotate; the others have no position
                               (Command R7B, EXAONE 4 when it slides) */
    float swa_theta;        /* the sliding layers' theta without rope.freq_base_swa (Gemma 3's
                               10000); 0: the model's */
    int swa_unscaled;       /* the sliding layers' rotation takes no frequency scaling (Gemma 3,
                               whose linear x8 is the global layers') */
    PeRopePairing pairing;  /* its rotation pairs when that is rope */
    int experts;            /* the feed-forward is a mixture of experts (ffn_gate_inp and the
                               stacked ffn_{gate,up,down}_exps), each expert family.ffn */
    RouterKind router;      /* how the router's picks are weighed */
    int expert_weights_norm; /* ROUTER_SOFTMAX_TOPK renormalises the top k by default
                                ({arch}.expert_weights_norm decides) */
    float swiglu_limit;     /* FFN_SWIGLU_OAI's clamp L (gpt-oss: 7, which llama.cpp fixes in its
                               code and writes no key for) */
    int attn_sinks;         /* learned attention sinks: one logit per head joins every softmax
                               row and takes its share of the mass to no value
                               (blk.N.attn_sinks.weight, gpt-oss) */
} ModelFamily;

/* The family named `name`, or NULL. */
const ModelFamily *model_family_find(const char *name);
/* Every family's name, "llama, gpt2, ...", for an error that lists them. */
void model_family_names(char *buf, size_t size);
/* Gated feed-forward (a gate matrix beside up). */
int model_family_gated(const ModelFamily *f);
const char *model_norm_name(NormKind k);
const char *model_ffn_name(FfnKind k);
const char *model_router_name(RouterKind k);
#endif
