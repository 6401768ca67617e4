/* The architecture families posenc runs, as llama.cpp names them. */
#include "model/family.h"

#include <stdio.h>
#include <string.h>

static const ModelFamily families[] = {
    {.name = "llama", .norm = NORM_RMS, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .pe = PE_ROPE, .pairing = PE_ROPE_INTERLEAVED},
    {.name = "gpt2", .norm = NORM_LAYER, .ffn = FFN_GELU_TANH, .biases = BIAS_ALL,
     .pe = PE_LEARNED, .pairing = PE_ROPE_NEOX},
    {.name = "qwen2", .norm = NORM_RMS, .ffn = FFN_SWIGLU, .biases = BIAS_QKV,
     .pe = PE_ROPE, .pairing = PE_ROPE_NEOX},
    {.name = "gptneox", .norm = NORM_LAYER, .ffn = FFN_GELU_ERF, .biases = BIAS_ALL,
     .parallel_residual = 1, .pe = PE_ROPE, .pairing = PE_ROPE_NEOX},
    {.name = "bloom", .norm = NORM_LAYER, .ffn = FFN_GELU_TANH, .biases = BIAS_ALL,
     .embed_norm = 1, .pe = PE_ALIBI, .pairing = PE_ROPE_NEOX},
    {.name = "starcoder", .norm = NORM_LAYER, .ffn = FFN_GELU_TANH, .biases = BIAS_ALL,
     .pe = PE_LEARNED, .pairing = PE_ROPE_NEOX},
    {.name = "phi2", .norm = NORM_LAYER, .ffn = FFN_GELU_TANH, .biases = BIAS_ALL,
     .parallel_residual = 1, .shared_norm = 1, .output_bias = 1, .pe = PE_ROPE,
     .pairing = PE_ROPE_NEOX},
    {.name = "mpt", .norm = NORM_LAYER, .ffn = FFN_GELU_ERF, .biases = BIAS_OPTIONAL,
     .pe = PE_ALIBI, .pairing = PE_ROPE_NEOX},
    {.name = "gemma", .norm = NORM_RMS, .ffn = FFN_GEGLU, .biases = BIAS_OPTIONAL,
     .embed_scale_sqrt = 1, .pe = PE_ROPE, .pairing = PE_ROPE_NEOX},
    {.name = "smollm3", .norm = NORM_RMS, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .pe = PE_ROPE, .pairing = PE_ROPE_INTERLEAVED, .nope_step = 4},
    {.name = "phi3", .norm = NORM_RMS, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .pe = PE_ROPE, .pairing = PE_ROPE_NEOX},
    {.name = "qwen3", .norm = NORM_RMS, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .qk_norm = QK_NORM_HEAD, .pe = PE_ROPE, .pairing = PE_ROPE_NEOX},
    {.name = "gemma2", .norm = NORM_RMS, .ffn = FFN_GEGLU, .biases = BIAS_OPTIONAL,
     .embed_scale_sqrt = 1, .norms = NORMS_SANDWICH, .pe = PE_ROPE, .pairing = PE_ROPE_NEOX,
     .swa_period = 2},
    {.name = "gemma3", .norm = NORM_RMS, .ffn = FFN_GEGLU, .biases = BIAS_OPTIONAL,
     .embed_scale_sqrt = 1, .qk_norm = QK_NORM_HEAD, .norms = NORMS_SANDWICH, .pe = PE_ROPE,
     .pairing = PE_ROPE_NEOX, .swa_period = 6, .swa_theta = 10000.0f, .swa_unscaled = 1},
    {.name = "olmo2", .norm = NORM_RMS, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .qk_norm = QK_NORM_FULL, .norms = NORMS_POST, .pe = PE_ROPE, .pairing = PE_ROPE_NEOX,
     .swa_period = 4, .swa_unscaled = 1},
    {.name = "exaone4", .norm = NORM_RMS, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .qk_norm = QK_NORM_HEAD, .norms = NORMS_POST, .pe = PE_ROPE, .pairing = PE_ROPE_NEOX,
     .swa_period = 4, .rope_swa_only = 1},
    {.name = "granite", .norm = NORM_RMS, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .logit_scale_divides = 1, .pe = PE_ROPE, .pairing = PE_ROPE_INTERLEAVED},
    {.name = "stablelm", .norm = NORM_LAYER, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .qk_norm = QK_NORM_HEAD, .qk_norm_optional = 1, .parallel_shares_norm = 1, .pe = PE_ROPE,
     .pairing = PE_ROPE_NEOX},
    {.name = "cohere2", .norm = NORM_LAYER, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .parallel_residual = 1, .shared_norm = 1, .pe = PE_ROPE, .pairing = PE_ROPE_INTERLEAVED,
     .swa_period = 4, .rope_swa_only = 1},
    {.name = "qwen3moe", .norm = NORM_RMS, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .qk_norm = QK_NORM_HEAD, .pe = PE_ROPE, .pairing = PE_ROPE_NEOX, .experts = 1,
     .router = ROUTER_SOFTMAX_TOPK, .expert_weights_norm = 1},
    {.name = "olmoe", .norm = NORM_RMS, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .qk_norm = QK_NORM_FULL, .pe = PE_ROPE, .pairing = PE_ROPE_NEOX, .experts = 1,
     .router = ROUTER_SOFTMAX_TOPK},
    {.name = "granitemoe", .norm = NORM_RMS, .ffn = FFN_SWIGLU, .biases = BIAS_OPTIONAL,
     .logit_scale_divides = 1, .pe = PE_ROPE, .pairing = PE_ROPE_INTERLEAVED, .experts = 1,
     .router = ROUTER_TOPK_SOFTMAX},
    /* llama.cpp's gpt-oss: sliding layers alternate with full ones from layer 0 (its default
     * period of 2) */
    {.name = "gpt-oss", .norm = NORM_RMS, .ffn = FFN_SWIGLU_OAI, .biases = BIAS_ATTN_EXPERTS,
     .ffn_norm_name = "post_attention_norm", .pe = PE_ROPE, .pairing = PE_ROPE_NEOX,
     .swa_period = 2, .experts = 1, .router = ROUTER_TOPK_SOFTMAX, .swiglu_limit = 7.0f,
     .attn_sinks = 1},
};

const ModelFamily *model_family_find(const char *name) {
    for (size_t i = 0; i < sizeof families / sizeof *families; i++)
        if (strcmp(families[i].name, name) == 0) return &families[i];
    return NULL;
}

void model_family_names(char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof families / sizeof *families && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", families[i].name);
        if (n < 0) break;
        used += (size_t)n;
    }
}

int model_family_gated(const ModelFamily *f) {
    return f->ffn == FFN_SWIGLU || f->ffn == FFN_GEGLU || f->ffn == FFN_SWIGLU_OAI;
}

const char *model_norm_name(NormKind k) { return k == NORM_RMS ? "rmsnorm" : "layernorm"; }

const char *model_ffn_name(FfnKind k) {
    static const char *const names[] = {"swiglu", "geglu", "gelu-tanh", "gelu-erf", "swiglu-oai"};
    return names[k];
}

const char *model_router_name(RouterKind k) {
    return k == ROUTER_SOFTMAX_TOPK ? "softmax-then-topk" : "topk-then-softmax";
}
