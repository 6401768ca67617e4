/* T5's relative attention bias (Raffel et al.), decoder form: each head
 * adds a learned scalar to the score of query q against key k, looked up
 * by the bucket of the distance q - k.  Near distances have a bucket each,
 * farther ones share log-spaced buckets, and every distance from
 * max_distance on shares the last one.  One table serves every layer.  Only
 * the cells' position numbers are read, so a context shift updates them
 * and nothing else. */
#include <math.h>
#include <stdlib.h>

#include "positional/pe.h"

/* Far above any published configuration (T5: 128); it bounds the table of
 * buckets per distance that build precomputes. */
#define T5_MAX_DISTANCE_LIMIT (1 << 22)

int pe_t5_bucket(long long relative_position, int n_buckets, int max_distance) {
    /* Unidirectional: a key ahead of the query is distance 0. */
    long long distance = relative_position < 0 ? -relative_position : 0;
    int exact = n_buckets / 2;
    if (distance < exact) return (int)distance;
    /* exact..max_distance onto buckets exact..n_buckets, logarithmically;
     * the value is >= 0, so the cast truncates as T5's .to(long) does. */
    double log_pos = log((double)distance / exact) / log((double)max_distance / exact) *
                     (n_buckets - exact);
    long long bucket = exact + (long long)log_pos;
    return bucket < n_buckets - 1 ? (int)bucket : n_buckets - 1;
}

static int t5_check(const PeParams *p, const PeTables *t, PosencError *err) {
    if (!t->relative_bias || t->n_buckets <= 0)
        return posenc_error(err, "t5 relative attention needs a bias table "
                                 "(blk.0.attn_rel_b.weight) and this checkpoint has none");
    if (p->t5_bidirectional)
        return posenc_error(err, "bidirectional relative attention buckets (an encoder's) are "
                                 "not supported: only the decoder's unidirectional form is");
    if (p->t5_buckets >= 0 && p->t5_buckets != t->n_buckets)
        return posenc_error(err, "the relative bucket count is %d but the bias table has %d rows",
                            p->t5_buckets, t->n_buckets);
    if (t->n_buckets < 2)
        return posenc_error(err, "the relative bias table needs at least 2 buckets (has %d)",
                            t->n_buckets);
    if (p->t5_max_distance <= t->n_buckets / 2 || p->t5_max_distance > T5_MAX_DISTANCE_LIMIT)
        return posenc_error(err, "the relative max distance %d must be in %d..%d (above the %d "
                                 "exact buckets)", p->t5_max_distance, t->n_buckets / 2 + 1,
                            T5_MAX_DISTANCE_LIMIT, t->n_buckets / 2);
    return 0;
}

static int t5_build(PositionalEncoding *pe, PosencError *err) {
    if (t5_check(&pe->params, &pe->tables, err)) return -1;
    int n = pe->tables.n_buckets, max_distance = pe->params.t5_max_distance;
    pe->params.t5_buckets = n;
    pe->t5_bucket = malloc_or_exit((size_t)max_distance * sizeof(int), "the T5 bucket of each distance");
    for (int d = 0; d < max_distance; d++) pe->t5_bucket[d] = pe_t5_bucket(-(long long)d, n, max_distance);
    return 0;
}

static void t5_free(PositionalEncoding *pe) {
    free(pe->t5_bucket);
    pe->t5_bucket = NULL;
}

static void t5_bias(const PositionalEncoding *pe, int head, int pos_q, const int *pos_k,
                    float *scores, int n) {
    const float *table = pe->tables.relative_bias + head; /* column `head`, stride n_heads */
    int max_distance = pe->params.t5_max_distance, last = pe->params.t5_buckets - 1;
    for (int i = 0; i < n; i++) {
        long long d = (long long)pos_q - pos_k[i];
        int bucket = d <= 0 ? 0 : d < max_distance ? pe->t5_bucket[d] : last;
        scores[i] += table[(size_t)bucket * (size_t)pe->n_heads];
    }
}

/* Past the trained context the scheme goes on: every distance it cannot
 * tell apart already shares the last bucket. */
static PeCoverage t5_coverage(const PeParams *p, int trained_ctx, int table_len) {
    return pe_coverage_trained(trained_ctx, "the scheme extrapolates (distances from its max "
                                            "distance on share the last bucket)");
}

static int t5_describe(const PeParams *p, int head_size, int trained_ctx, const PeTables *tables,
                       PeField *out) {
    out[0] = (PeField){.key = "t5_buckets", .number = tables->n_buckets, .integer = 1};
    out[1] = (PeField){.key = "t5_max_distance", .number = p->t5_max_distance, .integer = 1};
    return 2;
}

const PeOps pe_t5_ops = {
    .name = "t5",
    .bias = t5_bias,
    .build = t5_build,
    .free = t5_free,
    .coverage = t5_coverage,
    .shift = PE_SHIFT_POSITIONS,
    .relative = 1,
    .describe = t5_describe,
};
