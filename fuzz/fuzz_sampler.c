/* The sampler on arbitrary logits (NaN and infinities included) with every
 * setting run accepts: vocabulary 1..4096, temperature 0..100, top-p 0..1,
 * any top-k, min-p 0..1, and repetition penalties.  Whatever the logits, the
 * token is in the vocabulary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "model/sampler.h"

/* Header: u16 vocab, f32 temperature, f32 top-p, i32 top-k, u64 seed; then
 * the logits as f32, cycled when the input is short. */
#define HEADER 22

static float clamped(float x, float lo, float hi) {
    return isnan(x) ? lo : x < lo ? lo : x > hi ? hi : x;
}

int fuzz_sampler(const uint8_t *data, size_t size) {
    if (size < HEADER + 4) return 0;
    uint16_t vocab16;
    float temperature, topp;
    int32_t topk;
    uint64_t seed;
    memcpy(&vocab16, data, 2);
    memcpy(&temperature, data + 2, 4);
    memcpy(&topp, data + 6, 4);
    memcpy(&topk, data + 10, 4);
    memcpy(&seed, data + 14, 8);
    int vocab = vocab16 % 4096 + 1;
    size_t n_given = (size - HEADER) / 4;
    float *logits = malloc((size_t)vocab * sizeof(float));
    for (int i = 0; i < vocab; i++) memcpy(&logits[i], data + HEADER + 4 * ((size_t)i % n_given), 4);

    Sampler s;
    sampler_build(&s, vocab, clamped(temperature, 0.0f, 100.0f), clamped(topp, 0.0f, 1.0f),
                  topk < 0 ? -(topk + 1) : topk, seed);
    /* min-p and the penalties from the seed's high bytes (the header stays
     * as the committed seeds have it): off when those bytes are 0 */
    uint8_t knobs[4];
    memcpy(knobs, (const uint8_t *)&seed + 4, 4);
    sampler_set_min_p(&s, knobs[0] / 255.0f);
    if (knobs[1] || knobs[2] || knobs[3])
        sampler_set_penalties(&s, (SamplerPenalties){.repeat = 0.01f + knobs[1] / 2.0f, .last_n = knobs[2],
                                                     .presence = knobs[3] / 16.0f - 8.0f,
                                                     .frequency = knobs[2] / 32.0f - 4.0f});
    for (int draw = 0; draw < 4; draw++) {
        int token = sampler_sample(&s, logits);
        FUZZ_ASSERT(token >= 0 && token < vocab);
        sampler_accept(&s, token);
    }
    int best = sampler_argmax(logits, vocab);
    FUZZ_ASSERT(best >= 0 && best < vocab);
    sampler_free(&s);
    free(logits);
    return 0;
}

FUZZ_ENTRY_POINT(fuzz_sampler)
