/* Learned absolute positions: row `pos` of the checkpoint's table is added
 * to the token embedding (GPT-2).  The table is all the model knows: past
 * its end the overflow policy refuses the positions or clamps them to the
 * last row.  Like every absolute scheme, a context shift recomputes. */
#include "positional/pe.h"

static int learned_build(PositionalEncoding *pe, PosencError *err) {
    if (!pe->tables.positions || pe->tables.n_positions <= 0)
        return posenc_error(err, "learned positions need a position embedding table "
                                 "(position_embd.weight) and this checkpoint has none");
    return 0;
}

static void learned_embed(const PositionalEncoding *pe, float *x, int pos) {
    if (pos >= pe->tables.n_positions) pos = pe->tables.n_positions - 1;
    if (pos < 0) pos = 0;
    const float *row = pe->tables.positions + (size_t)pos * (size_t)pe->dim;
    for (int i = 0; i < pe->dim; i++) x[i] += row[i];
}

static PeCoverage learned_coverage(const PeParams *p, int trained_ctx, int table_len) {
    PeCoverage c = {.positions = table_len, .bounded = 1,
                    .past = "reuse the last learned position"};
    snprintf(c.range, sizeof c.range, "the table of %d positions", table_len);
    return c;
}

static int learned_describe(const PeParams *p, int head_size, int trained_ctx,
                            const PeTables *tables, PeField *out) {
    out[0] = (PeField){.key = "learned_overflow",
                       .text = p->learned_overflow == PE_OVERFLOW_CLAMP ? "clamp" : "error"};
    return 1;
}

const PeOps pe_learned_ops = {
    .name = "learned",
    .embed = learned_embed,
    .build = learned_build,
    .coverage = learned_coverage,
    .shift = PE_SHIFT_RECOMPUTE,
    .describe = learned_describe,
};
