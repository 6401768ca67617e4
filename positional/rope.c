/* Rotary position embedding (Su et al.).  Each pair of dims (a, b) of a head
 * is rotated by the angle pos * inv_freq[j].  Every scaling mode is folded
 * into inv_freq, so a rotation stays a pure function of position and
 * R(p + d) = R(d) R(p) holds: that is what lets a context shift re-rotate
 * cached keys by the delta alone. */
#include <math.h>
#include <stdlib.h>

#include "positional/pe.h"

/* YaRN's ramp bounds (alpha, beta) in rotations over the original context. */
#define YARN_ALPHA 1.0
#define YARN_BETA 32.0

static int rope_check(const PeParams *p, int head_size, int rope_dim, PosencError *err) {
    if (rope_dim <= 0 || rope_dim > head_size || rope_dim % 2 != 0)
        return posenc_error(err, "rotary dims %d must be even and in 2..%d (head size)",
                            rope_dim, head_size);
    if (!(p->rope_theta > 1.0f))
        return posenc_error(err, "the base theta must be > 1 (got %g)", (double)p->rope_theta);
    if (p->rope_scaling != PE_ROPE_SCALING_NONE && !(p->rope_factor >= 1.0f))
        return posenc_error(err, "the scaling factor must be >= 1 (got %g)",
                            (double)p->rope_factor);
    return 0;
}

/* The context the model was trained on, which yarn's ramp and the scaled
 * range start from. */
static int original_context(const PeParams *p, int trained_ctx) {
    return p->rope_orig_ctx > 0 ? p->rope_orig_ctx : trained_ctx;
}

/* NTK-by-parts: dims that rotate many times over the original context keep
 * their frequency, dims that rotate less than once are interpolated, with a
 * linear ramp between. */
static float yarn_inv_freq(float inv_freq, float factor, int orig_ctx) {
    double rotations = (double)orig_ctx * inv_freq / (2.0 * M_PI);
    double ramp = (rotations - YARN_ALPHA) / (YARN_BETA - YARN_ALPHA);
    if (ramp < 0.0) ramp = 0.0;
    if (ramp > 1.0) ramp = 1.0;
    return (float)((1.0 - ramp) * inv_freq / factor + ramp * inv_freq);
}

static int rope_build(PositionalEncoding *pe, PosencError *err) {
    const PeParams *p = &pe->params;
    int rope_dim = p->rope_dim > 0 ? p->rope_dim : pe->head_size;
    if (rope_check(p, pe->head_size, rope_dim, err)) return -1;
    pe->params.rope_dim = rope_dim;

    float theta = p->rope_theta;
    if (p->rope_scaling == PE_ROPE_SCALING_NTK)
        theta *= powf(p->rope_factor, (float)rope_dim / (float)(rope_dim - 2));
    int orig_ctx = original_context(p, pe->trained_ctx);

    int half = rope_dim / 2;
    pe->inv_freq = mallocCheck((size_t)half * sizeof(float), "the RoPE frequencies");
    for (int j = 0; j < half; j++) {
        /* Same float expression as llama2.c, so the native path matches it bit for bit. */
        float f = 1.0f / powf(theta, (float)(2 * j) / (float)rope_dim);
        if (p->rope_scaling == PE_ROPE_SCALING_LINEAR) f /= p->rope_factor;
        if (p->rope_scaling == PE_ROPE_SCALING_YARN) f = yarn_inv_freq(f, p->rope_factor, orig_ctx);
        pe->inv_freq[j] = f;
    }
    if (p->rope_scaling == PE_ROPE_SCALING_YARN) {
        /* sqrt(1/t) = 0.1 ln s + 1 scales both q and k: scores by its square. */
        float m = 0.1f * logf(p->rope_factor) + 1.0f;
        pe->attn_scale = m * m;
    }
    return 0;
}

/* The angles of ROPE_BLOCK pairs are taken at once, then each head is
 * rotated by them in turn: with the heads innermost, a head's pair was
 * read at a stride of the head's size and nothing vectorized.  Each
 * element's arithmetic is the same in either order. */
