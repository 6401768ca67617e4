/* Rotary position embedding (Su et al.).  Each pair of dims (a, b) of a head
 * is rotated by the angle pos * inv_freq[j], and scaled by the attention
 * factor (1 but for yarn and longrope).  Every scaling mode is folded into
 * inv_freq, so a rotation is a pure function of position and R(p + d) =
 * R(d) R(p) holds: that is what lets a context shift re-rotate cached keys
 * by the delta alone.  The exceptions are the methods whose frequencies
 * follow the sequence's length (dynamic, and longrope by sequence), which
 * Hugging Face updates per forward pass (rope_prepare): their shift
 * recomputes. */
#include <math.h>
#include <stdlib.h>

#include "positional/pe.h"

/* The YaRN paper's ramp bounds (alpha, beta) in rotations over the original
 * context (PE_ROPE_SCALING_YARN_PAPER). */
#define YARN_PAPER_ALPHA 1.0
#define YARN_PAPER_BETA 32.0

static int uses_factor(PeRopeScaling s) {
    return s != PE_ROPE_SCALING_NONE && s != PE_ROPE_SCALING_FACTORS;
}

static int rope_check(const PeParams *p, const PeTables *t, int head_size, int rope_dim,
                      PosencError *err) {
    if (rope_dim <= 0 || rope_dim > head_size || rope_dim % 2 != 0)
        return posenc_error(err, "rotary dims %d must be even and in 2..%d (head size)",
                            rope_dim, head_size);
    if (!(p->rope_theta > 1.0f))
        return posenc_error(err, "the base theta must be > 1 (got %g)", (double)p->rope_theta);
    if (uses_factor(p->rope_scaling) && p->rope_scaling != PE_ROPE_SCALING_LONGROPE &&
        !(p->rope_factor >= 1.0f && p->rope_factor < 1e9f))
        return posenc_error(err, "the scaling factor must be >= 1 (got %g)",
                            (double)p->rope_factor);
    if (!(p->rope_attn_factor >= 0.0f && p->rope_attn_factor < 1e3f) ||
        !(p->yarn_beta_fast >= 0.0f && p->yarn_beta_fast < 1e6f) ||
        !(p->yarn_beta_slow >= 0.0f && p->yarn_beta_slow < 1e6f) ||
        !(p->llama3_low_freq >= 0.0f && p->llama3_high_freq >= 0.0f &&
          p->llama3_high_freq < 1e6f))
        return posenc_error(err, "a scaling parameter is out of range (attention factor %g, "
                                 "beta %g/%g, llama3 frequency factors %g/%g)",
                            (double)p->rope_attn_factor, (double)p->yarn_beta_fast,
                            (double)p->yarn_beta_slow, (double)p->llama3_low_freq,
                            (double)p->llama3_high_freq);
    const float *need[2] = {NULL, NULL};
    const char *what = NULL;
    if (p->rope_scaling == PE_ROPE_SCALING_FACTORS) {
        need[0] = t->rope_freqs;
        what = "the file's rope_freqs table";
    } else if (p->rope_scaling == PE_ROPE_SCALING_LONGROPE) {
        need[0] = t->rope_long;
        need[1] = t->rope_short;
        what = "LongRoPE's long and short factor tables";
    }
    if (what) {
        if (!need[0] || (p->rope_scaling == PE_ROPE_SCALING_LONGROPE && !need[1]))
            return posenc_error(err, "rope scaling %s needs %s, which this model does not have",
                                pe_rope_scaling_name(p->rope_scaling), what);
        if (t->n_rope_factors != rope_dim / 2)
            return posenc_error(err, "%s has %d factors, but the rotation has %d pairs", what,
                                t->n_rope_factors, rope_dim / 2);
        for (int j = 0; j < t->n_rope_factors; j++)
            for (int k = 0; k < 2; k++)
                if (need[k] && !(need[k][j] > 0.0f && need[k][j] < 1e9f))
                    return posenc_error(err, "%s: factor %d is %g, not a positive number", what,
                                        j, (double)need[k][j]);
    }
    return 0;
}

