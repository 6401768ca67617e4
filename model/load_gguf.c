/* GGUF checkpoints with llama.cpp's key and tensor names, for the
 * architecture families of family.c: the family says which tensors a layer
 * has (gate or not, which biases, LayerNorm's bias, token_embd_norm).
 * Matrices are viewed in the mapping whatever their type; vectors (norms,
 * biases, the learned position table) are used as f32, so those stored
 * otherwise are converted into m->owned.  The file stays open with the
 * model: its tokenizer.ggml.* vocabulary is read later.
 *
 * What has no llama.cpp name comes from posenc.* keys (tools/convert.py):
 *   posenc.positional       a scheme of positional/'s registry
 *                           (default: the family's, e.g. rope for llama)
 *   posenc.rope.pairing     interleaved|neox (default: the family's, as
 *                           llama.cpp's rope types: interleaved for llama)
 *   posenc.embedding_scale  token embedding multiplier (default 1)
 *   posenc.relative_attention.max_distance   t5's (default 128, as llama.cpp)
 *   posenc.relative_attention.bidirectional  t5's buckets for both directions
 *                                            (default false)
 *   posenc.layers.positional one scheme name a layer: a per-layer table no
 *                           family default gives (a Llama with NoPE layers)
 *   posenc.layers.sliding_window  one window a layer (0: full attention)
 *   posenc.layers.chunk      one chunk size a layer: a query sees only its own
 *                           chunk of positions (0: none)
 *   posenc.rope.scaling.yarn_truncate  false: YaRN's correction range
 *                           unrounded (gpt-oss; default true)
 *   posenc.rope.scaling.llama3_low_freq_factor, ..._high_freq_factor
 *
 * Where position lives, per layer (Model.layers), in llama.cpp's keys:
 *   {arch}.attention.sliding_window            W, read for every family (a
 *                                              Mistral converted to `llama` too)
 *   {arch}.attention.sliding_window_pattern    which layers slide: a period N
 *                                              (layer l slides unless l % N ==
 *                                              N - 1; 0: all) or a bool a layer;
 *                                              absent: every layer
 *   {arch}.rope.freq_base_swa                  the sliding layers' theta
 *   {arch}.attention.rope_pattern              a bool a layer: it rotates
 *   {arch}.attention.temperature_scale         beta of the attention temperature on
 *                                              every layer (Mistral 3's: llama.cpp's
 *                                              mistral3), over the positions of
 *   {arch}.attention.temperature_length        L, else the original context
 *   rope_freqs.weight                          divisors of the frequencies
 *                                              (Llama 3.1's scaling as llama.cpp
 *                                              stores it): scaling "factors"
 *   rope_factors_long/short.weight             LongRoPE's (Phi-3) */
#include <limits.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

typedef struct {
    const GgufFile *g;
    const char *arch;     /* general.architecture: the prefix of hyperparameter keys */
    PosencError *err;
    unsigned char *used;  /* (n_tensors) taken by the model: the rest is an error */
    float *arena;         /* f32 copies of vectors stored in another type (m->owned) */
    size_t arena_used;
    char key[128];        /* "{arch}.suffix" of the last arch_key() */
} Loader;

static const char *arch_key(Loader *l, const char *suffix) {
    snprintf(l->key, sizeof l->key, "%s.%s", l->arch, suffix);
    return l->key;
}

/* ---- metadata ------------------------------------------------------------ */

/* A positive count that fits an int (model_config_validate bounds it). */
static int key_int(Loader *l, const char *key, int *out) {
    uint32_t v;
    if (gguf_get_u32(l->g, key, &v, l->err)) return -1;
    if (v > INT_MAX)
        return posenc_error(l->err, "%s: key '%s' = %u is out of range", l->g->path, key, v);
    *out = (int)v;
    return 0;
}

/* Optional keys keep *out when absent. */
static int key_int_opt(Loader *l, const char *key, int *out) {
    return gguf_find_kv(l->g, key) ? key_int(l, key, out) : 0;
}

static int key_f32_opt(Loader *l, const char *key, float *out) {
    return gguf_find_kv(l->g, key) ? gguf_get_f32(l->g, key, out, l->err) : 0;
}

static int key_str_opt(Loader *l, const char *key, const char **out) {
    return gguf_find_kv(l->g, key) ? gguf_get_str(l->g, key, out, l->err) : 0;
}

static int key_bool_opt(Loader *l, const char *key, int *out) {
    return gguf_find_kv(l->g, key) ? gguf_get_bool(l->g, key, out, l->err) : 0;
}

/* ---- tensors ------------------------------------------------------------- */

/* The positional schemes' tables (PeTables), used as f32 like vectors:
 * learned positions (dim columns), t5's relative bias, which layer 0 holds
 * for every layer as in llama.cpp's T5 (n_heads columns). */
#define POSITION_TABLE "position_embd.weight"
#define RELATIVE_BIAS_TABLE "blk.0.attn_rel_b.weight"

/* The suffix of the experts' stacked biases, (n_experts, width): used as
 * f32 like vectors. */
#define EXPERT_BIAS "_exps.bias"

/* Floats the vectors may need once converted to f32: every 1-D tensor,
 * positional table and expert bias not stored as f32.  An upper bound, so
 * that one allocation holds them all and pointers into it stay valid. */
