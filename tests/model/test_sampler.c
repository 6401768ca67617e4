/* The sampler on hand-made distributions: top-k 1 is argmax, top-p keeps
 * exactly the nucleus (the shortest prefix of the sorted distribution whose
 * mass exceeds p) and samples it in proportion, and degenerate inputs — a
 * distribution flatter than 1/p, a temperature whose logit / t overflows,
 * NaN logits — give an id in range (under ASan an out-of-bounds read of the
 * candidates fails the test).  Frequencies are compared with 5 binomial
 * standard deviations: a correct sampler fails that about once in 10^6. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/sampler.h"
#include "tests/common.h"

#define DRAWS 20000
#define BIT(i) ((uint64_t)1 << (i))

/* Draws `draws` samples from a fresh sampler (temperature t, top-p p,
 * top-k k) over n <= 64 logits: the ids drawn at least once as a bit set,
 * and in counts (if not NULL) how often each came out.  An id out of range
 * fails at once. */
static uint64_t drawn(const float *logits, int n, float t, float p, int k, int draws,
                      int *counts) {
    Sampler s;
    sampler_build(&s, n, t, p, k, 7);
    uint64_t set = 0;
    if (counts) memset(counts, 0, (size_t)n * sizeof *counts);
    for (int i = 0; i < draws; i++) {
        int id = sampler_sample(&s, logits);
        ck_assert_msg(id >= 0 && id < n, "sampled id %d is outside [0, %d)", id, n);
        set |= BIT(id);
        if (counts) counts[id]++;
    }
    sampler_free(&s);
    return set;
}

/* 50 logits: two close leaders (ids 17 and 31) large enough that
 * logit / 1.2e-38 overflows a float, the rest far below. */
static void two_leaders(float *logits) {
    uint32_t x = 12345;
    for (int i = 0; i < 50; i++) {
        x = x * 1664525u + 1013904223u;
        logits[i] = -2.0f + 2.0f * (float)(x >> 8) / 16777216.0f;
    }
    logits[17] = 30.0f;
    logits[31] = 29.9f;
}

START_TEST(top_k_one_is_argmax) {
    float logits[50];
    two_leaders(logits);
    ck_assert_int_eq(sampler_argmax(logits, 50), 17);
    ck_assert_uint_eq(drawn(logits, 50, 1.0f, 0.0f, 1, 2000, NULL), BIT(17));
    /* control: with k = 2 the runner-up (p = 0.475 between the two) comes
     * out too, and nothing else does */
    ck_assert_uint_eq(drawn(logits, 50, 1.0f, 0.0f, 2, 2000, NULL), BIT(17) | BIT(31));
}
END_TEST

/* probabilities 0.1 0.5 0.05 0.2 0.15: sorted, the cumulative mass is
 * 0.5 0.7 0.85 0.95 1, so p = 0.8 keeps ids {1, 3, 4} and p = 0.86 adds 0. */
START_TEST(top_p_keeps_exactly_the_nucleus) {
    const float probs[5] = {0.1f, 0.5f, 0.05f, 0.2f, 0.15f};
    float logits[5];
    for (int i = 0; i < 5; i++) logits[i] = logf(probs[i]);
    int counts[5];
    ck_assert_uint_eq(drawn(logits, 5, 1.0f, 0.8f, 0, DRAWS, counts), BIT(1) | BIT(3) | BIT(4));
    for (int i = 1; i < 5; i++) {
        if (i == 2) continue;
        double q = probs[i] / 0.85, f = (double)counts[i] / DRAWS;
        double tol = 5.0 * sqrt(q * (1.0 - q) / DRAWS);
        ck_assert_msg(fabs(f - q) < tol, "id %d: frequency %.4f, want %.4f +- %.4f", i, f, q, tol);
    }
    /* control: a slightly larger p must admit id 0, so the set check bites */
    ck_assert_uint_eq(drawn(logits, 5, 1.0f, 0.86f, 0, DRAWS, NULL),
                      BIT(0) | BIT(1) | BIT(3) | BIT(4));
}
END_TEST

/* p below 1/n on a near-flat distribution: llama2.c's cutoff (1-p)/(n-1)
 * is above every probability, no candidate survives, and the old code read
 * candidates[-1].  The nucleus is the most probable token alone. */
START_TEST(flat_distribution_with_tiny_top_p) {
    const float logits[4] = {0.0f, 0.01f, 0.0f, 0.0f}; /* id 1: p = 0.2525 */
    ck_assert_uint_eq(drawn(logits, 4, 1.0f, 0.1f, 0, 200, NULL), BIT(1));
    /* control: p = 0.3 exceeds the top token's 0.2525, so a second token
     * joins the nucleus and the single-token check would fail */
    ck_assert_uint_ne(drawn(logits, 4, 1.0f, 0.3f, 0, 200, NULL), BIT(1));
}
END_TEST

/* -t 1.2e-38: logit / t overflowed to inf and the softmax gave NaN (a
 * stream of <unk> from stories260K).  Now it is greedy. */
