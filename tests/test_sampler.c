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

/* How often each id comes out of `draws` samples (counts has n entries;
 * an id out of range fails at once). */
static void draw(Sampler *s, const float *logits, int n, int draws, int *counts) {
    memset(counts, 0, (size_t)n * sizeof *counts);
    for (int i = 0; i < draws; i++) {
        int id = sampler_sample(s, logits);
        ck_assert_msg(id >= 0 && id < n, "sampled id %d is outside [0, %d)", id, n);
        counts[id]++;
    }
}

/* The ids drawn at least once, as a bit set (n <= 64). */
static uint64_t seen(const int *counts, int n) {
    uint64_t set = 0;
    for (int i = 0; i < n; i++)
        if (counts[i]) set |= BIT(i);
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
    int counts[50];
    two_leaders(logits);
    ck_assert_int_eq(sampler_argmax(logits, 50), 17);
    Sampler s;
    sampler_build(&s, 50, 1.0f, 0.0f, 1, 42);
    draw(&s, logits, 50, 2000, counts);
    ck_assert_uint_eq(seen(counts, 50), BIT(17));
    sampler_free(&s);
    /* control: with k = 2 the runner-up (p = 0.475 between the two) comes
     * out too, and nothing else does */
    sampler_build(&s, 50, 1.0f, 0.0f, 2, 42);
    draw(&s, logits, 50, 2000, counts);
    ck_assert_uint_eq(seen(counts, 50), BIT(17) | BIT(31));
    sampler_free(&s);
}
END_TEST

/* probabilities 0.1 0.5 0.05 0.2 0.15: sorted, the cumulative mass is
 * 0.5 0.7 0.85 0.95 1, so p = 0.8 keeps ids {1, 3, 4} and p = 0.86 adds 0. */
START_TEST(top_p_keeps_exactly_the_nucleus) {
    const float probs[5] = {0.1f, 0.5f, 0.05f, 0.2f, 0.15f};
    float logits[5];
    for (int i = 0; i < 5; i++) logits[i] = logf(probs[i]);
    int counts[5];
    Sampler s;
    sampler_build(&s, 5, 1.0f, 0.8f, 0, 7);
    draw(&s, logits, 5, DRAWS, counts);
    ck_assert_uint_eq(seen(counts, 5), BIT(1) | BIT(3) | BIT(4));
    for (int i = 1; i < 5; i++) {
        if (i == 2) continue;
        double q = probs[i] / 0.85, f = (double)counts[i] / DRAWS;
        double tol = 5.0 * sqrt(q * (1.0 - q) / DRAWS);
        ck_assert_msg(fabs(f - q) < tol, "id %d: frequency %.4f, want %.4f +- %.4f", i, f, q, tol);
    }
    sampler_free(&s);
    /* control: a slightly larger p must admit id 0, so the set check bites */
    sampler_build(&s, 5, 1.0f, 0.86f, 0, 7);
    draw(&s, logits, 5, DRAWS, counts);
    ck_assert_uint_eq(seen(counts, 5), BIT(0) | BIT(1) | BIT(3) | BIT(4));
    sampler_free(&s);
}
END_TEST

/* p below 1/n on a near-flat distribution: llama2.c's cutoff (1-p)/(n-1)
 * is above every probability, no candidate survives, and the old code read
 * candidates[-1].  The nucleus is the most probable token alone. */
START_TEST(flat_distribution_with_tiny_top_p) {
    const float logits[4] = {0.0f, 0.01f, 0.0f, 0.0f}; /* id 1: p = 0.2525 */
    int counts[4];
    Sampler s;
    sampler_build(&s, 4, 1.0f, 0.1f, 0, 3);
    draw(&s, logits, 4, 200, counts);
    ck_assert_uint_eq(seen(counts, 4), BIT(1));
    sampler_free(&s);
    /* control: p = 0.3 exceeds the top token's 0.2525, so a second token
     * joins the nucleus and the single-token check would fail */
    sampler_build(&s, 4, 1.0f, 0.3f, 0, 3);
    draw(&s, logits, 4, 200, counts);
    ck_assert_uint_ne(seen(counts, 4), BIT(1));
    sampler_free(&s);
}
END_TEST

/* -t 1.2e-38: logit / t overflowed to inf and the softmax gave NaN (a
 * stream of <unk> from stories260K).  Now it is greedy. */
START_TEST(tiny_temperature_is_greedy) {
    float logits[50];
    int counts[50];
    two_leaders(logits);
    for (int topp = 0; topp < 2; topp++) {
        Sampler s;
        sampler_build(&s, 50, 1.2e-38f, topp ? 0.9f : 0.0f, 0, 11);
        draw(&s, logits, 50, 500, counts);
        ck_assert_uint_eq(seen(counts, 50), BIT(17));
        sampler_free(&s);
    }
    /* control: at t = 1 the runner-up is drawn as well */
    Sampler s;
    sampler_build(&s, 50, 1.0f, 0.0f, 0, 11);
    draw(&s, logits, 50, 500, counts);
    ck_assert_uint_ne(seen(counts, 50), BIT(17));
    sampler_free(&s);
}
END_TEST

/* Callers refuse NaN logits before sampling; should one slip through, the
 * sampler still returns an id in range in every mode. */
START_TEST(nan_logits_stay_in_range) {
    float logits[8];
    int counts[8];
    for (int one = 0; one < 2; one++) {
        for (int i = 0; i < 8; i++) logits[i] = one ? (float)i : NAN;
        if (one) logits[5] = NAN;
        const float topp[3] = {0.0f, 0.9f, 0.9f};
        const int topk[3] = {0, 0, 3};
        for (int mode = 0; mode < 3; mode++) {
            Sampler s;
            sampler_build(&s, 8, 1.0f, topp[mode], topk[mode], 5);
            draw(&s, logits, 8, 100, counts);
            sampler_free(&s);
        }
    }
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
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
