#include "model/shift.h"

#include <stdlib.h>
#include <string.h>

/* Moves the keys of cell c by delta positions through each rotating
 * layer's rerotate hook, with that layer's theta and factors, through the
 * forward pass's k scratch (an f16 cache: each move adds one f16 rounding,
 * as writing it did; an f32 one keeps every bit the hook gives).  A layer
 * without rotation keeps its keys: the cell's position, updated, is all it
 * has.  Self-Extend's grouped key moves from floor(old / G) to
 * floor(new / G), new being the cell's position, already updated. */
static void rerotate_cell(Context *ctx, int c, int delta) {
    KVCache *kv = &ctx->cache;
    int n_kv_heads = ctx->model->config.n_kv_heads, now = kv->pos[c];
    float *k = ctx->state.k;
    for (int l = 0; l < kv->n_layers; l++) {
        const ContextLayer *cl = &ctx->layers[l];
        const PositionalEncoding *pe = &cl->pe;
        if (pe->params.kind == PE_NONE || pe_shift_action(pe) != PE_SHIFT_REROTATE) continue;
        kv_cache_load_keys(kv, l, c, 1, k);
        pe_ops(pe)->rerotate(pe, k, n_kv_heads, delta);
        kv_cache_store(kv, l, c, 1, k, NULL);
        int g = cl->self_extend_group;
        if (!g || now / g == (now - delta) / g) continue;
        kv_cache_load_grouped(kv, l, c, 1, k);
        pe_ops(pe)->rerotate(pe, k, n_kv_heads, now / g - (now - delta) / g);
        kv_cache_store_grouped(kv, l, c, 1, k);
    }
}

static void rerotate_keys(Context *ctx, int first, int count, int delta) {
    for (int c = first; c < first + count; c++) rerotate_cell(ctx, c, delta);
}

/* Drops cells [first, n_used) and runs their tokens again at their
 * (already updated) positions. */
static void recompute_cells(Context *ctx, int first) {
    KVCache *kv = &ctx->cache;
    int n = kv->n_used - first, pos = kv->pos[first];
    int *tokens = malloc_or_exit((size_t)n * sizeof(int), "the tokens to recompute");
    memcpy(tokens, kv->token + first, (size_t)n * sizeof(int));
    kv->n_used = first;
    context_prefill(ctx, tokens, n, pos);
    free(tokens);
}

int context_shift_discard(const Context *ctx, int keep) { return (ctx->cache.n_used - keep) / 2; }

int context_shift_check_keep(int n_ctx, int keep, PosencError *err) {
    if (keep >= 0 && keep <= n_ctx - 2) return 0;
    return posenc_error(err, "keeping %d of %d cells leaves fewer than the 2 a context shift needs "
                             "(one to discard, one to move)", keep, n_ctx);
}

const char *context_shift_action(const Context *ctx, ContextShiftMode mode) {
    PeShiftAction action = context_shift_needs(ctx);
    /* The bug leaves positions updated and nothing else: right only where that is all. */
    if (mode == CONTEXT_SHIFT_NO_REROTATE && action != PE_SHIFT_POSITIONS)
        return "stale: keys NOT re-rotated or recomputed";
    return pe_shift_action_name(action);
}

int context_shift(Context *ctx, int keep, int discard, ContextShiftMode mode, PosencError *err) {
    KVCache *kv = &ctx->cache;
    if (keep < 0 || discard <= 0 || keep + discard > kv->n_used)
        return posenc_error(err, "context shift: cannot keep %d and discard %d of %d cells",
                            keep, discard, kv->n_used);
    kv_cache_remove(kv, keep, discard);
    int moved = kv->n_used - keep;
    if (moved == 0 || mode == CONTEXT_SHIFT_NO_REROTATE) return 0;
    switch (context_shift_needs(ctx)) {
    case PE_SHIFT_REROTATE:  rerotate_keys(ctx, keep, moved, -discard); break;
    case PE_SHIFT_RECOMPUTE: recompute_cells(ctx, keep); break;
    case PE_SHIFT_POSITIONS: break; /* kv_cache_remove updated them */
    }
    return 0;
}

/* llama.cpp's llama_kv_cache_seq_add (div 0) and seq_div: the cells whose
 * position p is in [p0, p1) move to p + add, or to p / div, and their
 * delta[] adds the difference, by which the keys turn at the end (c392e50:
 * each cell's delta += new - old, applied as one K-shift). */
static void move_positions(KVCache *kv, int p0, int p1, int add, int div, int *delta) {
    for (int c = 0; c < kv->n_used; c++) {
        int old = kv->pos[c];
        if (old < p0 || old >= p1) continue;
        kv->pos[c] = div ? old / div : old + add;
        delta[c] += kv->pos[c] - old;
    }
}

int group_attention_check(const Context *ctx, int group, int window, PosencError *err) {
    if (group < 1 || window < 1 || window % group)
        return posenc_error(err, "group attention needs a width that is a multiple of the group "
                                 "(got group %d, width %d)", group, window);
    int rotating = 0;
    for (int l = 0; l < ctx->model->config.n_layers; l++)
        rotating |= pe_ops(&ctx->layers[l].pe)->rotate != NULL;
    if (!rotating)
        return posenc_error(err, "group attention moves rotary positions and no layer of this "
                                 "model rotates");
    if (context_shift_needs(ctx) != PE_SHIFT_REROTATE)
        return posenc_error(err, "group attention moves cached keys, and this scheme's keys cannot be "
                                 "moved (its rotation follows the sequence's length, or position "
                                 "is in the hidden states)");
    return 0;
}

int group_attention_compress(Context *ctx, GroupAttention *ga, int next, FILE *trace) {
    KVCache *kv = &ctx->cache;
    int g = ga->group, w = ga->window;
    if (next < ga->grouped + w) return next;
    int *delta = calloc_or_exit((size_t)kv->n_used, sizeof *delta, "the cells' position moves");
    while (next >= ga->grouped + w) {
        int ib = g * ga->grouped / w, bd = w / g * (g - 1), dd = w / g - ib * bd - w;
        /* the W positions grouped now, where the first edit puts them: in
         * round k, k W (the tokens' positions before any grouping) */
        int first = ga->grouped + ib * bd;
        move_positions(kv, ga->grouped, next, ib * bd, 0, delta);
        move_positions(kv, first, first + w, 0, g, delta);
        move_positions(kv, first + w, next + ib * bd, dd, 0, delta);
        next -= bd;
        ga->grouped += w / g;
        if (trace)
            fprintf(trace, "[group] the tokens first at positions %d-%d now at %d-%d (grouped by "
                           "%d); the next token takes position %d\n", first, first + w - 1,
                    first / g, (first + w - 1) / g, g, next);
    }
    for (int c = 0; c < kv->n_used; c++)
        if (delta[c]) rerotate_cell(ctx, c, delta[c]);
    free(delta);
    return next;
}
