/* model_inspect: one walk over the model feeds an emitter that writes
 * either "key  value" lines (nested by indentation) or JSON, so the two
 * formats always carry the same fields. */
#include "modes/inspect.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
#include "base/json.h"

typedef struct {
    FILE *out;
    int json;
    int depth;       /* text: indentation level */
    int need_comma;  /* json: a value precedes at this level */
    size_t n_tensors, n_params, n_bytes;
    /* the same per tensor type: the file's type mix */
    size_t type_tensors[TENSOR_TYPE_COUNT], type_params[TENSOR_TYPE_COUNT], type_bytes[TENSOR_TYPE_COUNT];
} Emitter;

static void json_string(FILE *out, const char *s) { json_write_string(out, s, strlen(s)); }

static void em_key(Emitter *e, const char *key) {
    if (e->json) {
        if (e->need_comma) fputc(',', e->out);
        json_string(e->out, key);
        fputc(':', e->out);
    } else {
        fprintf(e->out, "%*s%-*s ", 2 * e->depth, "", 18 - 2 * e->depth, key);
    }
    e->need_comma = 1;
}

/* v NULL: JSON null, "none" as text. */
static void em_str(Emitter *e, const char *key, const char *v) {
    em_key(e, key);
    if (!e->json) fprintf(e->out, "%s\n", v ? posenc_escape(v).s : "none");
    else if (v) json_string(e->out, v);
    else fputs("null", e->out);
}

static void em_int(Emitter *e, const char *key, long long v) {
    em_key(e, key);
    fprintf(e->out, e->json ? "%lld" : "%lld\n", v);
}

/* The shortest decimal that reads back as the same float: 1e-05, not
 * 9.99999975e-06. */
static void em_num(Emitter *e, const char *key, float v) {
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    em_key(e, key);
    fprintf(e->out, e->json ? "%s" : "%s\n", buf);
}

static void em_bool(Emitter *e, const char *key, int v) {
    em_key(e, key);
    fprintf(e->out, e->json ? "%s" : "%s\n", v ? "true" : "false");
}

/* Opens a nested object or array (json) or an indented section (text). */
static void em_begin(Emitter *e, const char *key, char open) {
    if (e->json) {
        em_key(e, key);
        fputc(open, e->out);
    } else {
        fprintf(e->out, "%*s%s\n", 2 * e->depth, "", key);
    }
    e->depth++;
    e->need_comma = 0;
}

static void em_end(Emitter *e, char close) {
    if (e->json) fputc(close, e->out);
    e->depth--;
    e->need_comma = 1;
}

/* ---- sections ---------------------------------------------------------------- */

/* A mixture of experts: how many, how a token picks them, and the
 * parameters of the file against those one token uses (all but the
 * experts it does not pick, with their biases where the family has them:
 * gate's and up's of expert_hidden each, down's of dim), and the bytes it
 * reads. */
static void emit_experts(Emitter *e, const Model *m) {
    const ModelConfig *c = &m->config;
    long long total = 0;
    for (size_t i = 0; i < m->gguf->n_tensors; i++) total += (long long)m->gguf->tensors[i].nelem;
    long long per_expert = 3LL * c->dim * c->expert_hidden_dim;
    if (c->family.biases == BIAS_ATTN_EXPERTS) per_expert += 2LL * c->expert_hidden_dim + c->dim;
    long long unpicked = (long long)c->n_layers * (c->n_experts - c->n_experts_used) * per_expert;
    em_int(e, "experts", c->n_experts);
    em_int(e, "experts_used", c->n_experts_used);
    em_int(e, "expert_hidden", c->expert_hidden_dim);
    em_str(e, "router", model_router_name(c->family.router));
    if (c->family.router == ROUTER_SOFTMAX_TOPK) em_bool(e, "router_renorm", c->expert_weights_norm);
    em_int(e, "params_total", total);
    em_int(e, "params_active", total - unpicked);
    em_int(e, "bytes_active", (long long)(model_bytes_active(m) + 0.5));
    em_bool(e, "experts_packed", m->experts_packed);
}

