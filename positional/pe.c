#include "positional/pe.h"

#include <limits.h>
#include <string.h>

/* The registry: one line per scheme. */
static const PeOps *const schemes[PE_COUNT] = {
    [PE_NONE] = &pe_none_ops,
    [PE_SINUSOIDAL] = &pe_sinusoidal_ops,
    [PE_LEARNED] = &pe_learned_ops,
    [PE_ROPE] = &pe_rope_ops,
    [PE_ALIBI] = &pe_alibi_ops,
    [PE_T5] = &pe_t5_ops,
};

static const char *const scaling_names[PE_ROPE_SCALING_COUNT] = {
    [PE_ROPE_SCALING_NONE] = "none", [PE_ROPE_SCALING_LINEAR] = "linear",
    [PE_ROPE_SCALING_NTK] = "ntk", [PE_ROPE_SCALING_YARN] = "yarn",
    [PE_ROPE_SCALING_YARN_PAPER] = "yarn-paper", [PE_ROPE_SCALING_LLAMA3] = "llama3",
    [PE_ROPE_SCALING_LONGROPE] = "longrope", [PE_ROPE_SCALING_DYNAMIC] = "dynamic",
    [PE_ROPE_SCALING_FACTORS] = "factors",
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
    p.t5_buckets = -1;
    p.t5_max_distance = 128;
    return p;
}

const PeOps *pe_kind_ops(PeKind kind) {
    return (unsigned)kind < PE_COUNT ? schemes[kind] : NULL;
}

const PeOps *pe_ops(const PositionalEncoding *pe) { return schemes[pe->params.kind]; }

const char *pe_kind_name(PeKind kind) {
    const PeOps *ops = pe_kind_ops(kind);
    return ops ? ops->name : "?";
}

int pe_kind_from_name(const char *name, PeKind *out) {
    for (int k = 0; k < PE_COUNT; k++) {
        if (strcmp(name, schemes[k]->name) == 0) {
            *out = (PeKind)k;
            return 0;
        }
    }
    return -1;
}

void pe_kind_names(char *buf, size_t size, const char *separator) {
    buf[0] = '\0';
    for (int k = 0, at = 0; k < PE_COUNT && (size_t)at < size; k++)
        at += snprintf(buf + at, size - (size_t)at, "%s%s", k ? separator : "", schemes[k]->name);
}

const char *pe_rope_scaling_name(PeRopeScaling s) {
    return (unsigned)s < PE_ROPE_SCALING_COUNT ? scaling_names[s] : "?";
}

void pe_rope_scaling_names(char *buf, size_t size, const char *separator) {
    buf[0] = '\0';
    for (int s = 0, at = 0; s < PE_ROPE_SCALING_COUNT && (size_t)at < size; s++)
        at += snprintf(buf + at, size - (size_t)at, "%s%s", s ? separator : "", scaling_names[s]);
}

int pe_rope_scaling_from_name(const char *name, PeRopeScaling *out) {
    for (int s = 0; s < PE_ROPE_SCALING_COUNT; s++) {
        if (strcmp(name, scaling_names[s]) == 0) {
            *out = (PeRopeScaling)s;
            return 0;
        }
    }
    return -1;
}

int pe_is_relative(PeKind kind) {
    const PeOps *ops = pe_kind_ops(kind);
    return ops && ops->relative;
}

const char *pe_shift_action_name(PeShiftAction action) {
    switch (action) {
    case PE_SHIFT_REROTATE:  return "keys re-rotated";
    case PE_SHIFT_POSITIONS: return "positions updated";
    case PE_SHIFT_RECOMPUTE: break;
    }
    return "recomputed";
}

PeShiftAction pe_shift_action(const PositionalEncoding *pe) {
    const PeOps *ops = pe_ops(pe);
    return ops->shift_for ? ops->shift_for(pe) : ops->shift;
}

void pe_prepare(PositionalEncoding *pe, int last_pos, int n_ctx) {
    const PeOps *ops = pe_ops(pe);
    if (ops->prepare) ops->prepare(pe, last_pos, n_ctx);
}

PeCoverage pe_coverage_trained(int trained_ctx, const char *past) {
    PeCoverage c = {.positions = trained_ctx, .past = past};
    snprintf(c.range, sizeof c.range, "the trained context %d", trained_ctx);
    return c;
}

static PeCoverage coverage(const PeParams *p, int trained_ctx, int table_len) {
    const PeOps *ops = schemes[p->kind];
    return ops->coverage ? ops->coverage(p, trained_ctx, table_len)
                         : pe_coverage_trained(trained_ctx, "the scheme extrapolates");
}

int pe_position_limit(const PositionalEncoding *pe) {
    PeCoverage c = coverage(&pe->params, pe->trained_ctx, pe->tables.n_positions);
    if (!c.bounded || pe->params.learned_overflow != PE_OVERFLOW_ERROR) return INT_MAX;
    return c.positions < INT_MAX ? (int)c.positions : INT_MAX;
}

PeRange pe_position_range(const PeParams *p, int trained_ctx, int table_len, int last_pos) {
    PeCoverage c = coverage(p, trained_ctx, table_len);
    PeRange r = {PE_RANGE_TRAINED, ""};
    if (last_pos < c.positions) return r;
    if (!c.bounded) {
        r.verdict = PE_RANGE_EXTRAPOLATES;
        snprintf(r.fact, sizeof r.fact, "positions up to %d exceed %s; %s", last_pos, c.range,
                 c.past);
    } else if (p->learned_overflow == PE_OVERFLOW_ERROR) {
        r.verdict = PE_RANGE_REFUSED;
        snprintf(r.fact, sizeof r.fact, "position %d is past %s", last_pos, c.range);
    } else {
        r.verdict = PE_RANGE_CLAMPED;
        snprintf(r.fact, sizeof r.fact, "positions past %.0f %s", c.positions - 1, c.past);
    }
    return r;
}

int pe_build(PositionalEncoding *pe, const PeParams *params, int dim, int n_heads,
             int head_size, int trained_ctx, const PeTables *tables, PosencError *err) {
    memset(pe, 0, sizeof *pe);
    const PeOps *ops = pe_kind_ops(params->kind);
    if (!ops) return posenc_error(err, "unknown positional scheme %d", (int)params->kind);
    pe->params = *params;
    pe->dim = dim;
    pe->n_heads = n_heads;
    pe->head_size = head_size;
    pe->trained_ctx = trained_ctx;
    if (tables) pe->tables = *tables;
    pe->rope_mscale = 1.0f;
    return ops->build ? ops->build(pe, err) : 0;
}

void pe_free(PositionalEncoding *pe) {
    const PeOps *ops = pe_ops(pe);
    if (ops->free) ops->free(pe);
}
