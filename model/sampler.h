/* Picks the next token from logits: greedy at temperature 0, otherwise
 * temperature, then top-k, then top-p (nucleus) sampling.  The random
 * stream is llama2.c's xorshift, so a seed gives the same text as there. */
#ifndef POSENC_SAMPLER_H
#define POSENC_SAMPLER_H
#include <stdint.h>

typedef struct {
    float prob;
    int index;
} ProbIndex;

typedef struct {
    int vocab_size;
    float temperature;
    float topp;        /* 0 or >= 1: disabled */
    int topk;          /* 0 or >= vocab_size: disabled */
    uint64_t rng_state;
    ProbIndex *candidates; /* (vocab_size) */
    float *probs;          /* (vocab_size) */
} Sampler;

void sampler_build(Sampler *s, int vocab_size, float temperature, float topp, int topk,
                   uint64_t seed);
void sampler_free(Sampler *s);
/* A token id in [0, vocab_size) whatever the logits hold; callers refuse
 * non-finite logits first (context_check_logits), since no choice among
 * NaNs means anything. */
int sampler_sample(Sampler *s, const float *logits);
int sampler_argmax(const float *x, int n);
#endif