/* The context the model was trained on, which the scaled methods start from. */
static int original_context(const PeParams *p, int trained_ctx) {
    return p->rope_orig_ctx > 0 ? p->rope_orig_ctx : trained_ctx;
}

static double or_default(float v, double fallback) { return v > 0.0f ? v : fallback; }

/* YaRN's correction dim: the pair index at which a frequency turns
 * `rotations` times over the original context. */
static double yarn_correction_dim(double rotations, int dim, double theta, int orig_ctx) {
    return dim * log(orig_ctx / (rotations * 2.0 * M_PI)) / (2.0 * log(theta));
}

/* Hugging Face's and llama.cpp's YaRN: pair j keeps its frequency below the
 * correction dim of beta_fast, is interpolated (/ s) above that of
 * beta_slow, with a ramp linear in j between. */
static void yarn_frequencies(const PeParams *p, int dim, int orig_ctx, float *inv_freq) {
    double theta = p->rope_theta, s = p->rope_factor;
    double low = yarn_correction_dim(or_default(p->yarn_beta_fast, 32.0), dim, theta, orig_ctx);
    double high = yarn_correction_dim(or_default(p->yarn_beta_slow, 1.0), dim, theta, orig_ctx);
    if (!p->yarn_no_truncate) low = floor(low), high = ceil(high);
    if (low < 0.0) low = 0.0;
    if (high > dim - 1) high = dim - 1;
    if (low == high) high += 0.001; /* as the references do: no division by zero */
    for (int j = 0; j < dim / 2; j++) {
        double ramp = (j - low) / (high - low);
        ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
        double f = 1.0 / pow(theta, 2.0 * j / dim);
        inv_freq[j] = (float)(f / s * ramp + f * (1.0 - ramp));
    }
}

/* The paper's ramp: dims that rotate many times over the original context
 * keep their frequency, dims that rotate less than once are interpolated. */
static float yarn_paper_inv_freq(float inv_freq, float factor, int orig_ctx) {
    double rotations = (double)orig_ctx * inv_freq / (2.0 * M_PI);
    double ramp = (rotations - YARN_PAPER_ALPHA) / (YARN_PAPER_BETA - YARN_PAPER_ALPHA);
    if (ramp < 0.0) ramp = 0.0;
    if (ramp > 1.0) ramp = 1.0;
    return (float)((1.0 - ramp) * inv_freq / factor + ramp * inv_freq);
}

/* Llama 3.1: wavelengths longer than orig / low_freq are interpolated,
 * shorter than orig / high_freq kept, and smoothed between. */
static float llama3_inv_freq(const PeParams *p, float inv_freq, int orig_ctx) {
    double low = or_default(p->llama3_low_freq, 1.0), high = or_default(p->llama3_high_freq, 4.0);
    double wavelen = 2.0 * M_PI / inv_freq, s = p->rope_factor;
    if (wavelen < orig_ctx / high) return inv_freq;
    if (wavelen > orig_ctx / low) return (float)(inv_freq / s);
    double smooth = (orig_ctx / wavelen - low) / (high - low);
    return (float)((1.0 - smooth) * inv_freq / s + smooth * inv_freq);
}

/* The attention factor that multiplies cos and sin. */
static float rope_mscale(const PeParams *p, int orig_ctx) {
    if (p->rope_attn_factor > 0.0f) return p->rope_attn_factor;
    double s = p->rope_factor;
    if (s <= 1.0) return 1.0f;
    switch (p->rope_scaling) {
    case PE_ROPE_SCALING_YARN:
    case PE_ROPE_SCALING_YARN_PAPER: return (float)(0.1 * log(s) + 1.0);
    case PE_ROPE_SCALING_LONGROPE: return (float)sqrt(1.0 + log(s) / log((double)orig_ctx));
    default: return 1.0f;
    }
}

