/* ALiBi (Press et al.): no position in the embeddings; each head h adds
 * -slope_h * (pos_q - pos_k) to its attention scores.  The cells' position
 * numbers are all it reads, so a context shift only updates them. */
#include <math.h>
#include <stdlib.h>

#include "positional/pe.h"

/* Slopes are a geometric sequence over the largest power of two n2 <= n
 * heads; the remaining heads take every other slope of the 2*n2 sequence,
 * as in the reference implementation (and llama.cpp's max_bias form). */
void pe_alibi_slopes(float *slopes, int n_heads, float max_bias) {
    int n2 = 1;
    while (n2 * 2 <= n_heads) n2 *= 2;
    double m0 = pow(2.0, -(double)max_bias / n2);
    double m1 = pow(2.0, -(double)max_bias / 2.0 / n2);
    for (int h = 0; h < n_heads; h++)
        slopes[h] = (float)(h < n2 ? pow(m0, h + 1) : pow(m1, 2 * (h - n2) + 1));
}

static int alibi_build(PositionalEncoding *pe, PosencError *err) {
    float max_bias = pe->params.alibi_max_bias;
    if (!(max_bias > 0.0f))
        return posenc_error(err, "the ALiBi max bias must be > 0 (got %g)", (double)max_bias);
    pe->slopes = malloc_or_exit((size_t)pe->n_heads * sizeof(float), "the ALiBi slopes");
    pe_alibi_slopes(pe->slopes, pe->n_heads, max_bias);
    return 0;
}

static void alibi_free(PositionalEncoding *pe) {
    free(pe->slopes);
    pe->slopes = NULL;
}

static void alibi_bias(const PositionalEncoding *pe, int head, int pos_q, const int *pos_k,
                       float *scores, int n) {
    float slope = pe->slopes[head];
    for (int i = 0; i < n; i++) scores[i] -= slope * (float)(pos_q - pos_k[i]);
}

static int alibi_describe(const PeParams *p, int head_size, int trained_ctx,
                          const PeTables *tables, PeField *out) {
    out[0] = (PeField){.key = "alibi_max_bias", .number = p->alibi_max_bias};
    return 1;
}

const PeOps pe_alibi_ops = {
    .name = "alibi",
    .bias = alibi_bias,
    .build = alibi_build,
    .free = alibi_free,
    .shift = PE_SHIFT_POSITIONS,
    .relative = 1,
    .describe = alibi_describe,
};
