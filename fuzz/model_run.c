#include "fuzz/model_run.h"

#include <omp.h>

#include "fuzz/fuzz.h"
#include "model/context.h"

/* One token at position 0 in a two-cell context with scheme pe, as
 * generate runs it: context and chunk checked first, the logits after. */
static void forward_with(const Model *m, const PeParams *pe, int token) {
    Context ctx;
    PosencError err = {{0}};
    ContextSize size = context_size_generate(2, TENSOR_F32);
    if (context_build_sized(&ctx, m, pe, &size, &err)) {
        fuzz_check_error(&err);
        return;
    }
    if (context_check_chunk(&ctx, &token, 1, 0, &err)) {
        fuzz_check_error(&err);
    } else {
        const float *logits = context_forward(&ctx, &token, 1, 0, 0);
        if (context_check_logits(&ctx, logits, 1, 0, &err)) fuzz_check_error(&err);
    }
    context_free(&ctx);
}

void fuzz_forward_one(const Model *m, unsigned token) {
    omp_set_num_threads(1); /* the same work on one thread, and reproducible */
    int tok = (int)(token % (unsigned)m->config.vocab_size);
    forward_with(m, &m->pe, tok);
    /* and as `--pe NAME` runs it: another scheme on the checkpoint's
     * parameters, chosen by the input */
    PeParams other = m->pe;
    other.kind = (PeKind)(token % PE_COUNT);
    if (other.kind != m->pe.kind) forward_with(m, &other, tok);
}