static size_t conversion_floats(const GgufFile *g) {
    size_t n = 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        const GgufTensor *t = &g->tensors[i];
        if (t->type != TENSOR_F32 &&
            (t->n_dims == 1 || strcmp(t->name, POSITION_TABLE) == 0 ||
             strcmp(t->name, RELATIVE_BIAS_TABLE) == 0 || posenc_ends_with(t->name, EXPERT_BIAS)))
            n += t->nelem;   /* each fits the file: the sum cannot overflow */
    }
    return n;
}

/* `name` shaped (rows, cols) in PyTorch order, i.e. ne = {cols, rows};
 * rows = 0 asks for a vector of cols elements. */
static const GgufTensor *get(Loader *l, const char *name, int rows, int cols) {
    const int64_t ne[2] = {cols, rows};
    const GgufTensor *t = gguf_get_tensor(l->g, name, rows ? 2 : 1, ne, l->err);
    if (t) l->used[t - l->g->tensors] = 1;
    return t;
}

static int take_matrix(Loader *l, Tensor *out, const char *name, int rows, int cols) {
    const GgufTensor *t = get(l, name, rows, cols);
    if (!t) return -1;
    *out = (Tensor){t->type, t->data, rows, cols, NULL};
    return 0;
}

/* The whole tensor as f32: in place when stored so, else a converted copy. */
static const float *as_f32(Loader *l, const GgufTensor *t) {
    if (t->type == TENSOR_F32) return t->data;
    float *dst = l->arena + l->arena_used;
    tensor_dequantize(t->type, t->data, dst, t->nelem);
    l->arena_used += t->nelem;
    return dst;
}

static int take_vector(Loader *l, const float **out, const char *name, int n) {
    const GgufTensor *t = get(l, name, 0, n);
    if (!t) return -1;
    *out = as_f32(l, t);
    return 0;
}

/* A bias the family requires or may have: NULL when absent and allowed. */
static int take_bias(Loader *l, const float **out, const char *name, int n, int required) {
    *out = NULL;
    if (!required && !gguf_find_tensor(l->g, name)) return 0;
    return take_vector(l, out, name, n);
}

/* "blk.N.what" in buf (names are at most 64 bytes; GGUF_MAX_NAME_LEN). */
static const char *blk(char *buf, int layer, const char *what) {
    snprintf(buf, GGUF_MAX_NAME_LEN + 1, "blk.%d.%s", layer, what);
    return buf;
}

/* q, k, v from one fused attn_qkv (rows q | k | v, so each is a view at a
 * row offset, whatever the type) or from separate attn_q/k/v. */
static int take_qkv(Loader *l, const ModelConfig *c, int i, LayerWeights *w, int biased) {
    char name[GGUF_MAX_NAME_LEN + 1];
    int d = model_q_dim(c), kv = model_kv_dim(c), in = c->dim;
    if (gguf_find_tensor(l->g, blk(name, i, "attn_qkv.weight"))) {
        Tensor qkv;
        const float *b;
        if (take_matrix(l, &qkv, name, d + 2 * kv, in) ||
            take_bias(l, &b, blk(name, i, "attn_qkv.bias"), d + 2 * kv, biased))
            return -1;
        w->wq = tensor_rows(&qkv, 0, d);
        w->wk = tensor_rows(&qkv, d, kv);
        w->wv = tensor_rows(&qkv, d + kv, kv);
        if (b) {
            w->bq = b;
            w->bk = b + d;
            w->bv = b + d + kv;
        }
        return 0;
    }
    return take_matrix(l, &w->wq, blk(name, i, "attn_q.weight"), d, in) ||
           take_bias(l, &w->bq, blk(name, i, "attn_q.bias"), d, biased) ||
           take_matrix(l, &w->wk, blk(name, i, "attn_k.weight"), kv, in) ||
           take_bias(l, &w->bk, blk(name, i, "attn_k.bias"), kv, biased) ||
           take_matrix(l, &w->wv, blk(name, i, "attn_v.weight"), kv, in) ||
           take_bias(l, &w->bv, blk(name, i, "attn_v.bias"), kv, biased) ? -1 : 0;
}

/* The feed-forward's up matrix, and a gated family's gate: ffn_gate beside
 * ffn_up, or both in one ffn_up of 2 x hidden_dim rows, gate first (Phi-3's
 * gate_up_proj, as llama.cpp stores it): views at a row offset. */
static int take_ffn_up(Loader *l, const ModelConfig *c, int i, LayerWeights *w) {
    char name[GGUF_MAX_NAME_LEN + 1];
    int d = c->dim, h = c->hidden_dim;
    if (!model_family_gated(&c->family))
        return take_matrix(l, &w->w_up, blk(name, i, "ffn_up.weight"), h, d);
    if (gguf_find_tensor(l->g, blk(name, i, "ffn_gate.weight")))
        return take_matrix(l, &w->w_gate, name, h, d) ||
               take_matrix(l, &w->w_up, blk(name, i, "ffn_up.weight"), h, d) ? -1 : 0;
    Tensor gate_up;
    if (take_matrix(l, &gate_up, blk(name, i, "ffn_up.weight"), 2 * h, d)) return -1;
    w->w_gate = tensor_rows(&gate_up, 0, h);
    w->w_up = tensor_rows(&gate_up, h, h);
    return 0;
}

/* One of a layer's stacked expert tensors, (n_experts, rows, cols) in
 * PyTorch order (ne = {cols, rows, n_experts}), as one matrix of n_experts *
 * rows rows whose expert slices model_expert_matrix views. */
