/* Positional encodings behind one interface.
 *
 * A scheme acts on the forward pass through at most three hooks, and
 * implements only the ones it needs:
 *   embed  — adds a position vector to the token embedding  (sinusoidal, learned)
 *   rotate — rotates each head of q and k by its position     (rope)
 *   bias   — adds a position-dependent bias to attention scores (alibi, t5)
 * `none` implements nothing.  Every hook takes positions, never cache slot
 * indices: that is what keeps offsets and context shift correct.
 *
 * Beside its hooks a scheme owns its policy, in the same descriptor
 * (PeOps): what it builds, which positions the model was trained on and
 * whether it can go past them, and what a context shift must do.  Adding a
 * scheme is one file in positional/ defining its PeOps, plus its PeKind and
 * one line in the registry in pe.c. */
#ifndef POSENC_PE_H
#define POSENC_PE_H
#include "base/util.h"

typedef enum { PE_NONE, PE_SINUSOIDAL, PE_LEARNED, PE_ROPE, PE_ALIBI, PE_T5, PE_COUNT } PeKind;

/* Which dimensions of a head form a rotation pair. */
typedef enum {
    PE_ROPE_INTERLEAVED, /* (2j, 2j+1): Meta / llama2.c / llama.cpp "normal" */
    PE_ROPE_NEOX,        /* (j, j+d/2): GPT-NeoX / HF rotate_half */
} PeRopePairing;

/* How the rotation frequencies are scaled past the original context.  The
 * names are Hugging Face's rope_type (modeling_rope_utils.py), whose
 * arithmetic each follows; llama.cpp computes the same where it has them. */
typedef enum {
    PE_ROPE_SCALING_NONE,
    PE_ROPE_SCALING_LINEAR,     /* position interpolation: frequencies / factor */
    PE_ROPE_SCALING_NTK,        /* NTK-aware: theta * factor^(d/(d-2)), fixed */
    PE_ROPE_SCALING_YARN,       /* NTK-by-parts between the correction dims of beta_fast and
                                   beta_slow (floored and ceiled unless yarn_no_truncate), and
                                   the attention factor on cos and sin */
    PE_ROPE_SCALING_YARN_PAPER, /* the YaRN paper's ramp, linear in rotations between 1 and 32
                                   over the original context, with 0.1 ln s + 1 */
    PE_ROPE_SCALING_LLAMA3,     /* Llama 3.1: low frequencies / factor, high ones kept, smoothed
                                   between the original context / low_freq and / high_freq */
    PE_ROPE_SCALING_LONGROPE,   /* Phi-3: each frequency divided by its short or long factor
                                   (PeTables), and the attention factor on cos and sin */
    PE_ROPE_SCALING_DYNAMIC,    /* Hugging Face's dynamic NTK: theta grows with the sequence
                                   once it passes the original context */
    PE_ROPE_SCALING_FACTORS,    /* each frequency divided by its factor in the file's
                                   rope_freqs table (how llama.cpp stores llama3's) */
    PE_ROPE_SCALING_COUNT
} PeRopeScaling;

/* LongRoPE's choice of factors: Hugging Face's, per forward pass by the
 * sequence's length (last position + 1), or llama.cpp's, once by the
 * context the run was given. */
typedef enum { PE_LONGROPE_BY_SEQUENCE, PE_LONGROPE_BY_CONTEXT } PeLongropeRule;

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
    int rope_orig_ctx;           /* the context before scaling; 0 = the model's trained one */
    float rope_attn_factor;      /* yarn, longrope: cos and sin are multiplied by it; 0 = the
                                    method's default (yarn 0.1 ln s + 1, longrope
                                    sqrt(1 + ln s / ln orig)) */
    float yarn_beta_fast;        /* yarn's correction range in rotations; 0 = 32 */
    float yarn_beta_slow;        /* 0 = 1 */
    int yarn_no_truncate;        /* the correction dims unrounded (gpt-oss) */
    float llama3_low_freq;       /* llama3's low and high frequency factors; 0 = 1 and 4 */
    float llama3_high_freq;
    PeLongropeRule longrope_rule;
    float alibi_max_bias;
    PeOverflow learned_overflow;
    int t5_buckets;              /* relative-bias buckets; -1 = the table's row count */
    int t5_max_distance;         /* distances from here on share the last bucket */
    int t5_bidirectional;        /* an encoder's buckets (both directions): refused */
} PeParams;

/* The tables a checkpoint may carry for positional schemes, f32, borrowed
 * from the model (NULL when absent).  Any scheme can be run on any
 * checkpoint, so the model hands over every table it has and a scheme
 * refuses to build without the one it needs. */