static void emit_config(Emitter *e, const Model *m) {
    const ModelConfig *c = &m->config;
    em_begin(e, "config", '{');
    em_int(e, "dim", c->dim);
    em_int(e, "hidden_dim", c->hidden_dim);
    em_int(e, "n_layers", c->n_layers);
    em_int(e, "n_heads", c->n_heads);
    em_int(e, "n_kv_heads", c->n_kv_heads);
    em_int(e, "head_size", model_head_size(c));
    em_str(e, "norm", model_norm_name(c->family.norm));
    em_str(e, "feed_forward", model_ffn_name(c->family.ffn));
    em_str(e, "residual", c->family.parallel_residual ? "parallel" : "sequential");
    em_bool(e, "embedding_norm", c->family.embed_norm);
    em_int(e, "vocab_size", c->vocab_size);
    em_int(e, "context_length", c->seq_len);
    em_num(e, "norm_eps", c->norm_eps);
    em_num(e, "embedding_scale", c->embed_scale);
    if (c->clamp_kqv > 0.0f) em_num(e, "clamp_kqv", c->clamp_kqv);
    if (c->family.qk_norm != QK_NORM_NONE)
        em_str(e, "qk_norm", c->family.qk_norm == QK_NORM_HEAD ? "per head" : "whole projection");
    if (c->family.norms != NORMS_PRE)
        em_str(e, "norms", c->family.norms == NORMS_SANDWICH ? "before and after each sub-layer"
                                                              : "after each sub-layer only");
    if (c->residual_scale != 1.0f) em_num(e, "residual_scale", c->residual_scale);
    if (c->logit_scale != 1.0f) em_num(e, "logit_scale", c->logit_scale);
    if (c->final_softcap > 0.0f) em_num(e, "final_softcap", c->final_softcap);
    if (c->n_experts) emit_experts(e, m);
    if (c->family.ffn == FFN_SWIGLU_OAI) em_num(e, "swiglu_limit", c->family.swiglu_limit);
    if (c->family.attn_sinks) em_str(e, "attn_sinks", "learned, one logit per head");
    em_bool(e, "output_bias", m->weights.output_b != NULL);
    em_bool(e, "tied_output", m->weights.output.data == m->weights.token_embd.data);
    em_end(e, '}');
}

/* `p` is the scheme that would run: the checkpoint's after the command
 * line's overrides; where it differs, the checkpoint's own is shown too. */
static void emit_positional(Emitter *e, const Model *m, const PeParams *p) {
    em_begin(e, "positional", '{');
    int overridden = memcmp(p, &m->pe, sizeof *p) != 0;
    em_str(e, "scheme", pe_kind_name(p->kind));
    em_str(e, "source", overridden ? "command line" : "checkpoint");
    if (overridden) em_str(e, "checkpoint", pe_kind_name(m->pe.kind));
    const PeOps *ops = pe_kind_ops(p->kind);
    PeField fields[PE_MAX_FIELDS];
    int n = ops->describe ? ops->describe(p, model_head_size(&m->config), m->config.seq_len,
                                          &m->weights.positional, fields) : 0;
    for (int i = 0; i < n; i++) {
        const PeField *f = &fields[i];
        if (f->text) em_str(e, f->key, f->text);
        else if (f->integer) em_int(e, f->key, (long long)f->number);
        else em_num(e, f->key, (float)f->number);
    }
    /* A table can be present whatever the scheme (it enables --pe learned). */
    em_int(e, "n_positions", m->weights.positional.n_positions);
    em_end(e, '}');
}

/* Where position lives, layer by layer: in text, runs of equal layers on
 * one line ("0-4: rope theta=10000 window=512"); in JSON, one object a
 * layer. */
static void emit_layers(Emitter *e, const Model *m, const LayerAttention *layers) {
    int n = m->config.n_layers;
    em_begin(e, "layers", e->json ? '[' : '{');
    for (int l = 0; l < n;) {
        if (e->json) {
            if (e->need_comma) fputc(',', e->out);
            const PeParams *p = &layers[l].pe;
            fprintf(e->out, "{\"layer\":%d,\"scheme\":\"%s\",\"window\":%d,\"softcap\":%.9g,"
                            "\"score_div\":%.9g", l, pe_kind_name(p->kind), layers[l].window,
                    (double)layers[l].softcap, (double)layers[l].score_div);
            if (p->kind == PE_ROPE)
                fprintf(e->out, ",\"rope_theta\":%.9g,\"rope_scaling\":\"%s\",\"rope_factor\":%.9g",
                        (double)p->rope_theta, pe_rope_scaling_name(p->rope_scaling),
                        (double)p->rope_factor);
            fputc('}', e->out);
            e->need_comma = 1;
            l++;
            continue;
        }
        char line[160], key[32];
        model_layer_describe(&layers[l], line, sizeof line);
        int last = model_layers_run_end(layers, n, l);
        snprintf(key, sizeof key, last > l ? "%d-%d" : "%d", l, last);
        em_str(e, key, line);
        l = last + 1;
    }
    em_end(e, e->json ? ']' : '}');
}