static int take_experts(Loader *l, const ModelConfig *c, Tensor *out, const char *name, int rows,
                        int cols) {
    const int64_t ne[3] = {cols, rows, c->n_experts};
    const GgufTensor *t = gguf_get_tensor(l->g, name, 3, ne, l->err);
    if (!t) return -1;
    l->used[t - l->g->tensors] = 1;
    *out = (Tensor){t->type, t->data, c->n_experts * rows, cols, NULL};
    return 0;
}

/* A stacked expert bias (n_experts, width) as f32, which the family
 * requires (gpt-oss) or does not have. */
static int take_expert_bias(Loader *l, const ModelConfig *c, const float **out, const char *name,
                            int width) {
    *out = NULL;
    if (c->family.biases != BIAS_ATTN_EXPERTS) return 0;
    const GgufTensor *t = get(l, name, c->n_experts, width);
    if (!t) return -1;
    *out = as_f32(l, t);
    return 0;
}

/* A mixture of experts' router (ffn_gate_inp: a logit per expert) and its
 * experts' stacked gated matrices, in place of ffn_gate/up/down; gpt-oss
 * has a bias on each. */
static int take_moe(Loader *l, const ModelConfig *c, int i, LayerWeights *w) {
    char name[GGUF_MAX_NAME_LEN + 1];
    int d = c->dim, h = c->expert_hidden_dim, biased = c->family.biases == BIAS_ATTN_EXPERTS;
    return take_matrix(l, &w->router, blk(name, i, "ffn_gate_inp.weight"), c->n_experts, d) ||
           take_bias(l, &w->b_router, blk(name, i, "ffn_gate_inp.bias"), c->n_experts, biased) ||
           take_experts(l, c, &w->gate_exps, blk(name, i, "ffn_gate_exps.weight"), h, d) ||
           take_expert_bias(l, c, &w->b_gate_exps, blk(name, i, "ffn_gate" EXPERT_BIAS), h) ||
           take_experts(l, c, &w->up_exps, blk(name, i, "ffn_up_exps.weight"), h, d) ||
           take_expert_bias(l, c, &w->b_up_exps, blk(name, i, "ffn_up" EXPERT_BIAS), h) ||
           take_experts(l, c, &w->down_exps, blk(name, i, "ffn_down_exps.weight"), d, h) ||
           take_expert_bias(l, c, &w->b_down_exps, blk(name, i, "ffn_down" EXPERT_BIAS), d)
               ? -1 : 0;
}

/* A norm's weight, and its bias for a LayerNorm (required when the family
 * requires biases). */
static int take_norm(Loader *l, const ModelConfig *c, const float **w, const float **b,
                     const char *weight, const char *bias) {
    *b = NULL;
    return take_vector(l, w, weight, c->dim) ||
           (c->family.norm == NORM_LAYER &&
            take_bias(l, b, bias, c->dim, c->family.biases == BIAS_ALL)) ? -1 : 0;
}

/* q and k's norms (family.qk_norm): over each head, one weight vector for
 * all heads or one a head (a (n_heads, head_size) tensor), or over the
 * whole projection. */
static int take_qk_norms(Loader *l, const ModelConfig *c, int i, LayerWeights *w) {
    char name[GGUF_MAX_NAME_LEN + 1];
    int hs = model_head_size(c);
    if (c->family.qk_norm == QK_NORM_FULL)
        return take_vector(l, &w->q_norm, blk(name, i, "attn_q_norm.weight"), model_q_dim(c)) ||
               take_vector(l, &w->k_norm, blk(name, i, "attn_k_norm.weight"), model_kv_dim(c))
                   ? -1 : 0;
    const GgufTensor *t = gguf_find_tensor(l->g, blk(name, i, "attn_q_norm.weight"));
    w->qk_norm_per_head = t && t->n_dims == 2;
    if (!w->qk_norm_per_head)
        return take_vector(l, &w->q_norm, name, hs) ||
               take_vector(l, &w->k_norm, blk(name, i, "attn_k_norm.weight"), hs) ? -1 : 0;
    const GgufTensor *q = get(l, name, c->n_heads, hs);
    const GgufTensor *k = q ? get(l, blk(name, i, "attn_k_norm.weight"), c->n_kv_heads, hs) : NULL;
    if (!k) return -1;
    w->q_norm = as_f32(l, q);
    w->k_norm = as_f32(l, k);
    return 0;
}

