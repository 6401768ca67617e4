#include "fuzz/model_run.h"

#include <omp.h>

#include "fuzz/fuzz.h"
#include "model/context.h"

void fuzz_forward_one(const Model *m, unsigned token) {
    omp_set_num_threads(1); /* the same work on one thread, and reproducible */
    Context ctx;
    PosencError err = {{0}};
    ContextSize size = context_size_generate(2, TENSOR_F32);
    if (context_build_sized(&ctx, m, &m->pe, &size, &err)) {
        fuzz_check_error(&err);
        return;
    }
    int tok = (int)(token % (unsigned)m->config.vocab_size);
    if (context_check_chunk(&ctx, &tok, 1, 0, &err)) {
        fuzz_check_error(&err);
    } else {
        const float *logits = context_forward(&ctx, &tok, 1, 0, 0);
        if (context_check_logits(&ctx, logits, 1, 0, &err)) fuzz_check_error(&err);
    }
    context_free(&ctx);
}