typedef struct {
    const float *positions;     /* (n_positions, dim) learned absolute positions */
    int n_positions;
    const float *relative_bias; /* (n_buckets, n_heads) t5: one bias per distance bucket */
    int n_buckets;
    const float *rope_freqs;    /* (n_rope_factors) llama.cpp's rope_freqs: divisors of the
                                   frequencies (rope scaling "factors") */
    const float *rope_long, *rope_short; /* (n_rope_factors) LongRoPE's divisors */
    int n_rope_factors;         /* rotation pairs the factor tables cover */
} PeTables;

/* A scheme instantiated for one model's shapes. */
typedef struct PositionalEncoding {
    PeParams params;
    int dim;                 /* residual width, for embed */
    int n_heads, head_size;  /* for rotate and bias */
    int trained_ctx;         /* the model's trained context length */
    float *inv_freq;         /* (rope_dim/2) rope frequencies after scaling */
    float rope_mscale;       /* cos and sin are multiplied by it (yarn's and longrope's
                                attention factor): the rotated dims' part of q.k by its square */
    int rope_seq_len;        /* dynamic: the longest sequence inv_freq was grown for;
                                longrope by sequence: whether inv_freq holds the long factors */
    float *slopes;           /* (n_heads) alibi slopes */
    PeTables tables;         /* the checkpoint's, borrowed */
    int *t5_bucket;          /* (t5_max_distance) bucket of each distance q - k below it */
} PositionalEncoding;

/* What a context shift must do to the cells it moves down by d positions,
 * given where the scheme keeps position.  Recomputing is right for every
 * scheme, so it is the zero value: the others are shortcuts a scheme
 * declares. */
typedef enum {
    PE_SHIFT_RECOMPUTE, /* position is inside the hidden states: run the moved tokens again */
    PE_SHIFT_REROTATE,  /* position is in the cached keys: the rerotate hook moves each by -d */
    PE_SHIFT_POSITIONS, /* position is only the cell's number: updating it is all */
} PeShiftAction;

/* The positions a model was trained on under a scheme, 0..positions-1, and
 * what reading past them means. */
typedef struct {
    double positions; /* e.g. the trained context; scaled rope: factor x original context */
    int bounded;      /* 1: nothing encodes positions past them (a table), so the overflow
                         policy refuses them or clamps them to the last one */
    char range[96];   /* names them: "the trained context 512", "the table of 128 positions" */
    const char *past; /* past them: what extrapolating means ("the scheme extrapolates"),
                         or for a bounded scheme what a clamped position reads */
} PeCoverage;

/* One parameter of a scheme as -m inspect shows it: `text`, or when that
 * is NULL `number` (an integer when `integer` is set). */
typedef struct {
    const char *key;
    const char *text;
    double number;
    int integer;
} PeField;
#define PE_MAX_FIELDS 8

/* A scheme: its name, hooks and policy.  NULL hooks do nothing. */
typedef struct {
    const char *name;
    /* x: (dim) residual of one token at `pos` */
    void (*embed)(const PositionalEncoding *pe, float *x, int pos);
    /* vec: (n_heads, head_size) q or k of one token at `pos` */
    void (*rotate)(const PositionalEncoding *pe, float *vec, int n_heads, int pos);
    /* Before a forward pass whose last position is last_pos, in a context of
     * n_ctx cells: a scheme whose frequencies depend on the sequence's length
     * (Hugging Face's dynamic NTK and LongRoPE) or on the context's (llama.cpp's
     * LongRoPE) updates them.  NULL: nothing to do. */
    void (*prepare)(PositionalEncoding *pe, int last_pos, int n_ctx);
    /* scores: (n) of one query of `head` at pos_q against cells at pos_k[] */
    void (*bias)(const PositionalEncoding *pe, int head, int pos_q, const int *pos_k,
                 float *scores, int n);
    /* Derives the scheme's state from pe->params and the model's shapes
     * (already in pe); 0, or -1 with the reason.  free releases it. */
    int (*build)(PositionalEncoding *pe, PosencError *err);
    void (*free)(PositionalEncoding *pe);
    /* NULL: the trained context, past which the scheme extrapolates. */
    PeCoverage (*coverage)(const PeParams *p, int trained_ctx, int table_len);
    PeShiftAction shift;
    /* NULL: `shift`; else what this instance needs (a rotation that depends
     * on the sequence's length cannot be moved by its delta). */
    PeShiftAction (*shift_for)(const PositionalEncoding *pe);
    /* PE_SHIFT_REROTATE: moves one cached key (n_heads, head_size) from
     * position p to p + delta (a pure rotation: no attention factor). */
    void (*rerotate)(const PositionalEncoding *pe, float *key, int n_heads, int delta);
    int relative; /* logits depend only on position differences */
    /* Its parameters for display, with the defaults they take on a model of
     * this head size, trained context and tables; returns how many
     * (<= PE_MAX_FIELDS).  NULL: none. */
    int (*describe)(const PeParams *p, int head_size, int trained_ctx, const PeTables *tables,
                    PeField *out);
} PeOps;

