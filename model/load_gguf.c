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
 * {arch}.attention.sliding_window is llama.cpp's key (its gemma2's); posenc
 * reads it for every family, e.g. a Mistral converted to `llama`. */
#include <limits.h>
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

/* Floats the vectors may need once converted to f32: every 1-D tensor and
 * positional table not stored as f32.  An upper bound, so that one
 * allocation holds them all and pointers into it stay valid. */
static size_t conversion_floats(const GgufFile *g) {
    size_t n = 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        const GgufTensor *t = &g->tensors[i];
        if (t->type != TENSOR_F32 &&
            (t->n_dims == 1 || strcmp(t->name, POSITION_TABLE) == 0 ||
             strcmp(t->name, RELATIVE_BIAS_TABLE) == 0))
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

/* A norm's weight, and its bias for a LayerNorm (required when the family
 * requires biases). */
static int take_norm(Loader *l, const ModelConfig *c, const float **w, const float **b,
                     const char *weight, const char *bias) {
    *b = NULL;
    return take_vector(l, w, weight, c->dim) ||
           (c->family.norm == NORM_LAYER &&
            take_bias(l, b, bias, c->dim, c->family.biases == BIAS_ALL)) ? -1 : 0;
}

static int take_layer(Loader *l, const ModelConfig *c, int i, LayerWeights *w) {
    char name[GGUF_MAX_NAME_LEN + 1], bias[GGUF_MAX_NAME_LEN + 1];
    const ModelFamily *f = &c->family;
    int d = c->dim, h = c->hidden_dim, all = f->biases == BIAS_ALL;
    if (take_norm(l, c, &w->attn_norm, &w->attn_norm_b, blk(name, i, "attn_norm.weight"),
                  blk(bias, i, "attn_norm.bias")) ||
        take_qkv(l, c, i, w, f->biases != BIAS_OPTIONAL) ||
        take_matrix(l, &w->wo, blk(name, i, "attn_output.weight"), d, model_q_dim(c)) ||
        take_bias(l, &w->bo, blk(name, i, "attn_output.bias"), d, all) ||
        (!f->shared_norm &&
         take_norm(l, c, &w->ffn_norm, &w->ffn_norm_b, blk(name, i, "ffn_norm.weight"),
                   blk(bias, i, "ffn_norm.bias"))) ||
        (model_family_gated(f) &&
         take_matrix(l, &w->w_gate, blk(name, i, "ffn_gate.weight"), h, d)) ||
        take_matrix(l, &w->w_up, blk(name, i, "ffn_up.weight"), h, d) ||
        take_bias(l, &w->b_up, blk(name, i, "ffn_up.bias"), h, all) ||
        take_matrix(l, &w->w_down, blk(name, i, "ffn_down.weight"), d, h) ||
        take_bias(l, &w->b_down, blk(name, i, "ffn_down.bias"), d, all))
        return -1;
    if (f->shared_norm) {
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
    if (key_int_opt(l, arch_key(l, "attention.head_count_kv"), &c->n_kv_heads) ||
        gguf_get_f32(l->g, arch_key(l, f->norm == NORM_LAYER ? "attention.layer_norm_epsilon"
                                                             : "attention.layer_norm_rms_epsilon"),
                     &c->norm_eps, l->err) ||
        key_bool_opt(l, arch_key(l, "use_parallel_residual"), &c->family.parallel_residual) ||
        key_f32_opt(l, arch_key(l, "attention.clamp_kqv"), &c->clamp_kqv) ||
        key_int_opt(l, arch_key(l, "attention.sliding_window"), &c->sliding_window) ||
        key_f32_opt(l, "posenc.embedding_scale", &c->embed_scale))
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
        return posenc_error(l->err, "%s: posenc.embedding_scale %g is out of range", path,
                            (double)c->embed_scale);
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

static int read_rope_scaling(Loader *l, PeParams *p) {
    const char *type = NULL;
    if (key_str_opt(l, arch_key(l, "rope.scaling.type"), &type)) return -1;
    if (!type) {   /* older files: only a linear factor */
        if (!gguf_find_kv(l->g, arch_key(l, "rope.scale_linear"))) return 0;
        p->rope_scaling = PE_ROPE_SCALING_LINEAR;
        return gguf_get_f32(l->g, l->key, &p->rope_factor, l->err);
    }
    if (pe_rope_scaling_from_name(type, &p->rope_scaling))
        return posenc_error(l->err, "%s: unsupported rope scaling '%s' (none, linear, ntk, "
                                    "yarn)", l->g->path, posenc_escape(type).s);
    if (p->rope_scaling == PE_ROPE_SCALING_NONE) return 0;
    return gguf_get_f32(l->g, arch_key(l, "rope.scaling.factor"), &p->rope_factor, l->err) ||
           key_int_opt(l, arch_key(l, "rope.scaling.original_context_length"),
                       &p->rope_orig_ctx) ? -1 : 0;
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

static int read_positional(Loader *l, const ModelFamily *f, PeParams *p) {
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
        read_rope_scaling(l, p))
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

/* Instantiates the native scheme once, so that a parameter it refuses
 * (odd rotary dims, theta <= 1, learned without a table, ...) fails at load
 * time with the file's name rather than later. */
static int check_positional(const Model *m, PosencError *err) {
    if (model_check_scheme(m, &m->pe, err) == 0) return 0;
    char where[600];
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
    w->layers = callocCheck((size_t)c->n_layers, sizeof *w->layers, "the layer table");
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
    if (read_config(l, &m->config) || read_positional(l, &m->config.family, &m->pe)) return -1;
    size_t n = conversion_floats(l->g);
    m->owned = l->arena = n ? mallocCheck(n * sizeof(float), "vectors converted to f32") : NULL;
    m->owned_bytes = n * sizeof(float);
    l->used = callocCheck(l->g->n_tensors ? l->g->n_tensors : 1, 1, "the tensor table");
    if (take_weights(l, &m->config, &m->weights) || check_all_used(l)) return -1;
    return check_positional(m, l->err);
}

int model_load_gguf(Model *m, const char *path, PosencError *err) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    m->gguf = mallocCheck(sizeof *m->gguf, "the GGUF reader");
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