/* g: the GGUF file, or NULL for a .bin (whose vocabulary is elsewhere). */
static void emit_tokenizer(Emitter *e, const GgufFile *g) {
    const char *kind = NULL;
    size_t n_tokens = 0;
    PosencError err;
    const GgufArray *tokens;
    if (g && gguf_find_kv(g, "tokenizer.ggml.model"))
        gguf_get_str(g, "tokenizer.ggml.model", &kind, &err);
    if (g && gguf_find_kv(g, "tokenizer.ggml.tokens") &&
        gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, &err) == 0)
        n_tokens = tokens->n;
    em_begin(e, "tokenizer", '{');
    em_bool(e, "embedded", kind != NULL);
    em_str(e, "model", kind || e->json ? kind : "none embedded");
    em_int(e, "n_tokens", (long long)n_tokens);
    em_end(e, '}');
}

/* ---- tensor table ---------------------------------------------------------- */

/* shape: outermost first, as PyTorch prints it ((rows, cols) for a matrix). */
static void emit_tensor(Emitter *e, const char *name, TensorType type, int n_dims,
                        const int64_t *shape, size_t bytes) {
    size_t n = 1;
    for (int d = 0; d < n_dims; d++) n *= (size_t)shape[d];
    e->n_tensors++;
    e->n_params += n;
    e->n_bytes += bytes;
    e->type_tensors[type]++;
    e->type_params[type] += n;
    e->type_bytes[type] += bytes;
    if (e->json) {
        if (e->need_comma) fputc(',', e->out);
        fputs("{\"name\":", e->out);
        json_string(e->out, name);
        fprintf(e->out, ",\"type\":\"%s\",\"shape\":[", tensor_type_name(type));
        for (int d = 0; d < n_dims; d++) fprintf(e->out, "%s%lld", d ? "," : "", (long long)shape[d]);
        fprintf(e->out, "],\"bytes\":%zu}", bytes);
        e->need_comma = 1;
        return;
    }
    char dims[64] = "";
    for (int d = 0, o = 0; d < n_dims; d++)
        o += snprintf(dims + o, sizeof dims - (size_t)o, "%s%lld", d ? " x " : "", (long long)shape[d]);
    fprintf(e->out, "%*s%-32s %-5s %-16s %12zu\n", 2 * e->depth, "", posenc_escape(name).s,
            tensor_type_name(type), dims, bytes);
}

static void emit_gguf_tensors(Emitter *e, const GgufFile *g) {
    for (size_t i = 0; i < g->n_tensors; i++) {
        const GgufTensor *t = &g->tensors[i];
        int64_t shape[GGUF_MAX_DIMS];
        for (int d = 0; d < t->n_dims; d++) shape[d] = t->ne[t->n_dims - 1 - d];
        emit_tensor(e, t->name, t->type, t->n_dims, shape, t->nbytes);
    }
}

static void emit_matrix(Emitter *e, const char *name, const Tensor *t) {
    const int64_t shape[2] = {t->rows, t->cols};
    emit_tensor(e, name, t->type, 2, shape,
                (size_t)t->rows * tensor_row_bytes(t->type, (size_t)t->cols));
}

static void emit_vector(Emitter *e, const char *name, int n) {
    const int64_t shape[1] = {n};
    emit_tensor(e, name, TENSOR_F32, 1, shape, (size_t)n * sizeof(float));
}

/* A llama2.c .bin names nothing: list its weights under the names
 * tools/convert.py gives them in GGUF. */
static void emit_llama2c_tensors(Emitter *e, const Model *m) {
    const ModelConfig *c = &m->config;
    const ModelWeights *w = &m->weights;
    emit_matrix(e, "token_embd.weight", &w->token_embd);
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *lw = &w->layers[l];
        const struct { const char *name; const Tensor *t; } mats[] = {
            {"attn_q", &lw->wq}, {"attn_k", &lw->wk}, {"attn_v", &lw->wv},
            {"attn_output", &lw->wo}, {"ffn_gate", &lw->w_gate}, {"ffn_down", &lw->w_down},
            {"ffn_up", &lw->w_up},
        };
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        emit_vector(e, name, c->dim);
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, mats[i].name);
            emit_matrix(e, name, mats[i].t);
        }
        snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", l);
        emit_vector(e, name, c->dim);
    }
    emit_vector(e, "output_norm.weight", c->dim);
    if (w->output.data != w->token_embd.data) emit_matrix(e, "output.weight", &w->output);
}

/* Bits per weight, 5 significant digits (q4_k: 4.5, q6_k: 6.5625). */
static void em_bits_per_weight(Emitter *e, size_t bytes, size_t params) {
    em_key(e, "bits_per_weight");
    fprintf(e->out, e->json ? "%.5g" : "%.5g\n", params ? 8.0 * (double)bytes / (double)params : 0.0);
}

