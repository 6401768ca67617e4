#include "model/model.h"

#include "model/kernels.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Bounds well above any model this engine targets; they exist so that a
 * corrupt header fails here instead of in a multi-terabyte malloc. */
#define MAX_DIM (1 << 16)
#define MAX_HIDDEN (1 << 18)
#define MAX_VOCAB (1 << 22)
#define MAX_SEQ (1 << 22)
#define MAX_EXPERTS (1 << 12) /* n_experts * expert_hidden_dim rows then fit an int */

int model_kv_dim(const ModelConfig *c) { return c->head_size * c->n_kv_heads; }
int model_q_dim(const ModelConfig *c) { return c->head_size * c->n_heads; }
int model_head_size(const ModelConfig *c) { return c->head_size; }

double model_bytes_active(const Model *m) {
    const ModelConfig *c = &m->config;
    const GgufFile *g = m->gguf;
    double b = 0;
    int untied = 0;
    for (size_t i = 0; i < g->n_tensors; i++) untied |= !strcmp(g->tensors[i].name, "output.weight");
    for (size_t i = 0; i < g->n_tensors; i++) {
        const GgufTensor *t = &g->tensors[i];
        double read = (double)t->nbytes;
        if (posenc_ends_with(t->name, "_exps.weight") || posenc_ends_with(t->name, "_exps.bias"))
            read *= (double)c->n_experts_used / c->n_experts;
        else if (untied && !strcmp(t->name, "token_embd.weight"))
            read *= (double)t->ne[0] / (double)t->nelem;
        b += read;
    }
    return b;
}

static int check_range(const char *path, const char *what, long v, long max, PosencError *err) {
    if (v <= 0 || v > max)
        return posenc_error(err, "%s: %s = %ld is out of range (1..%ld)", path, what, v, max);
    return 0;
}

int model_config_validate(const ModelConfig *c, const char *path, PosencError *err) {
    if (check_range(path, "dim", c->dim, MAX_DIM, err) ||
        check_range(path, "hidden_dim", c->hidden_dim, MAX_HIDDEN, err) ||
        check_range(path, "n_layers", c->n_layers, MODEL_MAX_LAYERS, err) ||
        check_range(path, "n_heads", c->n_heads, c->dim, err) ||
        check_range(path, "n_kv_heads", c->n_kv_heads, c->n_heads, err) ||
        check_range(path, "head_size", c->head_size, MAX_DIM / c->n_heads, err) ||
        check_range(path, "vocab_size", c->vocab_size, MAX_VOCAB, err) ||
        check_range(path, "seq_len", c->seq_len, MAX_SEQ, err))
        return -1;
    if (c->family.experts &&
        (check_range(path, "expert_count", c->n_experts, MAX_EXPERTS, err) ||
         check_range(path, "expert_used_count", c->n_experts_used, MAX_EXPERTS, err) ||
         check_range(path, "expert_feed_forward_length", c->expert_hidden_dim, MAX_HIDDEN, err)))
        return -1;
    if (c->n_experts_used > c->n_experts)
        return posenc_error(err, "%s: expert_used_count %d is larger than expert_count %d", path,
                            c->n_experts_used, c->n_experts);
    if (c->n_heads % c->n_kv_heads != 0)
        return posenc_error(err, "%s: n_heads %d is not a multiple of n_kv_heads %d", path,
                            c->n_heads, c->n_kv_heads);
    if (!(c->norm_eps > 0.0f && c->norm_eps < 1.0f))
        return posenc_error(err, "%s: norm epsilon %g is out of range", path, (double)c->norm_eps);
    return 0;
}

/* Every matrix decode multiplies with, for model_pack: the layers' own and
 * the head, then (from *n_dense on) a mixture's stacked experts whose
 * every expert starts a packed group (model_expert_matrix's views then
 * read the copy). */
static int matrices(Model *m, Tensor **out, int *n_dense) {
    int n = 0;
    for (int l = 0; l < m->config.n_layers; l++) {
        Tensor *all[LAYER_MATRICES] = LAYER_MATRIX_LIST(&m->weights.layers[l]);
        for (int i = 0; i < LAYER_MATRICES; i++)
            if (all[i]->data) out[n++] = all[i];
    }
    out[n++] = &m->weights.output;
    *n_dense = n;
    for (int l = 0; l < m->config.n_layers && m->config.n_experts; l++) {
        LayerWeights *lw = &m->weights.layers[l];
        Tensor *stacked[] = {&lw->gate_exps, &lw->up_exps, &lw->down_exps};
        for (int i = 0; i < 3; i++)
            if (stacked[i]->data && stacked[i]->rows / m->config.n_experts % KERNELS_PACK_ROWS == 0)
                out[n++] = stacked[i];
    }
    return n;
}

