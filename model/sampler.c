#include "model/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/kernels.h"
#include "base/util.h"

void sampler_build(Sampler *s, int vocab_size, float temperature, float topp, int topk,
                   uint64_t seed) {
    s->vocab_size = vocab_size;
    s->temperature = temperature;
    s->topp = topp;
    s->topk = topk;
    s->rng_state = seed;
    s->min_p = 0.0f;
    s->penalties = (SamplerPenalties){.repeat = 1.0f};
    s->candidates = malloc_or_exit((size_t)vocab_size * sizeof(ProbIndex), "the sampler's candidates");
    s->probs = malloc_or_exit((size_t)vocab_size * sizeof(float), "the sampler's probabilities");
    s->penalized = NULL;
    s->recent = NULL;
    s->counts = NULL;
    s->n_recent = s->recent_next = 0;
}

void sampler_set_min_p(Sampler *s, float min_p) { s->min_p = min_p; }

static int penalties_active(const SamplerPenalties *p) {
    return p->last_n > 0 && (p->repeat != 1.0f || p->presence != 0.0f || p->frequency != 0.0f);
}

void sampler_set_penalties(Sampler *s, SamplerPenalties p) {
    free(s->penalized);
    free(s->recent);
    free(s->counts);
    s->penalized = NULL;
    s->recent = NULL;
    s->counts = NULL;
    s->n_recent = s->recent_next = 0;
    s->penalties = p;
    if (!penalties_active(&p)) return;
    s->penalized = malloc_or_exit((size_t)s->vocab_size * sizeof(float), "the sampler's penalized logits");
    s->recent = malloc_or_exit((size_t)p.last_n * sizeof(int), "the sampler's recent tokens");
    s->counts = calloc_or_exit((size_t)s->vocab_size, sizeof(int), "the sampler's token counts");
}

void sampler_free(Sampler *s) {
    free(s->candidates);
    free(s->probs);
    free(s->penalized);
    free(s->recent);
    free(s->counts);
    s->candidates = NULL;
    s->probs = NULL;
    s->penalized = NULL;
    s->recent = NULL;
    s->counts = NULL;
}

void sampler_accept(Sampler *s, int token) {
    if (!s->recent || token < 0 || token >= s->vocab_size) return;
    s->recent[s->recent_next] = token;
    s->recent_next = (s->recent_next + 1) % s->penalties.last_n;
    if (s->n_recent < s->penalties.last_n) s->n_recent++;
}

void sampler_apply_penalties(Sampler *s, const float *logits, float *out) {
    if (out != logits) memcpy(out, logits, (size_t)s->vocab_size * sizeof(float));
    if (!s->recent) return;
    const SamplerPenalties *p = &s->penalties;
    for (int i = 0; i < s->n_recent; i++) s->counts[s->recent[i]]++;
    for (int i = 0; i < s->n_recent; i++) {
        int t = s->recent[i], c = s->counts[t];
        if (c == 0) continue;   /* a repeat in the window: already done */
        float x = out[t];
        x = x > 0.0f ? x / p->repeat : x * p->repeat;
        out[t] = x - (float)c * p->frequency - p->presence;
        s->counts[t] = 0;
    }
}

/* xorshift64* (Marsaglia/Vigna), taking the top 32 bits. */
static uint32_t random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

/* Uniform in [0, 1) with 24 bits of resolution. */
static float random_f32(uint64_t *state) { return (float)(random_u32(state) >> 8) / 16777216.0f; }

int sampler_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Walks the distribution until the cumulative probability passes coin. */
static int sample_cdf(const float *probs, int n, float coin) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += probs[i];
        if (coin < cdf) return i;
    }
    return n - 1; /* rounding left the total a hair below 1 */
}

static int cmp_prob_desc(const void *a, const void *b) {
    float pa = ((const ProbIndex *)a)->prob, pb = ((const ProbIndex *)b)->prob;
    return (pa < pb) - (pa > pb);
}

/* Top-k then top-p over probs: sort the candidates by probability, keep the
 * first k, then the shortest prefix whose mass exceeds topp, and sample
 * within it.  Tokens below (1-topp)/(n-1) can never be in the nucleus, so
 * they are dropped before sorting. */
static int sample_truncated(Sampler *s, const float *probs, float coin) {
    int n = s->vocab_size, m = 0;
    int use_topp = s->topp > 0.0f && s->topp < 1.0f;
    float cutoff = use_topp && n > 1 ? (1.0f - s->topp) / (float)(n - 1) : 0.0f;
    for (int i = 0; i < n; i++)
        if (probs[i] >= cutoff) s->candidates[m++] = (ProbIndex){probs[i], i};
    /* The cutoff is exact for every token but the most probable one, which
     * falls below it only when the distribution is so flat that topp < 1/n
     * (and then so does every token): the nucleus is that token alone.
     * NaN probabilities pass no cutoff either; they end here too. */
    if (m == 0) return sampler_argmax(probs, n);
    qsort(s->candidates, (size_t)m, sizeof(ProbIndex), cmp_prob_desc);
    if (s->topk > 0 && s->topk < m) m = s->topk;
    if (s->min_p > 0.0f) {   /* sorted: the kept tokens are a prefix */
        float floor_prob = s->min_p * s->candidates[0].prob;
        int kept = 1;
        while (kept < m && s->candidates[kept].prob >= floor_prob) kept++;
        m = kept;
    }

    float total = 0.0f;
    int last = m - 1;
    for (int i = 0; i < m; i++) {
        total += s->candidates[i].prob;
        if (use_topp && total > s->topp) {
            last = i;
            break;
        }
    }
    float r = coin * total, cdf = 0.0f;
    for (int i = 0; i <= last; i++) {
        cdf += s->candidates[i].prob;
        if (r < cdf) return s->candidates[i].index;
    }
    return s->candidates[last].index;
}

int sampler_sample(Sampler *s, const float *logits) {
    int n = s->vocab_size;
    if (s->recent) {
        sampler_apply_penalties(s, logits, s->penalized);
        logits = s->penalized;
    }
    if (s->temperature == 0.0f) return sampler_argmax(logits, n);
    /* Shifted by the largest logit every value is <= 0, so a temperature so
     * small that logit / t overflows gives -inf (weight 0), never inf - inf
     * = NaN in the softmax: sampling then degenerates into greedy. */
    float max = logits[sampler_argmax(logits, n)];
    for (int i = 0; i < n; i++) s->probs[i] = (logits[i] - max) / s->temperature;
    softmax(s->probs, n);
    float coin = random_f32(&s->rng_state);
    int truncate = (s->topp > 0.0f && s->topp < 1.0f) || (s->topk > 0 && s->topk < n) || s->min_p > 0.0f;
    return truncate ? sample_truncated(s, s->probs, coin) : sample_cdf(s->probs, n, coin);
}