extern const PeOps pe_none_ops, pe_sinusoidal_ops, pe_learned_ops, pe_rope_ops, pe_alibi_ops,
    pe_t5_ops;

/* Defaults: rope interleaved, theta 10000, alibi max bias 8, no scaling,
 * t5 max distance 128 (T5's, and llama.cpp's fixed value). */
PeParams pe_params_default(PeKind kind);

const char *pe_kind_name(PeKind kind);
int pe_kind_from_name(const char *name, PeKind *out);          /* 0 ok, -1 unknown */
/* Every scheme's name in registry order, e.g. "none|sinusoidal|...", so
 * that messages list a new scheme without an edit. */
void pe_kind_names(char *buf, size_t size, const char *separator);
const char *pe_rope_scaling_name(PeRopeScaling s);
int pe_rope_scaling_from_name(const char *name, PeRopeScaling *out);
/* Every scaling's name, e.g. "none|linear|...", for messages and help. */
void pe_rope_scaling_names(char *buf, size_t size, const char *separator);

/* Builds the scheme for a model with these tables (NULL: none); a scheme
 * whose table is missing refuses.  Returns 0, or -1 with a one-line reason
 * in err. */
int pe_build(PositionalEncoding *pe, const PeParams *params, int dim, int n_heads,
             int head_size, int trained_ctx, const PeTables *tables, PosencError *err);
void pe_free(PositionalEncoding *pe);

/* The registry: the descriptor of a kind, NULL for a value outside PeKind. */
const PeOps *pe_kind_ops(PeKind kind);
const PeOps *pe_ops(const PositionalEncoding *pe);
/* Largest position the scheme can encode (+1); INT_MAX when unbounded. */
int pe_position_limit(const PositionalEncoding *pe);
/* True for schemes whose logits depend only on position differences. */
int pe_is_relative(PeKind kind);
/* "keys re-rotated", "positions updated", "recomputed": for traces. */
const char *pe_shift_action_name(PeShiftAction action);
/* What a context shift must do for this instance. */
PeShiftAction pe_shift_action(const PositionalEncoding *pe);
/* The hook before a forward pass (PeOps.prepare), when the scheme has one. */
void pe_prepare(PositionalEncoding *pe, int last_pos, int n_ctx);

/* Where positions up to last_pos stand for a scheme with these parameters
 * on a model trained on trained_ctx positions, with a position table of
 * table_len rows (0: none).  Past training, `fact` says so in words that
 * name no flag, e.g. "positions up to 519 exceed the trained context 512;
 * the scheme extrapolates". */
typedef enum {
    PE_RANGE_TRAINED,      /* every position is one the model was trained on */
    PE_RANGE_EXTRAPOLATES, /* past them; the scheme goes on: worth a warning */
    PE_RANGE_CLAMPED,      /* past a table whose overflow policy clamps: worth a warning */
    PE_RANGE_REFUSED,      /* past a table whose overflow policy refuses: an error */
} PeRangeVerdict;
typedef struct {
    PeRangeVerdict verdict;
    char fact[256];
} PeRange;
PeRange pe_position_range(const PeParams *p, int trained_ctx, int table_len, int last_pos);

/* The coverage of most schemes: the trained context, and what going past
 * it means (`past`), for PeOps.coverage. */
PeCoverage pe_coverage_trained(int trained_ctx, const char *past);

/* Shared math, exposed for tests. */
void pe_alibi_slopes(float *slopes, int n_heads, float max_bias);
float pe_sinusoid(int pos, int i, int dim);
void pe_rope_rotate(const PositionalEncoding *pe, float *vec, int n_heads, int pos);
/* The same without the attention factor: a pure rotation, as a context
 * shift applies it to cached keys. */
void pe_rope_rerotate(const PositionalEncoding *pe, float *vec, int n_heads, int delta);
/* T5's decoder (unidirectional) bucket of relative_position = pos_k - pos_q:
 * keys ahead of the query fall in bucket 0, distances below n_buckets/2
 * have a bucket each, then log-spaced buckets up to max_distance, and the
 * last bucket from there on. */
int pe_t5_bucket(long long relative_position, int n_buckets, int max_distance);
#endif