START_TEST(tiny_temperature_is_greedy) {
    float logits[50];
    two_leaders(logits);
    ck_assert_uint_eq(drawn(logits, 50, 1.2e-38f, 0.0f, 0, 500, NULL), BIT(17));
    ck_assert_uint_eq(drawn(logits, 50, 1.2e-38f, 0.9f, 0, 500, NULL), BIT(17));
    /* control: at t = 1 the runner-up is drawn as well */
    ck_assert_uint_ne(drawn(logits, 50, 1.0f, 0.0f, 0, 500, NULL), BIT(17));
}
END_TEST

/* Callers refuse NaN logits before sampling; should one slip through, the
 * sampler still returns an id in range (drawn checks) in every mode. */
START_TEST(nan_logits_stay_in_range) {
    float logits[8];
    for (int one = 0; one < 2; one++) {
        for (int i = 0; i < 8; i++) logits[i] = one ? (float)i : NAN;
        if (one) logits[5] = NAN;
        drawn(logits, 8, 1.0f, 0.0f, 0, 100, NULL);
        drawn(logits, 8, 1.0f, 0.9f, 0, 100, NULL);
        drawn(logits, 8, 1.0f, 0.9f, 3, 100, NULL);
    }
}
END_TEST

/* min-p keeps the tokens whose probability is at least min_p times the
 * most probable one's: with probabilities 0.4, 0.3, 0.2, 0.06, 0.04 and
 * min_p 0.2 the floor is 0.08, so exactly ids 0..2. */
START_TEST(min_p_keeps_exactly_the_right_tokens) {
    const float probs[5] = {0.4f, 0.3f, 0.2f, 0.06f, 0.04f};
    float logits[5];
    for (int i = 0; i < 5; i++) logits[i] = logf(probs[i]);
    for (int variant = 0; variant < 3; variant++) {
        float min_p = variant == 0 ? 0.2f : variant == 1 ? 0.14f : 0.0f;
        uint64_t expected = variant == 0 ? BIT(0) | BIT(1) | BIT(2)               /* floor 0.08 */
                          : variant == 1 ? BIT(0) | BIT(1) | BIT(2) | BIT(3)      /* floor 0.056 */
                                         : BIT(0) | BIT(1) | BIT(2) | BIT(3) | BIT(4);   /* off */
        Sampler s;
        sampler_build(&s, 5, 1.0f, 0.0f, 0, 11);
        sampler_set_min_p(&s, min_p);
        uint64_t set = 0;
        for (int i = 0; i < DRAWS; i++) set |= BIT(sampler_sample(&s, logits));
        sampler_free(&s);
        ck_assert_msg(set == expected, "min_p %g drew set %#llx, expected %#llx", (double)min_p,
                      (unsigned long long)set, (unsigned long long)expected);
    }
}
END_TEST

/* The penalties on a hand-computed case: logits (2, -1, 0.5, 1), history
 * 0, 1, 1 (and 3, outside a window of 3), repeat 2, presence 0.5,
 * frequency 0.25:
 *   id 0: 2 / 2 = 1, seen once:   1 - 0.25 - 0.5 = 0.25
 *   id 1: -1 x 2 = -2, seen twice: -2 - 0.5 - 0.5 = -3
 *   ids 2, 3 unchanged (3 fell out of the window). */
START_TEST(penalties_match_their_formulas) {
    const float logits[4] = {2.0f, -1.0f, 0.5f, 1.0f};
    const float expected[4] = {0.25f, -3.0f, 0.5f, 1.0f};
    Sampler s;
    sampler_build(&s, 4, 0.0f, 0.0f, 0, 1);
    sampler_set_penalties(&s, (SamplerPenalties){.repeat = 2.0f, .last_n = 3, .presence = 0.5f,
                                                 .frequency = 0.25f});
    const int history[] = {3, 0, 1, 1};
    for (int i = 0; i < 4; i++) sampler_accept(&s, history[i]);
    float out[4];
    sampler_apply_penalties(&s, logits, out);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabsf(out[i] - expected[i]) < 1e-6f, "id %d: %g, expected %g", i, (double)out[i],
                      (double)expected[i]);
    /* greedy after penalties: id 3 (1.0) now beats id 0 (0.25); control:
     * without penalties id 0 wins */
    ck_assert_int_eq(sampler_sample(&s, logits), 3);
    sampler_set_penalties(&s, (SamplerPenalties){.repeat = 1.0f, .last_n = 64});
    for (int i = 0; i < 4; i++) sampler_accept(&s, history[i]);
    ck_assert_int_eq(sampler_sample(&s, logits), 0);
    sampler_free(&s);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("sampler");
    tcase_add_test(tc, top_k_one_is_argmax);
    tcase_add_test(tc, top_p_keeps_exactly_the_nucleus);
    tcase_add_test(tc, flat_distribution_with_tiny_top_p);
    tcase_add_test(tc, tiny_temperature_is_greedy);
    tcase_add_test(tc, nan_logits_stay_in_range);
    tcase_add_test(tc, min_p_keeps_exactly_the_right_tokens);
    tcase_add_test(tc, penalties_match_their_formulas);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
