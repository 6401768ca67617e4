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
} FfnKind;

/* Which biases a family must have; the others are taken when present. */
typedef enum {
    BIAS_OPTIONAL, /* none required (llama, mpt, gemma) */
    BIAS_QKV,      /* q, k and v (qwen2) */
    BIAS_ALL,      /* every linear layer and LayerNorm (gpt2, gptneox, bloom, ...) */
} BiasRule;

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
    PeKind pe;              /* the scheme the family is trained with */
    int nope_step;          /* every nope_step-th layer has no position (SmolLM3: 4; llama.cpp
                               writes no key for it); 0: none */
    PeRopePairing pairing;  /* its rotation pairs when that is rope */
} ModelFamily;

/* The family named `name`, or NULL. */
const ModelFamily *model_family_find(const char *name);
/* Every family's name, "llama, gpt2, ...", for an error that lists them. */
void model_family_names(char *buf, size_t size);
/* Gated feed-forward (a gate matrix beside up). */
int model_family_gated(const ModelFamily *f);
const char *model_norm_name(NormKind k);
const char *model_ffn_name(FfnKind k);
#endif
