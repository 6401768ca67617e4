/* Sinusoidal absolute positions (Vaswani et al.), interleaved layout:
 * PE[2i] = sin(pos / 10000^(2i/dim)), PE[2i+1] = cos(same angle).
 * The position is added to the residual stream, so it is inside every
 * layer's hidden state: a context shift recomputes the moved tokens. */
#include <math.h>

#include "positional/pe.h"

float pe_sinusoid(int pos, int i, int dim) {
    /* double: the angle reaches pos (thousands of radians) and float would
     * lose the low bits that the high-frequency dims depend on. */
    double angle = (double)pos / pow(10000.0, (double)(i & ~1) / (double)dim);
    return (float)((i & 1) ? cos(angle) : sin(angle));
}

static void sinusoidal_embed(const PositionalEncoding *pe, float *x, int pos) {
    for (int i = 0; i < pe->dim; i++) x[i] += pe_sinusoid(pos, i, pe->dim);
}

const PeOps pe_sinusoidal_ops = {
    .name = "sinusoidal",
    .embed = sinusoidal_embed,
    .shift = PE_SHIFT_RECOMPUTE,
};