/* Bytes t's packed copy takes in model_pack's buffer (0: not packed),
 * whole 64-byte lines; SIZE_MAX when that overflows. */
static size_t packed_slot(const Tensor *t) {
    size_t b = kernels_packed_bytes(t);
    return b > SIZE_MAX - 64 ? SIZE_MAX : (b + 63) / 64 * 64;
}

/* A packed matrix's mapped rows are not read again (prefill and decode
 * read the copy; a tied output's rows are read back, one per embedding
 * lookup): their whole pages leave the process (the mapping is read-only,
 * so a later read faults them back in from the file).  Only rows inside
 * the file's mapping: anonymous memory would come back as zeros. */
static void release_pages(const Model *m, const Tensor *t) {
    const MappedFile *f = m->gguf ? &m->gguf->map : &m->file;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)t->data;
    uintptr_t end = start + (uintptr_t)t->rows * tensor_row_bytes(t->type, (size_t)t->cols);
    if (!f->data || start < (uintptr_t)f->data || end > (uintptr_t)f->data + f->size) return;
    start = (start + page - 1) / page * page;
    end = end / page * page;
    if (end > start) madvise((void *)start, end - start, MADV_DONTNEED);
}

/* The matrices whose type the kernel path in use packs (kernels.h) are
 * copied once into one buffer, which decode and prefill then read; their
 * mapped pages are released (the token embeddings, read by row, are
 * never packed, and a tied output's rows stay readable). */
#define PACK_SLAB_ROWS 4096 /* a multiple of every packed group's rows */
static int model_pack(Model *m, const char *path, PosencError *err) {
    size_t count = (size_t)m->config.n_layers * (LAYER_MATRICES + 3) + 1;
    Tensor **list = malloc(count * sizeof *list);
    if (!list) return posenc_error_oom(err, count, sizeof *list, "the matrix list");
    int n_dense, n = matrices(m, list, &n_dense);
    size_t total = 0, dense = 0;
    for (int i = 0; i < n; i++) {
        size_t slot = packed_slot(list[i]);
        if (slot == SIZE_MAX || !size_add(&total, total, slot)) {
            free(list);
            return posenc_error(err, "%s: the packed copies of its matrices overflow size_t", path);
        }
        if (i + 1 == n_dense) dense = total;
    }
    /* A mixture's experts are packed when the whole copy fits in three
     * quarters of the memory; else they stay in the file's pages, which a
     * token reads as the router picks them and the system may drop and
     * read again, so a model larger than the memory still runs. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double memory = pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
    m->experts_packed = total > dense && (double)total <= 0.75 * memory;
    if (!m->experts_packed) {
        n = n_dense;
        total = dense;
    }
    if (total) {
        /* in 2 MB pages where the system gives them: decode streams the
         * whole copy per token, and 4 KB pages cost a TLB miss each 4 KB */
        size_t huge = (size_t)2 << 20;
        if (total <= SIZE_MAX - huge) total = (total + huge - 1) / huge * huge;
        m->packed = aligned_alloc(huge, total);
#ifdef MADV_HUGEPAGE
        if (m->packed) madvise(m->packed, total, MADV_HUGEPAGE);
#endif
        if (!m->packed) {
            free(list);
            return posenc_error_oom(err, total, 1, "decode's packed copies of the matrices");
        }
        m->packed_bytes = total;
        char *at = m->packed;
        for (int i = 0; i < n; i++) {
            size_t slot = packed_slot(list[i]);
            if (!slot) continue;
            /* slab by slab, each slab's mapped pages released once it is
             * packed, so that the process never holds much of both (whole,
             * the 110M f32 output matrix peaked 98 MB higher) */
            for (int r0 = 0; r0 < list[i]->rows; r0 += PACK_SLAB_ROWS) {
                Tensor done = *list[i], slab = *list[i];
                done.rows = r0;
                slab.data = tensor_row(list[i], r0);
                slab.rows = list[i]->rows - r0 < PACK_SLAB_ROWS ? list[i]->rows - r0 : PACK_SLAB_ROWS;
                kernels_pack(at + (r0 ? kernels_packed_bytes(&done) : 0), &slab);
                release_pages(m, &slab);
            }
            release_pages(m, list[i]); /* the pages across slab boundaries */
            list[i]->packed = at;
            at += slot;
        }
    }
    free(list);
    return 0;
}

