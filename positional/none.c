/* No positional encoding (NoPE): attention sees content only.  Position is
 * still there, implicitly: the causal mask lets the hidden states infer how
 * many tokens came before.  So cells a context shift moves are as stale as
 * under an absolute scheme and are recomputed.  Measured on the zoo's NoPE
 * model streaming 111k characters through 128 cells: NLL 2.94 updating
 * positions only, 2.08 recomputing, 2.06 in fresh windows. */
#include "positional/pe.h"

/* Past the trained context nothing new is encoded; what is new is the
 * length of the sequence. */
static PeCoverage none_coverage(const PeParams *p, int trained_ctx, int table_len) {
    return pe_coverage_trained(trained_ctx, "the model never saw sequences this long");
}

const PeOps pe_none_ops = {
    .name = "none",
    .coverage = none_coverage,
    .shift = PE_SHIFT_RECOMPUTE,
    .relative = 1,
};