static int take_layer(Loader *l, const ModelConfig *c, int i, LayerWeights *w) {
    char name[GGUF_MAX_NAME_LEN + 1], bias[GGUF_MAX_NAME_LEN + 1];
    const ModelFamily *f = &c->family;
    int d = c->dim, h = c->hidden_dim, all = f->biases == BIAS_ALL;
    int attn_out_bias = all || f->biases == BIAS_ATTN_EXPERTS;
    int pre = f->norms != NORMS_POST, post = f->norms != NORMS_PRE;
    /* phi2's and Command R's feed-forward read the attention's norm; so does
     * a parallel StableLM's */
    int shared = f->shared_norm || (f->parallel_shares_norm && f->parallel_residual);
    const char *ffn_norm = f->ffn_norm_name ? f->ffn_norm_name : "ffn_norm";
    char ffn_norm_w[40], ffn_norm_b[40]; /* the family's short names, within blk()'s 64 */
    snprintf(ffn_norm_w, sizeof ffn_norm_w, "%s.weight", ffn_norm);
    snprintf(ffn_norm_b, sizeof ffn_norm_b, "%s.bias", ffn_norm);
    if ((pre && take_norm(l, c, &w->attn_norm, &w->attn_norm_b, blk(name, i, "attn_norm.weight"),
                          blk(bias, i, "attn_norm.bias"))) ||
        (post && take_vector(l, &w->attn_post_norm, blk(name, i, "post_attention_norm.weight"), d)) ||
        (post && take_vector(l, &w->ffn_post_norm, blk(name, i, "post_ffw_norm.weight"), d)) ||
        (f->qk_norm != QK_NORM_NONE &&
         (!f->qk_norm_optional || gguf_find_tensor(l->g, blk(name, i, "attn_q_norm.weight"))) &&
         take_qk_norms(l, c, i, w)) ||
        take_qkv(l, c, i, w, f->biases != BIAS_OPTIONAL) ||
        take_matrix(l, &w->wo, blk(name, i, "attn_output.weight"), d, model_q_dim(c)) ||
        take_bias(l, &w->bo, blk(name, i, "attn_output.bias"), d, attn_out_bias) ||
        (f->attn_sinks &&
         take_vector(l, &w->attn_sinks, blk(name, i, "attn_sinks.weight"), c->n_heads)) ||
        (!shared && pre &&
         take_norm(l, c, &w->ffn_norm, &w->ffn_norm_b, blk(name, i, ffn_norm_w),
                   blk(bias, i, ffn_norm_b))) ||
        (f->experts && take_moe(l, c, i, w)) ||
        (!f->experts &&
         (take_ffn_up(l, c, i, w) ||
          take_bias(l, &w->b_up, blk(name, i, "ffn_up.bias"), h, all) ||
          take_matrix(l, &w->w_down, blk(name, i, "ffn_down.weight"), d, h) ||
          take_bias(l, &w->b_down, blk(name, i, "ffn_down.bias"), d, all))))
        return -1;
    if (shared) {
        w->ffn_norm = w->attn_norm;
        w->ffn_norm_b = w->attn_norm_b;
    }
    return 0;
}

/* ---- configuration --------------------------------------------------------- */

static int read_config(Loader *l, ModelConfig *c) {
    const char *path = l->g->path;
    if (gguf_get_str(l->g, "general.architecture", &l->arch, l->err)) return -1;
    const ModelFamily *f = model_family_find(l->arch);
    if (!f) {
        char names[256];
        model_family_names(names, sizeof names);
        return posenc_error(l->err, "%s: unsupported architecture '%s' (supported: %s)", path,
                            posenc_escape(l->arch).s, names);
    }
    c->family = *f;
    if (key_int(l, arch_key(l, "context_length"), &c->seq_len) ||
        key_int(l, arch_key(l, "embedding_length"), &c->dim) ||
        key_int(l, arch_key(l, "block_count"), &c->n_layers) ||
        key_int(l, arch_key(l, "feed_forward_length"), &c->hidden_dim) ||
        key_int(l, arch_key(l, "attention.head_count"), &c->n_heads))
        return -1;
    c->n_kv_heads = c->n_heads;
    c->embed_scale = f->embed_scale_sqrt ? sqrtf((float)c->dim) : 1.0f;
    c->residual_scale = c->logit_scale = 1.0f;
    if (key_int_opt(l, arch_key(l, "attention.head_count_kv"), &c->n_kv_heads) ||
        gguf_get_f32(l->g, arch_key(l, f->norm == NORM_LAYER ? "attention.layer_norm_epsilon"
                                                             : "attention.layer_norm_rms_epsilon"),
                     &c->norm_eps, l->err) ||
        key_bool_opt(l, arch_key(l, "use_parallel_residual"), &c->family.parallel_residual) ||
        key_f32_opt(l, arch_key(l, "attention.clamp_kqv"), &c->clamp_kqv) ||
        key_f32_opt(l, arch_key(l, "embedding_scale"), &c->embed_scale) ||
        key_f32_opt(l, arch_key(l, "residual_scale"), &c->residual_scale) ||
        key_f32_opt(l, arch_key(l, "logit_scale"), &c->logit_scale) ||
        key_f32_opt(l, arch_key(l, "final_logit_softcapping"), &c->final_softcap) ||
        key_f32_opt(l, "posenc.embedding_scale", &c->embed_scale))
        return -1;
    /* A mixture of experts: how many, how many a token uses, one expert's
     * width (llama.cpp's expert_feed_forward_length, which OLMoE's and
     * Granite MoE's files leave to feed_forward_length) */
    c->expert_hidden_dim = c->hidden_dim;
    c->expert_weights_norm = f->expert_weights_norm;
    if (f->experts &&
        (key_int(l, arch_key(l, "expert_count"), &c->n_experts) ||
         key_int(l, arch_key(l, "expert_used_count"), &c->n_experts_used) ||
         key_int_opt(l, arch_key(l, "expert_feed_forward_length"), &c->expert_hidden_dim) ||
         key_bool_opt(l, arch_key(l, "expert_weights_norm"), &c->expert_weights_norm)))
        return -1;
    /* The vocabulary size is the embedding's row count, as in llama.cpp. */
    const GgufTensor *te = gguf_find_tensor(l->g, "token_embd.weight");
    if (!te) return posenc_error(l->err, "%s: missing tensor 'token_embd.weight'", path);
    c->vocab_size = (int)(te->ne[1] < INT_MAX ? te->ne[1] : INT_MAX);
    /* Head size: attention.key_length when given (gemma's differs from
     * embedding_length / head_count), which value_length must equal. */
    c->head_size = c->n_heads > 0 ? c->dim / c->n_heads : 0;
    if (!gguf_find_kv(l->g, arch_key(l, "attention.key_length")) && c->n_heads > 0 &&
        c->dim % c->n_heads)
        return posenc_error(l->err, "%s: dim %d is not a multiple of n_heads %d", path, c->dim,
                            c->n_heads);
    int value_length = -1;
    if (key_int_opt(l, l->key, &c->head_size) ||
        key_int_opt(l, arch_key(l, "attention.value_length"), &value_length) ||
        model_config_validate(c, path, l->err))
        return -1;
    if (value_length >= 0 && value_length != c->head_size)
        return posenc_error(l->err, "%s: %s = %d differs from the key length %d (not "
                                    "supported)", path, l->key, value_length, c->head_size);
    if (!(c->clamp_kqv >= 0.0f && c->clamp_kqv < INFINITY))
        return posenc_error(l->err, "%s: %s.attention.clamp_kqv %g is out of range", path,
                            l->arch, (double)c->clamp_kqv);
    if (!(c->embed_scale > 0.0f && c->embed_scale < 1e6f))
        return posenc_error(l->err, "%s: the embedding scale %g is out of range", path,
                            (double)c->embed_scale);
    if (!(c->residual_scale > 0.0f && c->residual_scale < 1e6f) ||
        !(c->logit_scale > 0.0f && c->logit_scale < 1e6f) ||
        !(c->final_softcap >= 0.0f && c->final_softcap < 1e6f))
        return posenc_error(l->err, "%s: residual_scale %g, logit_scale %g or "
                                    "final_logit_softcapping %g is out of range", path,
                            (double)c->residual_scale, (double)c->logit_scale,
                            (double)c->final_softcap);
    if (f->logit_scale_divides) c->logit_scale = 1.0f / c->logit_scale;
    const GgufArray *tokens;
    if (!gguf_find_kv(l->g, "tokenizer.ggml.tokens")) return 0;
    if (gguf_get_arr(l->g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, l->err))
        return -1;
    if (tokens->n != (size_t)c->vocab_size)
        return posenc_error(l->err, "%s: tokenizer.ggml.tokens has %zu tokens but "
                                    "token_embd.weight has %d rows", path, tokens->n,
                            c->vocab_size);
    return 0;
}

