/* -m bench, in the manner of llama-bench: prefill (ppN: N tokens as one
 * chunk, logits of the last only) and decode (tgN: N tokens one at a
 * time) throughput, from an empty cache or after `depth` cached tokens
 * (filled once, not measured: "tg128 @ d4096" as llama-bench's -d), each repeated
 * after one unmeasured warm-up run, reported as mean ± sample standard
 * deviation of tokens per second.  Decode is also put against the
 * machine's read bandwidth, measured in the same run with the same
 * threads: the bytes a token reads (every weight matrix once, plus the
 * cached keys and values it attends to) times tok/s over GB/s.  Where the
 * time went is shown per test: parallel regions and barriers per token, and the shares
 * of the matmuls (with their threads' idle time), of attention and of the
 * rest, the serial part whose share grows with the thread count. */
#ifndef POSENC_BENCH_H
#define POSENC_BENCH_H
#include <stdio.h>

#include "model/model.h"

#define BENCH_MAX_TESTS 8

typedef struct {
    int pp[BENCH_MAX_TESTS], n_pp; /* prefill sizes */
    int tg[BENCH_MAX_TESTS], n_tg; /* decode lengths */
    int depth[BENCH_MAX_TESTS], n_depth; /* cells filled before each test (llama-bench's -d) */
    int threads[BENCH_MAX_TESTS], n_threads; /* thread counts, every test at each (llama-bench's
                                                -t); none: omp_get_max_threads() */
    int reps;                      /* measured repetitions (>= 1) */
    TensorType kv_type;            /* TENSOR_F32 or TENSOR_F16 */
    PeParams pe;                   /* the scheme the tests run with */
    const char *pe_label;          /* its name as the user gave it, for the header */
    int json;                      /* one JSON object per line and test instead of a table */
} BenchOptions;

/* Defaults: pp512, tg128 at depth 0, 5 repetitions, f32 cache, table,
 * the model's own scheme. */
BenchOptions bench_options_default(const Model *m);

/* Replaces the sizes with a comma list ("128,512"), or none for "0"; 0 or -1 + err. */
int bench_parse_sizes(int *sizes, int *count, const char *list, PosencError *err);
/* Replaces the depths with a comma list ("0,1024,4096"); 0 or -1 + err. */
int bench_parse_depths(int *depths, int *count, const char *list, PosencError *err);

/* Runs every test and writes one row (or JSON line) per test to out. */
int bench_run(const Model *m, const BenchOptions *o, FILE *out, PosencError *err);

/* Bytes one decoded token reads from the weights' matrices (every matrix
 * once, a mixture's router and its picked experts' share of the stacked
 * ones; one row of the embedding). */
double bench_weight_bytes_per_token(const Model *m);
#endif
