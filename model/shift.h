/* Context shift: when the cache is full, keep the first `keep` cells
 * (attention sinks), discard the next `discard`, move the rest down, and
 * make the moved cells agree with their new positions — which each scheme
 * needs differently:
 *   rope        keys were cached rotated: rotate them by -discard
 *               (R(p - d) = R(-d) R(p), exact under every scaling mode);
 *   alibi       positions are all it uses: updating them is enough;
 *   sinusoidal, learned: the position is inside every layer's residual
 *               stream, so the moved tokens are recomputed;
 *   none        NoPE has no explicit position, but its hidden states infer
 *               one from the causal mask (how many tokens came before), so
 *               moved cells are as stale as with an absolute scheme and are
 *               recomputed too.  Measured on the zoo's NoPE model streaming
 *               111k characters through 128 cells: NLL 2.94 updating
 *               positions only, 2.08 recomputing, 2.06 in fresh windows. */
#ifndef POSENC_SHIFT_H
#define POSENC_SHIFT_H
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
#endif