/* The scaling the file names, or the one its factor tables imply (llama.cpp
 * writes Llama 3.1's as rope_freqs and Phi-3's LongRoPE as long and short
 * factors, with no type).  llama.cpp's rope.scaling.attn_factor multiplies
 * YaRN's own 0.1 ln s + 1 and is LongRoPE's whole factor: PeParams holds the
 * factor itself, as Hugging Face's attention_factor. */
static int read_rope_scaling(Loader *l, const PeTables *t, int trained_ctx, PeParams *p) {
    const char *path = l->g->path, *type = NULL;
    if (key_str_opt(l, arch_key(l, "rope.scaling.type"), &type)) return -1;
    if (!type) {
        if (gguf_find_kv(l->g, arch_key(l, "rope.scale_linear"))) {   /* older files */
            p->rope_scaling = PE_ROPE_SCALING_LINEAR;
            return gguf_get_f32(l->g, l->key, &p->rope_factor, l->err);
        }
        type = t->rope_long ? "longrope" : t->rope_freqs ? "factors" : "none";
    }
    if (pe_rope_scaling_from_name(type, &p->rope_scaling)) {
        char names[256];
        pe_rope_scaling_names(names, sizeof names, ", ");
        return posenc_error(l->err, "%s: unsupported rope scaling '%s' (%s)", path,
                            posenc_escape(type).s, names);
    }
    if (p->rope_scaling == PE_ROPE_SCALING_NONE) return 0;
    float attn_factor = 0.0f;
    int truncate = 1, has_factor = gguf_find_kv(l->g, arch_key(l, "rope.scaling.factor")) != NULL;
    if (key_f32_opt(l, l->key, &p->rope_factor) ||
        key_int_opt(l, arch_key(l, "rope.scaling.original_context_length"), &p->rope_orig_ctx) ||
        key_f32_opt(l, arch_key(l, "rope.scaling.attn_factor"), &attn_factor) ||
        key_f32_opt(l, arch_key(l, "rope.scaling.yarn_beta_fast"), &p->yarn_beta_fast) ||
        key_f32_opt(l, arch_key(l, "rope.scaling.yarn_beta_slow"), &p->yarn_beta_slow) ||
        key_bool_opt(l, "posenc.rope.scaling.yarn_truncate", &truncate) ||
        key_f32_opt(l, "posenc.rope.scaling.llama3_low_freq_factor", &p->llama3_low_freq) ||
        key_f32_opt(l, "posenc.rope.scaling.llama3_high_freq_factor", &p->llama3_high_freq))
        return -1;
    p->yarn_no_truncate = !truncate;
    float log_mul = 0.0f;
    if (key_f32_opt(l, arch_key(l, "rope.scaling.yarn_log_multiplier"), &log_mul)) return -1;
    if (log_mul != 0.0f)
        return posenc_error(l->err, "%s: %s.rope.scaling.yarn_log_multiplier (DeepSeek's mscale) "
                                    "is not supported", path, l->arch);
    if (attn_factor > 0.0f) {
        int yarn = p->rope_scaling == PE_ROPE_SCALING_YARN && p->rope_factor > 1.0f;
        p->rope_attn_factor = yarn ? attn_factor * (0.1f * logf(p->rope_factor) + 1.0f)
                                   : attn_factor;
    }
    /* LongRoPE's factor is the extended over the original context, which
     * its default attention factor is computed from */
    if (p->rope_scaling == PE_ROPE_SCALING_LONGROPE && !has_factor && p->rope_orig_ctx > 0)
        p->rope_factor = (float)trained_ctx / (float)p->rope_orig_ctx;
    return 0;
}