/* Fills inv_freq for the scaling; `seq_len` is the sequence the dynamic
 * methods are computed for (dynamic: the longest yet; longrope: 1 past the
 * original context for the long factors). */
static void rope_frequencies(PositionalEncoding *pe, int seq_len) {
    const PeParams *p = &pe->params;
    int rope_dim = p->rope_dim, half = rope_dim / 2, orig_ctx = original_context(p, pe->trained_ctx);
    float theta = p->rope_theta;
    if (p->rope_scaling == PE_ROPE_SCALING_NTK)
        theta *= powf(p->rope_factor, (float)rope_dim / (float)(rope_dim - 2));
    if (p->rope_scaling == PE_ROPE_SCALING_DYNAMIC && seq_len > orig_ctx)
        theta = (float)(theta * pow(p->rope_factor * seq_len / orig_ctx - (p->rope_factor - 1.0),
                                    (double)rope_dim / (rope_dim - 2)));
    if (p->rope_scaling == PE_ROPE_SCALING_YARN) {
        yarn_frequencies(p, rope_dim, orig_ctx, pe->inv_freq);
        return;
    }
    const float *divisors = p->rope_scaling == PE_ROPE_SCALING_FACTORS ? pe->tables.rope_freqs
                            : p->rope_scaling != PE_ROPE_SCALING_LONGROPE ? NULL
                            : seq_len > orig_ctx ? pe->tables.rope_long : pe->tables.rope_short;
    for (int j = 0; j < half; j++) {
        /* Same float expression as llama2.c, so the native path matches it bit for bit. */
        float f = 1.0f / powf(theta, (float)(2 * j) / (float)rope_dim);
        switch (p->rope_scaling) {
        case PE_ROPE_SCALING_LINEAR: f /= p->rope_factor; break;
        case PE_ROPE_SCALING_YARN_PAPER: f = yarn_paper_inv_freq(f, p->rope_factor, orig_ctx); break;
        case PE_ROPE_SCALING_LLAMA3: f = llama3_inv_freq(p, f, orig_ctx); break;
        default: break;
        }
        if (divisors) f /= divisors[j];
        pe->inv_freq[j] = f;
    }
}

static int rope_build(PositionalEncoding *pe, PosencError *err) {
    const PeParams *p = &pe->params;
    int rope_dim = p->rope_dim > 0 ? p->rope_dim : pe->head_size;
    if (rope_check(p, &pe->tables, pe->head_size, rope_dim, err)) return -1;
    pe->params.rope_dim = rope_dim;
    int orig_ctx = original_context(p, pe->trained_ctx);
    pe->inv_freq = malloc_or_exit((size_t)(rope_dim / 2) * sizeof(float), "the RoPE frequencies");
    pe->rope_mscale = rope_mscale(p, orig_ctx);
    /* dynamic starts as Hugging Face's does, at the original context */
    pe->rope_seq_len = p->rope_scaling == PE_ROPE_SCALING_DYNAMIC ? orig_ctx : 0;
    rope_frequencies(pe, pe->rope_seq_len);
    return 0;
}

/* Hugging Face's dynamic NTK grows theta for the longest sequence seen
 * (keys already cached keep their rotation) and returns to the original
 * frequencies for a sequence shorter than the original context; its
 * LongRoPE takes the long factors for a pass whose sequence is longer than
 * the original context, llama.cpp's for a context that is. */
static void rope_prepare(PositionalEncoding *pe, int last_pos, int n_ctx) {
    const PeParams *p = &pe->params;
    int orig_ctx = original_context(p, pe->trained_ctx), seq_len = last_pos + 1;
    if (p->rope_scaling == PE_ROPE_SCALING_DYNAMIC) {
        int want = seq_len > pe->rope_seq_len ? seq_len
                   : seq_len < orig_ctx && pe->rope_seq_len > orig_ctx ? orig_ctx
                   : pe->rope_seq_len;
        if (want == pe->rope_seq_len) return;
        pe->rope_seq_len = want;
        rope_frequencies(pe, want);
    } else if (p->rope_scaling == PE_ROPE_SCALING_LONGROPE) {
        int length = p->longrope_rule == PE_LONGROPE_BY_CONTEXT ? n_ctx : seq_len;
        int want = length > orig_ctx ? orig_ctx + 1 : 0;
        if (want == pe->rope_seq_len) return;
        pe->rope_seq_len = want;
        rope_frequencies(pe, want);
    }
}

