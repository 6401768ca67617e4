/* Positional encodings behind one interface.
 *
 * A scheme acts on the forward pass through at most three hooks, and
 * implements only the ones it needs:
 *   embed  — adds a position vector to the token embedding  (sinusoidal, learned)
 *   rotate — rotates each head of q and k by its position     (rope)
 *   bias   — adds a position-dependent bias to attention scores (alibi)
 * `none` implements nothing.  Every hook takes positions, never cache slot
 * indices: that is what keeps offsets and context shift correct. */
#ifndef POSENC_PE_H
#define POSENC_PE_H
#include "base/util.h"

typedef enum { PE_NONE, PE_SINUSOIDAL, PE_LEARNED, PE_ROPE, PE_ALIBI, PE_COUNT } PeKind;

/* Which dimensions of a head form a rotation pair. */
typedef enum {
    PE_ROPE_INTERLEAVED, /* (2j, 2j+1): Meta / llama2.c / llama.cpp "normal" */
    PE_ROPE_NEOX,        /* (j, j+d/2): GPT-NeoX / HF rotate_half */
} PeRopePairing;

typedef enum {
    PE_ROPE_SCALING_NONE,
    PE_ROPE_SCALING_LINEAR, /* position interpolation: positions / factor */
    PE_ROPE_SCALING_NTK,    /* NTK-aware: theta * factor^(d/(d-2)) */
    PE_ROPE_SCALING_YARN,   /* NTK-by-parts + attention temperature */
} PeRopeScaling;

/* What happens to a learned position past the end of its table. */
typedef enum { PE_OVERFLOW_ERROR, PE_OVERFLOW_CLAMP } PeOverflow;

/* User-visible parameters: from the checkpoint, then overridden by flags. */
typedef struct {
    PeKind kind;
    float rope_theta;            /* base of the rotation frequencies */
    PeRopePairing rope_pairing;
    int rope_dim;                /* rotated dims per head; 0 = the whole head */
    PeRopeScaling rope_scaling;
    float rope_factor;           /* context extension factor s */
    int rope_orig_ctx;           /* trained context, for yarn; 0 = model's */
    float alibi_max_bias;
    PeOverflow learned_overflow;
} PeParams;

/* A scheme instantiated for one model's shapes. */
typedef struct PositionalEncoding {
    PeParams params;
    int dim;                 /* residual width, for embed */
    int n_heads, head_size;  /* for rotate and bias */
    float *inv_freq;         /* (rope_dim/2) rope frequencies after scaling */
    float attn_scale;        /* multiplies q.k/sqrt(head_size); yarn's temperature */
    float *slopes;           /* (n_heads) alibi slopes */
    const float *table;      /* (table_len, dim) learned positions, borrowed */
    int table_len;
} PositionalEncoding;

typedef struct {
    const char *name;
    /* x: (dim) residual of one token at `pos` */
    void (*embed)(const PositionalEncoding *pe, float *x, int pos);
    /* vec: (n_heads, head_size) q or k of one token at `pos` */
    void (*rotate)(const PositionalEncoding *pe, float *vec, int n_heads, int pos);
    /* scores: (n) of one query of `head` at pos_q against cells at pos_k[] */
    void (*bias)(const PositionalEncoding *pe, int head, int pos_q, const int *pos_k,
                 float *scores, int n);
} PeOps;

extern const PeOps pe_none_ops, pe_sinusoidal_ops, pe_learned_ops, pe_rope_ops, pe_alibi_ops;

/* Defaults: rope interleaved, theta 10000, alibi max bias 8, no scaling. */
PeParams pe_params_default(PeKind kind);

const char *pe_kind_name(PeKind kind);
int pe_kind_from_name(const char *name, PeKind *out);          /* 0 ok, -1 unknown */
const char *pe_rope_scaling_name(PeRopeScaling s);
int pe_rope_scaling_from_name(const char *name, PeRopeScaling *out);

/* Builds the scheme for a model; `table` may be NULL, which `learned`
 * refuses.  Returns 0, or -1 with a one-line reason in err. */
int pe_build(PositionalEncoding *pe, const PeParams *params, int dim, int n_heads,
             int head_size, int trained_ctx, const float *table, int table_len,
             PosencError *err);
void pe_free(PositionalEncoding *pe);

const PeOps *pe_ops(const PositionalEncoding *pe);
/* Largest position the scheme can encode (+1); INT_MAX when unbounded. */
int pe_position_limit(const PositionalEncoding *pe);
/* True for schemes whose logits depend only on position differences. */
int pe_is_relative(PeKind kind);

/* Shared math, exposed for tests and for the rope re-rotation of a cache. */
void pe_alibi_slopes(float *slopes, int n_heads, float max_bias);
float pe_sinusoid(int pos, int i, int dim);
void pe_rope_rotate(const PositionalEncoding *pe, float *vec, int n_heads, int pos);
#endif
