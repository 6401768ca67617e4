#include "model/model.h"

#include <stdlib.h>
#include <string.h>

/* Bounds well above any model this engine targets; they exist so that a
 * corrupt header fails here instead of in a multi-terabyte malloc. */
#define MAX_DIM (1 << 16)
#define MAX_HIDDEN (1 << 18)
#define MAX_LAYERS 1024
#define MAX_VOCAB (1 << 22)
#define MAX_SEQ (1 << 22)

int model_kv_dim(const ModelConfig *c) { return c->head_size * c->n_kv_heads; }
int model_q_dim(const ModelConfig *c) { return c->head_size * c->n_heads; }
int model_head_size(const ModelConfig *c) { return c->head_size; }

static int check_range(const char *path, const char *what, long v, long max, PosencError *err) {
    if (v <= 0 || v > max)
        return posenc_error(err, "%s: %s = %ld is out of range (1..%ld)", path, what, v, max);
    return 0;
}

int model_config_validate(const ModelConfig *c, const char *path, PosencError *err) {
    if (check_range(path, "dim", c->dim, MAX_DIM, err) ||
        check_range(path, "hidden_dim", c->hidden_dim, MAX_HIDDEN, err) ||
        check_range(path, "n_layers", c->n_layers, MAX_LAYERS, err) ||
        check_range(path, "n_heads", c->n_heads, c->dim, err) ||
        check_range(path, "n_kv_heads", c->n_kv_heads, c->n_heads, err) ||
        check_range(path, "head_size", c->head_size, MAX_DIM / c->n_heads, err) ||
        check_range(path, "vocab_size", c->vocab_size, MAX_VOCAB, err) ||
        check_range(path, "seq_len", c->seq_len, MAX_SEQ, err))
        return -1;
    if (c->n_heads % c->n_kv_heads != 0)
        return posenc_error(err, "%s: n_heads %d is not a multiple of n_kv_heads %d", path,
                            c->n_heads, c->n_kv_heads);
    if (!(c->norm_eps > 0.0f && c->norm_eps < 1.0f))
        return posenc_error(err, "%s: norm epsilon %g is out of range", path, (double)c->norm_eps);
    return 0;
}

int model_load(Model *m, const char *path, PosencError *err) {
    memset(m, 0, sizeof *m);
    MappedFile probe;
    if (mapped_file_open(&probe, path, err)) return -1;
    int is_gguf = probe.size >= 4 && memcmp(probe.data, "GGUF", 4) == 0;
    mapped_file_close(&probe);
    return is_gguf ? model_load_gguf(m, path, err) : model_load_llama2c(m, path, err);
}

void model_free(Model *m) {
    free(m->weights.layers);
    free(m->owned);
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