/* A rotation that depends on the sequence's length is not a function of
 * position alone: a shifted key is recomputed, not re-rotated. */
static PeShiftAction rope_shift_for(const PositionalEncoding *pe) {
    PeRopeScaling s = pe->params.rope_scaling;
    int by_sequence = s == PE_ROPE_SCALING_DYNAMIC ||
                      (s == PE_ROPE_SCALING_LONGROPE &&
                       pe->params.longrope_rule == PE_LONGROPE_BY_SEQUENCE);
    return by_sequence ? PE_SHIFT_RECOMPUTE : PE_SHIFT_REROTATE;
}

/* The angles of ROPE_BLOCK pairs are taken at once, then each head is
 * rotated by them in turn: with the heads innermost, a head's pair was
 * read at a stride of the head's size and nothing vectorized.  Each
 * element's arithmetic is the same in either order. */
#define ROPE_BLOCK 64
static void rotate(const PositionalEncoding *pe, float *vec, int n_heads, int pos, float mscale) {
    int half = pe->params.rope_dim / 2;
    int hs = pe->head_size;
    /* With NeoX pairing dim j pairs with j + half; interleaved pairs 2j, 2j+1. */
    int neox = pe->params.rope_pairing == PE_ROPE_NEOX;
    for (int j0 = 0; j0 < half; j0 += ROPE_BLOCK) {
        int nj = half - j0 < ROPE_BLOCK ? half - j0 : ROPE_BLOCK;
        float c[ROPE_BLOCK], s[ROPE_BLOCK];
        for (int j = 0; j < nj; j++) {
            float angle = (float)pos * pe->inv_freq[j0 + j];
            c[j] = cosf(angle) * mscale;
            s[j] = sinf(angle) * mscale;
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

void pe_rope_rotate(const PositionalEncoding *pe, float *vec, int n_heads, int pos) {
    rotate(pe, vec, n_heads, pos, pe->rope_mscale);
}

void pe_rope_rerotate(const PositionalEncoding *pe, float *vec, int n_heads, int delta) {
    rotate(pe, vec, n_heads, delta, 1.0f);
}

static void rope_free(PositionalEncoding *pe) {
    free(pe->inv_freq);
    pe->inv_freq = NULL;
}

/* Scaling stretches the trained context by its factor: positions inside
 * the stretched range are ones the scaled model is meant to read. */
static PeCoverage rope_coverage(const PeParams *p, int trained_ctx, int table_len) {
    if (!uses_factor(p->rope_scaling))
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
    if (uses_factor(p->rope_scaling)) {
        out[n++] = (PeField){.key = "rope_factor", .number = p->rope_factor};
        out[n++] = (PeField){.key = "rope_orig_ctx", .number = original_context(p, trained_ctx),
                             .integer = 1};
    }
    if (p->rope_scaling == PE_ROPE_SCALING_YARN && p->yarn_no_truncate)
        out[n++] = (PeField){.key = "rope_yarn_range", .text = "unrounded (truncate: false)"};
    float mscale = rope_mscale(p, original_context(p, trained_ctx));
    if (mscale != 1.0f) out[n++] = (PeField){.key = "rope_attn_factor", .number = mscale};
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
    .prepare = rope_prepare,
    .shift = PE_SHIFT_REROTATE,
    .shift_for = rope_shift_for,
    .rerotate = pe_rope_rerotate,
    .relative = 1,
    .describe = rope_describe,
};