/* The family's scheme, unless an ALiBi family's file says "no alibi" the
 * way llama.cpp's MPT files do (max_alibi_bias 0): then its positions are
 * the learned table's, or none. */
static int native_scheme(Loader *l, const ModelFamily *f, const char **kind) {
    *kind = pe_kind_name(f->pe);
    if (f->pe != PE_ALIBI) return 0;
    float max_bias = 1.0f;
    if (key_f32_opt(l, arch_key(l, "attention.max_alibi_bias"), &max_bias)) return -1;
    if (max_bias == 0.0f) *kind = gguf_find_tensor(l->g, POSITION_TABLE) ? "learned" : "none";
    return 0;
}

static int read_positional(Loader *l, const ModelConfig *c, const PeTables *t, PeParams *p) {
    const ModelFamily *f = &c->family;
    const char *path = l->g->path;
    const char *kind;
    const char *pairing = f->pairing == PE_ROPE_INTERLEAVED ? "interleaved" : "neox";
    if (native_scheme(l, f, &kind) || key_str_opt(l, "posenc.positional", &kind) ||
        key_str_opt(l, "posenc.rope.pairing", &pairing))
        return -1;
    PeKind k;
    if (pe_kind_from_name(kind, &k)) {
        char names[256];
        pe_kind_names(names, sizeof names, ", ");
        return posenc_error(l->err, "%s: unknown posenc.positional '%s' (%s)", path,
                            posenc_escape(kind).s, names);
    }
    *p = pe_params_default(k);
    if (strcmp(pairing, "interleaved") == 0) p->rope_pairing = PE_ROPE_INTERLEAVED;
    else if (strcmp(pairing, "neox") == 0) p->rope_pairing = PE_ROPE_NEOX;
    else return posenc_error(l->err, "%s: unknown posenc.rope.pairing '%s' (interleaved, "
                                     "neox)", path, posenc_escape(pairing).s);
    if (key_f32_opt(l, arch_key(l, "rope.freq_base"), &p->rope_theta) ||
        key_int_opt(l, arch_key(l, "rope.dimension_count"), &p->rope_dim) ||
        read_rope_scaling(l, t, c->seq_len, p))
        return -1;
    /* llama.cpp writes 0 for "no alibi": keep the default for --pe alibi then. */
    float max_bias = p->alibi_max_bias;
    if (key_f32_opt(l, arch_key(l, "attention.max_alibi_bias"), &max_bias)) return -1;
    if (max_bias != 0.0f || k == PE_ALIBI) p->alibi_max_bias = max_bias;
    return key_int_opt(l, arch_key(l, "attention.relative_buckets_count"), &p->t5_buckets) ||
           key_int_opt(l, "posenc.relative_attention.max_distance", &p->t5_max_distance) ||
           key_bool_opt(l, "posenc.relative_attention.bidirectional", &p->t5_bidirectional)
               ? -1 : 0;
}

/* ---- where position lives, per layer --------------------------------------------------- */

/* The rope factor tables, as f32 vectors of one length (the rotation's
 * pairs, which the scheme checks against its rotary dims). */
static int take_rope_factors(Loader *l, PeTables *t) {
    const char *path = l->g->path;
    const struct { const char *name; const float **out; } tables[] = {
        {"rope_freqs.weight", &t->rope_freqs},
        {"rope_factors_long.weight", &t->rope_long},
        {"rope_factors_short.weight", &t->rope_short},
    };
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
        const GgufTensor *gt = gguf_find_tensor(l->g, tables[i].name);
        if (!gt) continue;
        if (gt->n_dims != 1 || gt->ne[0] > INT_MAX)
            return posenc_error(l->err, "%s: tensor '%s' must be one vector of factors", path,
                                tables[i].name);
        int n = (int)gt->ne[0];
        if (t->n_rope_factors && n != t->n_rope_factors)
            return posenc_error(l->err, "%s: tensor '%s' has %d factors, another rope factor "
                                        "table %d", path, tables[i].name, n, t->n_rope_factors);
        t->n_rope_factors = n;
        if (take_vector(l, tables[i].out, tables[i].name, n)) return -1;
    }
    if (!t->rope_long != !t->rope_short)
        return posenc_error(l->err, "%s: LongRoPE needs both rope_factors_long.weight and "
                                    "rope_factors_short.weight", path);
    return 0;
}

/* A key holding one integer or bool per layer, into out[n_layers]; 0 when
 * absent (out untouched), 1 when read, -1 on error. */
static int per_layer_ints(Loader *l, const char *key, int n_layers, int64_t *out) {
    const GgufKV *kv = gguf_find_kv(l->g, key);
    if (!kv) return 0;
    const GgufArray *arr = &kv->v.arr;
    if (kv->type != GGUF_TYPE_ARRAY || arr->type != GGUF_TYPE_BOOL) {
        if (gguf_get_arr_int(l->g, key, &arr, l->err)) return -1;
    }
    if (arr->n != (size_t)n_layers)
        return posenc_error(l->err, "%s: key '%s' has %zu entries for %d layers", l->g->path,
                            key, arr->n, n_layers);
    for (int i = 0; i < n_layers; i++) out[i] = gguf_arr_int(arr, (size_t)i);
    return 1;
}

