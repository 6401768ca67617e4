#include "positional/pe.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[PE_COUNT] = {
    [PE_NONE] = "none", [PE_SINUSOIDAL] = "sinusoidal", [PE_LEARNED] = "learned",
    [PE_ROPE] = "rope", [PE_ALIBI] = "alibi",
};

static const char *const scaling_names[] = {
    [PE_ROPE_SCALING_NONE] = "none", [PE_ROPE_SCALING_LINEAR] = "linear",
    [PE_ROPE_SCALING_NTK] = "ntk", [PE_ROPE_SCALING_YARN] = "yarn",
};

PeParams pe_params_default(PeKind kind) {
    PeParams p = {0};
    p.kind = kind;
    p.rope_theta = 10000.0f;
    p.rope_pairing = PE_ROPE_INTERLEAVED;
    p.rope_scaling = PE_ROPE_SCALING_NONE;
    p.rope_factor = 1.0f;
    p.alibi_max_bias = 8.0f;
    p.learned_overflow = PE_OVERFLOW_ERROR;
    return p;
}

const char *pe_kind_name(PeKind kind) {
    return (unsigned)kind < PE_COUNT ? kind_names[kind] : "?";
}

int pe_kind_from_name(const char *name, PeKind *out) {
    for (int k = 0; k < PE_COUNT; k++) {
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (PeKind)k;
            return 0;
        }
    }
    return -1;
}

const char *pe_rope_scaling_name(PeRopeScaling s) {
    return (unsigned)s <= PE_ROPE_SCALING_YARN ? scaling_names[s] : "?";
}

int pe_rope_scaling_from_name(const char *name, PeRopeScaling *out) {
    for (int s = 0; s <= PE_ROPE_SCALING_YARN; s++) {
        if (strcmp(name, scaling_names[s]) == 0) {
            *out = (PeRopeScaling)s;
            return 0;
        }
    }
    return -1;
}

const PeOps *pe_ops(const PositionalEncoding *pe) {
    switch (pe->params.kind) {
    case PE_SINUSOIDAL: return &pe_sinusoidal_ops;
    case PE_LEARNED:    return &pe_learned_ops;
    case PE_ROPE:       return &pe_rope_ops;
    case PE_ALIBI:      return &pe_alibi_ops;
    default:            return &pe_none_ops;
    }
}

int pe_is_relative(PeKind kind) {
    return kind == PE_ROPE || kind == PE_ALIBI || kind == PE_NONE;
}

int pe_position_limit(const PositionalEncoding *pe) {
    if (pe->params.kind == PE_LEARNED && pe->params.learned_overflow == PE_OVERFLOW_ERROR)
        return pe->table_len;
    return INT_MAX;
}

int pe_build_rope(PositionalEncoding *pe, int trained_ctx, PosencError *err);

int pe_build(PositionalEncoding *pe, const PeParams *params, int dim, int n_heads,
             int head_size, int trained_ctx, const float *table, int table_len,
             PosencError *err) {
    memset(pe, 0, sizeof *pe);
    pe->params = *params;
    pe->dim = dim;
    pe->n_heads = n_heads;
    pe->head_size = head_size;
    pe->attn_scale = 1.0f;
    switch (params->kind) {
    case PE_LEARNED:
        if (!table || table_len <= 0)
            return posenc_error(err, "learned positions need a position embedding table "
                                     "(position_embd.weight) and this checkpoint has none");
        pe->table = table;
        pe->table_len = table_len;
        return 0;
    case PE_ALIBI:
        if (!(params->alibi_max_bias > 0.0f))
            return posenc_error(err, "the ALiBi max bias must be > 0 (got %g)",
                                (double)params->alibi_max_bias);
        pe->slopes = mallocCheck((size_t)n_heads * sizeof(float), "the ALiBi slopes");
        pe_alibi_slopes(pe->slopes, n_heads, params->alibi_max_bias);
        return 0;
    case PE_ROPE:
        return pe_build_rope(pe, trained_ctx, err);
    default:
        return 0;
    }
}

void pe_free(PositionalEncoding *pe) {
    free(pe->inv_freq);
    free(pe->slopes);
    pe->inv_freq = NULL;
    pe->slopes = NULL;
}

const PeOps pe_none_ops = {"none", NULL, NULL, NULL};