static void emit_tensors(Emitter *e, const Model *m) {
    em_begin(e, "tensors", '[');
    if (!e->json) fprintf(e->out, "  %-32s %-5s %-16s %12s\n", "name", "type", "shape", "bytes");
    if (m->gguf) emit_gguf_tensors(e, m->gguf);
    else emit_llama2c_tensors(e, m);
    em_end(e, ']');
    em_begin(e, "totals", '{');
    em_int(e, "n_tensors", (long long)e->n_tensors);
    em_int(e, "n_params", (long long)e->n_params);
    em_int(e, "bytes", (long long)e->n_bytes);
    em_bits_per_weight(e, e->n_bytes, e->n_params);
    em_end(e, '}');
    em_begin(e, "types", '{');
    for (int t = 0; t < TENSOR_TYPE_COUNT; t++) {
        if (!e->type_tensors[t]) continue;
        em_begin(e, tensor_type_name((uint32_t)t), '{');
        em_int(e, "n_tensors", (long long)e->type_tensors[t]);
        em_int(e, "n_params", (long long)e->type_params[t]);
        em_int(e, "bytes", (long long)e->type_bytes[t]);
        em_bits_per_weight(e, e->type_bytes[t], e->type_params[t]);
        em_end(e, '}');
    }
    em_end(e, '}');
}

/* ---- memory ------------------------------------------------------------------ */

static void em_bytes(Emitter *e, const char *key, size_t v) {
    em_key(e, key);
    fprintf(e->out, e->json ? "%zu" : "%zu\n", v);
}

/* One mode's scratch and its peak: weights + cache + scratch. */
static void emit_mode_memory(Emitter *e, const char *mode, const ContextMemory *mem) {
    em_begin(e, mode, '{');
    em_bytes(e, "scratch_bytes", mem->scratch);
    em_bytes(e, "peak_bytes", mem->total);
    em_end(e, '}');
}

/* What a run at this --ctx and --kv-type holds: generation prefills in
 * chunks and keeps one row of logits, ppl one chunk of n_ctx rows; a
 * Self-Extend layer adds its grouped keys. */
static void emit_memory(Emitter *e, const Model *m, const LayerAttention *layers, int n_ctx,
                        TensorType kv_type) {
    ContextSize gen = context_size_generate(n_ctx, kv_type), ppl = context_size_ppl(n_ctx, kv_type);
    for (int l = 0; l < m->config.n_layers; l++)
        gen.self_extend = ppl.self_extend |= layers[l].self_extend_group > 0;
    ContextMemory g = context_memory(m, &gen), p = context_memory(m, &ppl);
    em_begin(e, "memory", '{');
    em_int(e, "ctx", n_ctx);
    em_str(e, "kv_type", tensor_type_name(kv_type));
    em_int(e, "threads", omp_get_max_threads());
    em_bytes(e, "weights_bytes", g.weights);
    em_bytes(e, "kv_cache_bytes", g.kv_cache);
    emit_mode_memory(e, "generate", &g);
    emit_mode_memory(e, "ppl", &p);
    em_end(e, '}');
}

/* The header lines every file starts with; name and architecture only
 * where the file has them. */
static void emit_file(Emitter *e, const char *path, const GgufFile *g) {
    const char *name = NULL;
    PosencError err;
    if (g && gguf_find_kv(g, "general.name")) gguf_get_str(g, "general.name", &name, &err);
    em_str(e, "file", path);
    em_str(e, "format", g ? "gguf" : "llama2.c");
    if (g) em_int(e, "gguf_version", g->version);
    if (name) em_str(e, "name", name);
}

void model_inspect(const Model *m, const PeParams *pe, const LayerAttention *layers, FILE *out,
                   int json, int n_ctx, TensorType kv_type) {
    Emitter e = {.out = out, .json = json};
    if (json) fputc('{', out);
    emit_file(&e, m->path, m->gguf);
    em_str(&e, "architecture", m->config.family.name);
    emit_config(&e, m);
    emit_positional(&e, m, pe);
    emit_layers(&e, m, layers);
    emit_tokenizer(&e, m->gguf);
    emit_tensors(&e, m);
    emit_memory(&e, m, layers, n_ctx, kv_type);
    if (json) fputs("}\n", out);
}

void gguf_inspect_vocab(const GgufFile *g, FILE *out, int json) {
    Emitter e = {.out = out, .json = json};
    const char *arch = NULL;
    PosencError err;
    if (gguf_find_kv(g, "general.architecture")) gguf_get_str(g, "general.architecture", &arch, &err);
    if (json) fputc('{', out);
    emit_file(&e, g->path, g);
    em_str(&e, "architecture", arch);
    em_str(&e, "contents", "vocabulary only (no tensors)");
    emit_tokenizer(&e, g);
    if (json) fputs("}\n", out);
}
