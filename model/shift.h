/* Context shift: when the cache is full, keep the first `keep` cells
 * (attention sinks), discard the next `discard`, move the rest down, and
 * make the moved cells agree with their new positions — as the scheme
 * declares (PeOps.shift in positional/pe.h, the reasons beside each
 * scheme):
 *   re-rotate   keys were cached rotated: the scheme's rerotate hook moves
 *               them by -discard (rope: R(p - d) = R(-d) R(p));
 *   positions   the cells' positions are all the scheme reads (alibi);
 *   recompute   position is inside the hidden states (sinusoidal, learned,
 *               and none, whose states infer it from the causal mask): the
 *               moved tokens run again at their new positions. */
#ifndef POSENC_SHIFT_H
#define POSENC_SHIFT_H
#include <stdio.h>

#include "model/context.h"

typedef enum {
    CONTEXT_SHIFT_ON,          /* shift when full (default) */
    CONTEXT_SHIFT_OFF,         /* stop at the end of the context */
    CONTEXT_SHIFT_NO_REROTATE, /* the classic bug, for demonstration: positions move, keys don't */
} ContextShiftMode;

/* 0, or -1 + err when keep/discard do not fit the cache. */
int context_shift(Context *ctx, int keep, int discard, ContextShiftMode mode, PosencError *err);

/* What a shift does to the moved cells under this scheme, for traces. */
const char *context_shift_action(const Context *ctx, ContextShiftMode mode);

/* How a shift at full cache splits it: half of what is not kept, as llama.cpp. */
int context_shift_discard(const Context *ctx, int keep);
/* 0 if shifts that keep `keep` of n_ctx cells can make room: half of the
 * others are discarded, so at least two others must exist (one to discard,
 * one to move).  Checked before any work, not at the first shift. */
int context_shift_check_keep(int n_ctx, int keep, PosencError *err);

/* llama.cpp's group attention ("self-extend" in examples/main, c392e50:
 * --grp-attn-n G --grp-attn-w W), as edits of the cache's positions: once
 * the next position reaches grouped + W, the W positions after the ones
 * already grouped are divided by G (llama_kv_cache_seq_div) and everything
 * after them moved down to follow (seq_add), each moved key re-rotated to
 * its new position; the next token then takes a position W - W/G lower.
 * Every query then reads one position per key, its distance to the grouped
 * keys shrunk by G, to the newest ones exact: unlike Self-Extend
 * (LayerAttention.self_extend_group), which keeps both per pair. */
typedef struct {
    int group, window; /* G, W: a multiple of G */
    int grouped;       /* llama.cpp's ga_i: the positions grouped so far */
} GroupAttention;

/* 0 if group attention with (group, window) can run in this context: W a
 * multiple of G, a rotating layer, keys that a move re-rotates; else -1. */
int group_attention_check(const Context *ctx, int group, int window, PosencError *err);
/* Before a forward call whose first token would take position `next`
 * (llama.cpp's n_past): the edits while next >= grouped + W; returns the
 * position the call's first token takes.  trace: one line per edit, or
 * NULL. */
int group_attention_compress(Context *ctx, GroupAttention *ga, int next, FILE *trace);
#endif