#define ROPE_BLOCK 64
void pe_rope_rotate(const PositionalEncoding *pe, float *vec, int n_heads, int pos) {
    int half = pe->params.rope_dim / 2;
    int hs = pe->head_size;
    /* With NeoX pairing dim j pairs with j + half; interleaved pairs 2j, 2j+1. */
    int neox = pe->params.rope_pairing == PE_ROPE_NEOX;
    for (int j0 = 0; j0 < half; j0 += ROPE_BLOCK) {
        int nj = half - j0 < ROPE_BLOCK ? half - j0 : ROPE_BLOCK;
        float c[ROPE_BLOCK], s[ROPE_BLOCK];
        for (int j = 0; j < nj; j++) {
            float angle = (float)pos * pe->inv_freq[j0 + j];
            c[j] = cosf(angle);
            s[j] = sinf(angle);
        }
        for (int h = 0; h < n_heads; h++) {
            float *v = vec + (size_t)h * hs;
            if (neox) {
                float *va = v + j0, *vb = v + j0 + half;
                for (int j = 0; j < nj; j++) {
                    float v0 = va[j], v1 = vb[j];
                    va[j] = v0 * c[j] - v1 * s[j];
                    vb[j] = v0 * s[j] + v1 * c[j];
                }
            } else {
                float *vp = v + 2 * j0;
                for (int j = 0; j < nj; j++) {
                    float v0 = vp[2 * j], v1 = vp[2 * j + 1];
                    vp[2 * j] = v0 * c[j] - v1 * s[j];
                    vp[2 * j + 1] = v0 * s[j] + v1 * c[j];
                }
            }
        }
    }
}

static void rope_free(PositionalEncoding *pe) {
    free(pe->inv_freq);
    pe->inv_freq = NULL;
}

/* Scaling stretches the trained context by its factor: positions inside
 * the stretched range are ones the scaled model is meant to read. */
static PeCoverage rope_coverage(const PeParams *p, int trained_ctx, int table_len) {
    if (p->rope_scaling == PE_ROPE_SCALING_NONE)
        return pe_coverage_trained(trained_ctx, "the scheme extrapolates");
    int orig = original_context(p, trained_ctx);
    PeCoverage c = {.positions = (double)p->rope_factor * orig, .past = "it extrapolates"};
    snprintf(c.range, sizeof c.range, "the scaled range %g x %d = %.0f", (double)p->rope_factor,
             orig, c.positions);
    return c;
}

static int rope_describe(const PeParams *p, int head_size, int trained_ctx,
                         const PeTables *tables, PeField *out) {
    int n = 0;
    out[n++] = (PeField){.key = "rope_theta", .number = p->rope_theta};
    out[n++] = (PeField){.key = "rope_pairing",
                         .text = p->rope_pairing == PE_ROPE_NEOX ? "neox" : "interleaved"};
    out[n++] = (PeField){.key = "rope_dim", .number = p->rope_dim ? p->rope_dim : head_size,
                         .integer = 1};
    out[n++] = (PeField){.key = "rope_scaling", .text = pe_rope_scaling_name(p->rope_scaling)};
    if (p->rope_scaling != PE_ROPE_SCALING_NONE) {
        out[n++] = (PeField){.key = "rope_factor", .number = p->rope_factor};
        out[n++] = (PeField){.key = "rope_orig_ctx", .number = original_context(p, trained_ctx),
                             .integer = 1};
    }
    return n;
}

/* Keys are cached rotated, and R(p + delta) = R(delta) R(p): a shift
 * rotates each moved key by its delta. */
const PeOps pe_rope_ops = {
    .name = "rope",
    .rotate = pe_rope_rotate,
    .build = rope_build,
    .free = rope_free,
    .coverage = rope_coverage,
    .shift = PE_SHIFT_REROTATE,
    .rerotate = pe_rope_rotate,
    .relative = 1,
    .describe = rope_describe,
};