/* Which layers slide: llama.cpp's sliding_window_pattern, a period N (layer
 * l slides unless l % N == N - 1; 0: all) or one bool a layer; without it
 * the family's period. */
static int sliding_layers(Loader *l, int n_layers, int period, int64_t *slides) {
    const char *key = arch_key(l, "attention.sliding_window_pattern");
    const GgufKV *kv = gguf_find_kv(l->g, key);
    if (kv && kv->type == GGUF_TYPE_ARRAY)
        return per_layer_ints(l, key, n_layers, slides) < 0 ? -1 : 0;
    if (kv && key_int(l, key, &period)) return -1;
    for (int i = 0; i < n_layers; i++) slides[i] = period <= 0 || i % period < period - 1;
    return 0;
}

/* The attention temperature as llama.cpp's mistral3 reads it: beta from
 * attention.temperature_scale, on every layer, floor(p / L) with L the
 * original context (rope.scaling.original_context_length, else the trained
 * one), or attention.temperature_length where the file has it. */
static int read_temperature(Loader *l, Model *m) {
    float beta = 0.0f;
    int length = 0;
    if (key_f32_opt(l, arch_key(l, "attention.temperature_scale"), &beta) ||
        key_int_opt(l, arch_key(l, "attention.temperature_length"), &length))
        return -1;
    if (beta == 0.0f) return 0;
    if (!length) length = m->pe.rope_orig_ctx > 0 ? m->pe.rope_orig_ctx : m->config.seq_len;
    if (!(beta > 0.0f && beta <= 100.0f) || length < 1)
        return posenc_error(l->err, "%s: attention.temperature_scale %g over %d positions is out of "
                                    "range", l->g->path, (double)beta, length);
    for (int i = 0; i < m->config.n_layers; i++)
        m->layers[i].temperature_beta = beta, m->layers[i].temperature_length = length;
    return 0;
}

/* Model.layers from the model-wide scheme and the per-layer keys (the
 * file's header comment lists them). */
static int read_layers(Loader *l, Model *m) {
    const ModelConfig *c = &m->config;
    const ModelFamily *f = &c->family;
    const char *path = l->g->path;
    int n = c->n_layers, window = 0;
    float score_scale = 0.0f, softcap = 0.0f;
    model_layers_uniform(m, 0);
    if (key_f32_opt(l, arch_key(l, "attention.scale"), &score_scale) ||
        key_f32_opt(l, arch_key(l, "attn_logit_softcapping"), &softcap))
        return -1;
    if (!(score_scale >= 0.0f && score_scale < 1e6f) || !(softcap >= 0.0f && softcap < 1e6f))
        return posenc_error(l->err, "%s: attention.scale %g or attn_logit_softcapping %g is out "
                                    "of range", path, (double)score_scale, (double)softcap);
    for (int i = 0; i < n; i++) {
        if (score_scale > 0.0f) m->layers[i].score_div = 1.0f / score_scale;
        m->layers[i].softcap = softcap;
    }
    int step = c->family.nope_step;
    for (int i = step - 1; step > 0 && i < n; i += step) m->layers[i].pe = pe_params_default(PE_NONE);
    int64_t *v = malloc_or_exit((size_t)n * sizeof *v, "the per-layer keys");
    float swa_theta = f->swa_theta > 0.0f ? f->swa_theta : m->pe.rope_theta;
    int rc = key_int_opt(l, arch_key(l, "attention.sliding_window"), &window) ||
             key_f32_opt(l, arch_key(l, "rope.freq_base_swa"), &swa_theta) ? -1 : 0;
    if (rc == 0 && window > 0 && (rc = sliding_layers(l, n, f->swa_period, v)) == 0)
        for (int i = 0; i < n; i++) {
            LayerAttention *la = &m->layers[i];
            if (!v[i]) {
                if (f->rope_swa_only) la->pe = pe_params_default(PE_NONE);
                continue;
            }
            la->window = window;
            la->pe.rope_theta = swa_theta;
            if (f->swa_unscaled) la->pe.rope_scaling = PE_ROPE_SCALING_NONE;
        }
    if (rc == 0 && (rc = per_layer_ints(l, arch_key(l, "attention.rope_pattern"), n, v)) == 1)
        for (int i = 0; i < n; i++)
            if (!v[i]) m->layers[i].pe = pe_params_default(PE_NONE);
    const struct { const char *key; size_t offset; } sizes[] = {
        {"posenc.layers.sliding_window", offsetof(LayerAttention, window)},
        {"posenc.layers.chunk", offsetof(LayerAttention, chunk)},
    };
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes && rc >= 0; k++) {
        if ((rc = per_layer_ints(l, sizes[k].key, n, v)) != 1) continue;
        for (int i = 0; i < n; i++) {
            if (v[i] < 0 || v[i] > INT_MAX) {
                rc = posenc_error(l->err, "%s: %s[%d] = %lld is out of range", path, sizes[k].key,
                                  i, (long long)v[i]);
                break;
            }
            *(int *)((char *)&m->layers[i] + sizes[k].offset) = (int)v[i];
        }
    }
    free(v);
    if (rc < 0 || read_temperature(l, m)) return -1;
    const GgufArray *names;
    if (!gguf_find_kv(l->g, "posenc.layers.positional")) return 0;
    if (gguf_get_arr(l->g, "posenc.layers.positional", GGUF_TYPE_STRING, &names, l->err)) return -1;
    if (names->n != (size_t)n)
        return posenc_error(l->err, "%s: posenc.layers.positional has %zu entries for %d layers",
                            path, names->n, n);
    for (int i = 0; i < n; i++) {
        GgufString name = gguf_arr_str(names, (size_t)i);
        char buf[32];
        PeKind k;
        snprintf(buf, sizeof buf, "%.*s", (int)(name.len < 31 ? name.len : 31), name.ptr);
        if (name.len >= sizeof buf || pe_kind_from_name(buf, &k))
            return posenc_error(l->err, "%s: posenc.layers.positional[%d]: unknown scheme '%s'",
                                path, i, posenc_escape(buf).s);
        if (k != m->pe.kind) m->layers[i].pe = k == PE_NONE ? pe_params_default(PE_NONE) : m->pe;
        m->layers[i].pe.kind = k;
    }
    return 0;
}