int model_load(Model *m, const char *path, PosencError *err) {
    memset(m, 0, sizeof *m);
    MappedFile probe;
    if (mapped_file_open(&probe, path, err)) return -1;
    int is_gguf = probe.size >= 4 && memcmp(probe.data, "GGUF", 4) == 0;
    mapped_file_close(&probe);
    if (is_gguf ? model_load_gguf(m, path, err) : model_load_llama2c(m, path, err)) return -1;
    if (model_pack(m, path, err)) {
        model_free(m);
        return -1;
    }
    return 0;
}

void model_layers_uniform(Model *m, int window) {
    const ModelConfig *c = &m->config;
    m->layers = calloc_or_exit((size_t)c->n_layers, sizeof *m->layers, "the layers' attention");
    for (int l = 0; l < c->n_layers; l++)
        m->layers[l] = (LayerAttention){.pe = m->pe, .window = window,
                                        .score_div = sqrtf((float)model_head_size(c))};
}

PeParams model_layer_scheme(const Model *m, const PeParams *p, int l) {
    const PeParams *own = &m->layers[l].pe, *ckpt = &m->pe;
    if (own->kind != ckpt->kind) return *own;   /* a layer without position */
    if (p->kind != ckpt->kind) return *p;
    PeParams out = *own;
#define CHANGED(field) if (p->field != ckpt->field) out.field = p->field
    CHANGED(rope_theta);
    CHANGED(rope_pairing);
    CHANGED(rope_dim);
    CHANGED(rope_scaling);
    CHANGED(rope_factor);
    CHANGED(rope_orig_ctx);
    CHANGED(rope_attn_factor);
    CHANGED(yarn_beta_fast);
    CHANGED(yarn_beta_slow);
    CHANGED(yarn_no_truncate);
    CHANGED(llama3_low_freq);
    CHANGED(llama3_high_freq);
    CHANGED(longrope_rule);
    CHANGED(alibi_max_bias);
    CHANGED(learned_overflow);
    CHANGED(t5_buckets);
    CHANGED(t5_max_distance);
    CHANGED(t5_bidirectional);
#undef CHANGED
    return out;
}

LayerAttention *model_layers_for(const Model *m, const PeParams *p) {
    int n = m->config.n_layers;
    LayerAttention *t = malloc_or_exit((size_t)n * sizeof *t, "the layers' attention");
    for (int l = 0; l < n; l++) {
        t[l] = m->layers[l];
        t[l].pe = model_layer_scheme(m, p, l);
    }
    return t;
}

void model_layer_describe(const LayerAttention *la, char *buf, size_t size) {
    const PeParams *p = &la->pe;
    size_t at = (size_t)snprintf(buf, size, "%s", pe_kind_name(p->kind));
    if (p->kind == PE_ROPE && at < size) {
        at += (size_t)snprintf(buf + at, size - at, " theta=%g", (double)p->rope_theta);
        if (p->rope_scaling == PE_ROPE_SCALING_FACTORS && at < size)
            at += (size_t)snprintf(buf + at, size - at, " factors");
        else if (p->rope_scaling != PE_ROPE_SCALING_NONE && at < size)
            at += (size_t)snprintf(buf + at, size - at, " %s x%g",
                                   pe_rope_scaling_name(p->rope_scaling), (double)p->rope_factor);
    }
    if (at < size && la->chunk)
        at += (size_t)snprintf(buf + at, size - at, " chunk=%d", la->chunk);
    if (at < size)
        at += (size_t)snprintf(buf + at, size - at, la->window ? " window=%d" : " full", la->window);
    if (la->softcap > 0.0f && at < size)
        at += (size_t)snprintf(buf + at, size - at, " softcap=%g", (double)la->softcap);
    if (la->self_extend_group && at < size)
        at += (size_t)snprintf(buf + at, size - at, " self-extend=%d,%d", la->self_extend_group,
                               la->self_extend_window);
    if (la->temperature_beta > 0.0f && at < size)
        at += (size_t)snprintf(buf + at, size - at, " temperature=%g,%d%s",
                               (double)la->temperature_beta, la->temperature_length,
                               la->temperature_offset ? ",llama4" : "");
    if (la->sinks_off && at < size) snprintf(buf + at, size - at, " sinks=off");
}

int model_layers_run_end(const LayerAttention *table, int n_layers, int l) {
    char line[160], next[160];
    model_layer_describe(&table[l], line, sizeof line);
    int last = l;
    while (last + 1 < n_layers &&
           (model_layer_describe(&table[last + 1], next, sizeof next), !strcmp(next, line)))
        last++;
    return last;
}

