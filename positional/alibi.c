/* ALiBi (Press et al.): no position in the embeddings; each head h adds
 * -slope_h * (pos_q - pos_k) to its attention scores. */
#include <math.h>

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

static void alibi_bias(const PositionalEncoding *pe, int head, int pos_q, const int *pos_k,
                       float *scores, int n) {
    float slope = pe->slopes[head];
    for (int i = 0; i < n; i++) scores[i] -= slope * (float)(pos_q - pos_k[i]);
}

const PeOps pe_alibi_ops = {"alibi", NULL, NULL, alibi_bias};
