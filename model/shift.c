#include "model/shift.h"

#include <stdlib.h>
#include <string.h>

/* Moves the keys of cells [first, first + count) by delta positions
 * through each rotating layer's rerotate hook, with that layer's theta and
 * factors, one cell at a time through the forward pass's k scratch (an f16
 * cache: each shift adds one f16 rounding, as writing it did; an f32 one
 * keeps every bit the hook gives).  A layer without rotation keeps its keys:
 * the cells' positions, updated, are all it has. */
static void rerotate_keys(Context *ctx, int first, int count, int delta) {
    KVCache *kv = &ctx->cache;
    int n_kv_heads = ctx->model->config.n_kv_heads;
    for (int l = 0; l < kv->n_layers; l++) {
        const PositionalEncoding *pe = &ctx->layers[l].pe;
        if (pe->params.kind == PE_NONE || pe_shift_action(pe) != PE_SHIFT_REROTATE) continue;
        for (int c = first; c < first + count; c++) {
            float *k = ctx->state.k;
            kv_cache_load_keys(kv, l, c, 1, k);
            pe_ops(pe)->rerotate(pe, k, n_kv_heads, delta);
            kv_cache_store(kv, l, c, 1, k, NULL);
        }
    }
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
