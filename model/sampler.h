/* Picks the next token from logits: repetition penalties first (when set),
 * then greedy at temperature 0, otherwise temperature, then top-k, top-p
 * (nucleus) and min-p truncation.  The random stream is llama2.c's
 * xorshift, so a seed gives the same text as there (penalties and min-p off,
 * their defaults). */
#ifndef POSENC_SAMPLER_H
#define POSENC_SAMPLER_H
#include <stdint.h>

typedef struct {
    float prob;
    int index;
} ProbIndex;

/* Penalties on the tokens of the last `last_n` accepted (llama.cpp's
 * formulas): a token seen c > 0 times has its logit divided by `repeat` when
 * positive, multiplied by it otherwise, then lowered by c * frequency +
 * presence.  repeat 1, presence 0, frequency 0 (or last_n 0): none. */
typedef struct {
    float repeat;
    int last_n;
    float presence;
    float frequency;
} SamplerPenalties;

typedef struct {
    int vocab_size;
    float temperature;
    float topp;        /* 0 or >= 1: disabled */
    int topk;          /* 0 or >= vocab_size: disabled */
    float min_p;       /* keep tokens at least min_p x the most probable one; 0: disabled */
    SamplerPenalties penalties;
    uint64_t rng_state;
    ProbIndex *candidates; /* (vocab_size) */
    float *probs;          /* (vocab_size) */
    float *penalized;      /* (vocab_size) the logits after penalties */
    int *recent;           /* (penalties.last_n) ring of the last accepted tokens */
    int n_recent, recent_next;
    int *counts;           /* (vocab_size) scratch: occurrences in the ring, 0 between calls */
} Sampler;

void sampler_build(Sampler *s, int vocab_size, float temperature, float topp, int topk,
                   uint64_t seed);
/* min_p in [0, 1]; penalties as above (last_n >= 0).  Call before sampling. */
void sampler_set_min_p(Sampler *s, float min_p);
void sampler_set_penalties(Sampler *s, SamplerPenalties p);
void sampler_free(Sampler *s);
/* Records a token the model has seen (prompt or generated) for the
 * penalties; a no-op without them. */
void sampler_accept(Sampler *s, int token);
/* out = logits with the penalties applied (the first step of sampler_sample). */
void sampler_apply_penalties(Sampler *s, const float *logits, float *out);
/* A token id in [0, vocab_size) whatever the logits hold; callers refuse
 * non-finite logits first (context_check_logits), since no choice among
 * NaNs means anything. */
int sampler_sample(Sampler *s, const float *logits);
int sampler_argmax(const float *x, int n);
#endif