/* Instantiates the native scheme once, so that a parameter it refuses
 * (odd rotary dims, theta <= 1, learned without a table, ...) fails at load
 * time with the file's name rather than later. */
static int check_positional(const Model *m, PosencError *err) {
    char where[600];
    if (model_check_scheme(m, &m->pe, err) == 0) {
        int l = 0;
        for (; l < m->config.n_layers; l++)
            if (model_check_scheme(m, &m->layers[l].pe, err)) break;
        if (l == m->config.n_layers) return 0;
        snprintf(where, sizeof where, "%s: layer %d: positional scheme %s", m->path, l,
                 pe_kind_name(m->layers[l].pe.kind));
        return posenc_error_prefix(err, where);
    }
    snprintf(where, sizeof where, "%s: positional scheme %s", m->path, pe_kind_name(m->pe.kind));
    return posenc_error_prefix(err, where);
}
/* ---- weights --------------------------------------------------------------- */

/* A positional table of `cols` columns and any row count (its scheme
 * checks the rows), as f32; an absent one stays NULL with 0 rows. */
static int take_table(Loader *l, const char *name, int cols, const float **out, int *rows) {
    const GgufTensor *t = gguf_find_tensor(l->g, name);
    if (!t) return 0;
    *rows = (int)(t->ne[1] < INT_MAX ? t->ne[1] : INT_MAX);
    if (!(t = get(l, name, *rows, cols))) return -1;
    *out = as_f32(l, t);
    return 0;
}

static int take_weights(Loader *l, const ModelConfig *c, ModelWeights *w) {
    int d = c->dim;
    PeTables *pt = &w->positional;
    if (take_matrix(l, &w->token_embd, "token_embd.weight", c->vocab_size, d) ||
        (c->family.embed_norm &&
         take_norm(l, c, &w->embd_norm, &w->embd_norm_b, "token_embd_norm.weight",
                   "token_embd_norm.bias")) ||
        take_table(l, POSITION_TABLE, d, &pt->positions, &pt->n_positions) ||
        take_table(l, RELATIVE_BIAS_TABLE, c->n_heads, &pt->relative_bias, &pt->n_buckets))
        return -1;
    w->layers = calloc_or_exit((size_t)c->n_layers, sizeof *w->layers, "the layer table");
    for (int i = 0; i < c->n_layers; i++)
        if (take_layer(l, c, i, &w->layers[i])) return -1;
    if (take_norm(l, c, &w->output_norm, &w->output_norm_b, "output_norm.weight",
                  "output_norm.bias"))
        return -1;
    if (take_bias(l, &w->output_b, "output.bias", c->vocab_size, c->family.output_bias))
        return -1;
    if (!gguf_find_tensor(l->g, "output.weight")) {
        w->output = w->token_embd;   /* tied classifier */
        return 0;
    }
    return take_matrix(l, &w->output, "output.weight", c->vocab_size, d);
}

/* Every tensor must have been taken: a leftover means a layout this loader
 * does not understand (e.g. both fused and separate q/k/v). */
static int check_all_used(const Loader *l) {
    for (size_t i = 0; i < l->g->n_tensors; i++)
        if (!l->used[i])
            return posenc_error(l->err, "%s: unexpected tensor '%s' for architecture %s",
                                l->g->path, posenc_escape(l->g->tensors[i].name).s, l->arch);
    return 0;
}

static int load(Model *m, Loader *l) {
    if (read_config(l, &m->config)) return -1;
    size_t n = conversion_floats(l->g);
    m->owned = l->arena = n ? malloc_or_exit(n * sizeof(float), "vectors converted to f32") : NULL;
    m->owned_bytes = n * sizeof(float);
    l->used = calloc_or_exit(l->g->n_tensors ? l->g->n_tensors : 1, 1, "the tensor table");
    if (take_rope_factors(l, &m->weights.positional) ||
        read_positional(l, &m->config, &m->weights.positional, &m->pe) ||
        take_weights(l, &m->config, &m->weights) || read_layers(l, m) || check_all_used(l))
        return -1;
    return check_positional(m, l->err);
}

int model_load_gguf(Model *m, const char *path, PosencError *err) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    m->gguf = malloc_or_exit(sizeof *m->gguf, "the GGUF reader");
    if (gguf_open(m->gguf, path, err)) {
        model_free(m);
        return -1;
    }
    Loader l = {.g = m->gguf, .err = err};
    int rc = load(m, &l);
    free(l.used);
    if (rc) model_free(m);
    return rc;
}