void model_layers_describe(const LayerAttention *table, int n_layers, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = '\0';
    for (int l = 0; l < n_layers && at < size;) {
        char line[160];
        model_layer_describe(&table[l], line, sizeof line);
        int last = model_layers_run_end(table, n_layers, l);
        at += (size_t)(last > l ? snprintf(buf + at, size - at, "%s%d-%d: %s", l ? "; " : "", l,
                                           last, line)
                                : snprintf(buf + at, size - at, "%s%d: %s", l ? "; " : "", l, line));
        l = last + 1;
    }
}

int model_layer_override(const Model *m, const PeParams *variant, LayerAttention *table, int l,
                         int scheme, int window, PosencError *err) {
    if (l < 0 || l >= m->config.n_layers)
        return posenc_error(err, "layer %d does not exist (the model has %d: 0..%d)", l,
                            m->config.n_layers, m->config.n_layers - 1);
    if (window >= 0) table[l].window = window;
    if (scheme < 0 || (PeKind)scheme == table[l].pe.kind) return 0;
    const PeOps *ops = pe_kind_ops((PeKind)scheme);
    if (!ops) return posenc_error(err, "unknown positional scheme %d", scheme);
    if (ops->embed)
        return posenc_error(err, "%s adds position to the embedding, once for the model: it "
                                 "cannot be one layer's scheme", ops->name);
    PeKind k = (PeKind)scheme;
    PeParams p = variant->kind == k ? *variant : m->pe.kind == k ? m->pe : pe_params_default(k);
    if (k == PE_ROPE && variant->kind != k && m->pe.kind != k)
        p.rope_pairing = m->config.family.pairing;
    table[l].pe = p;
    return 0;
}

int model_layer_chunk(const Model *m, LayerAttention *table, int l, int chunk, PosencError *err) {
    if (l < 0 || l >= m->config.n_layers)
        return posenc_error(err, "layer %d does not exist (the model has %d: 0..%d)", l,
                            m->config.n_layers, m->config.n_layers - 1);
    if (chunk < 0) return posenc_error(err, "a chunk of %d positions", chunk);
    table[l].chunk = chunk;
    return 0;
}

int model_layers_self_extend(const Model *m, LayerAttention *table, int group, int window,
                             PosencError *err) {
    if (group < 1 || window < 1)
        return posenc_error(err, "Self-Extend needs a group and a window of at least 1 (got %d, %d)",
                            group, window);
    int rotating = 0;
    for (int l = 0; l < m->config.n_layers; l++) {
        if (!pe_kind_ops(table[l].pe.kind)->rotate) continue;
        table[l].self_extend_group = group;
        table[l].self_extend_window = window;
        rotating++;
    }
    if (!rotating)
        return posenc_error(err, "Self-Extend groups rotary positions and no layer of this model "
                                 "rotates (its layers are %s)", pe_kind_name(table[0].pe.kind));
    return 0;
}

int model_layers_temperature(const Model *m, LayerAttention *table, float beta, int length,
                             int llama4, PosencError *err) {
    if (!(beta > 0.0f) || length < 1)
        return posenc_error(err, "the attention temperature needs beta > 0 and a length >= 1 "
                                 "(got %g, %d)", (double)beta, length);
    int scaled = 0;
    for (int l = 0; l < m->config.n_layers; l++) {
        if (llama4 && table[l].pe.kind != PE_NONE) continue; /* Llama 4 scales its NoPE layers */
        table[l].temperature_beta = beta;
        table[l].temperature_length = length;
        table[l].temperature_offset = llama4;
        scaled++;
    }
    if (!scaled)
        return posenc_error(err, "Llama 4's attention temperature acts on the layers without "
                                 "position and every layer of this model has one");
    return 0;
}

int model_layers_sinks_off(const Model *m, LayerAttention *table, PosencError *err) {
    if (!m->config.family.attn_sinks)
        return posenc_error(err, "the model has no learned attention sinks (architecture %s)",
                            m->config.family.name);
    for (int l = 0; l < m->config.n_layers; l++) table[l].sinks_off = 1;
    return 0;
}

void model_free(Model *m) {
    free(m->layers);
    free(m->weights.layers);
    free(m->owned);
    free(m->packed);
    mapped_file_close(&m->file);
    if (m->gguf) gguf_close(m->gguf);
    free(m->gguf);
    memset(m, 0, sizeof *m);
}

int model_build_scheme(const Model *m, const PeParams *p, PositionalEncoding *pe, PosencError *err) {
    const ModelConfig *c = &m->config;
    return pe_build(pe, p, c->dim, c->n_heads, model_head_size(c), c->seq_len,
                    &m->weights.positional, err);
}

int model_check_scheme(const Model *m, const PeParams *p, PosencError *err) {
    PositionalEncoding pe;
    if (model_build_scheme(m, p, &pe, err)) return -1;
    pe_free(&pe);
    return 0;
}
