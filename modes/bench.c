#include "modes/bench.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
#include "model/kernels.h"

BenchOptions bench_options_default(const Model *m) {
    BenchOptions o = {0};
    o.pe = m->pe;
    o.pe_label = pe_kind_name(m->pe.kind);
    o.pp[o.n_pp++] = 512;
    o.tg[o.n_tg++] = 128;
    o.depth[o.n_depth++] = 0;
    o.reps = 5;
    o.kv_type = TENSOR_F32;
    return o;
}

static int parse_counts(int *sizes, int *count, const char *list, int min, PosencError *err) {
    *count = 0;
    const char *p = list;
    for (;;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < min || v > (1 << 22) || (*end && *end != ','))
            return posenc_error(err, "expected a comma list of token counts%s, got '%s'",
                                min ? " or 0" : "", list);
        if (*count == BENCH_MAX_TESTS) return posenc_error(err, "at most %d sizes", BENCH_MAX_TESTS);
        sizes[(*count)++] = (int)v;
        if (!*end) return 0;
        p = end + 1;
    }
}

int bench_parse_sizes(int *sizes, int *count, const char *list, PosencError *err) {
    *count = 0;
    if (strcmp(list, "0") == 0) return 0; /* llama-bench's way to skip a kind of test */
    return parse_counts(sizes, count, list, 1, err);
}

int bench_parse_depths(int *depths, int *count, const char *list, PosencError *err) {
    return parse_counts(depths, count, list, 0, err);
}

/* ---- bandwidth --------------------------------------------------------- */

/* 512 MiB: 16x the largest L3 of the machines this runs on, so no pass is
 * served from cache. */
#define BW_BYTES ((size_t)1 << 29)
#define BW_PASSES 4

#define BW_WORDS (BW_BYTES / sizeof(uint64_t))

typedef struct {
    uint64_t *buf; /* (BW_WORDS) */
} BandwidthProbe;

static void bandwidth_probe_build(BandwidthProbe *p) {
    p->buf = malloc_or_exit(BW_BYTES, "the bandwidth probe");
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < BW_WORDS; i++) p->buf[i] = i; /* pages touched by the thread that reads them */
}

static void bandwidth_probe_free(BandwidthProbe *p) {
    free(p->buf);
}

/* GB/s, the best of a few passes with the current OpenMP threads.  Shared
 * machines are noisy, so decode tests call this right before every
 * repetition: the fraction of the ceiling compares numbers taken seconds
 * apart, not minutes. */
static double bandwidth_probe_measure(const BandwidthProbe *p) {
    double best = 0.0;
    uint64_t sink = 0;
    for (int pass = 0; pass < BW_PASSES; pass++) {
        double t0 = time_now_s();
        uint64_t total = 0;
        /* an integer sum vectorizes (it reassociates exactly), so loads bound it */
        #pragma omp parallel for schedule(static) reduction(+ : total)
        for (size_t i = 0; i < BW_WORDS; i++) total += p->buf[i];
        double gbs = (double)BW_BYTES / (time_now_s() - t0) / 1e9;
        sink += total;
        if (gbs > best) best = gbs;
    }
    return sink == 1 ? 0.0 : best; /* sink keeps the sums alive */
}

/* ---- model facts ------------------------------------------------------ */

static double tensor_bytes(const Tensor *t) {
    return (double)tensor_row_bytes(t->type, (size_t)t->cols) * t->rows;
}

/* Layer l's matrices (a gate only in gated families): their count, into ts. */
static int layer_matrices(const LayerWeights *lw, const Tensor *ts[LAYER_MATRICES]) {
    const Tensor *all[LAYER_MATRICES] = LAYER_MATRIX_LIST(lw);
    int n = 0;
    for (int i = 0; i < LAYER_MATRICES; i++)
        if (all[i]->data) ts[n++] = all[i];
    return n;
}

double bench_weight_bytes_per_token(const Model *m) {
    const ModelWeights *w = &m->weights;
    const ModelConfig *c = &m->config;
    double b = tensor_bytes(&w->output) + tensor_bytes(&w->token_embd) / w->token_embd.rows;
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *lw = &w->layers[l];
        const Tensor *ts[LAYER_MATRICES];
        for (int i = 0, n = layer_matrices(lw, ts); i < n; i++) b += tensor_bytes(ts[i]);
        if (c->n_experts) /* the router, and the picked experts' share of the stacked ones */
            b += tensor_bytes(&lw->router) + (tensor_bytes(&lw->gate_exps) + tensor_bytes(&lw->up_exps) +
                                              tensor_bytes(&lw->down_exps)) * c->n_experts_used / c->n_experts;
    }
    return b;
}

/* Every distinct matrix of the file once (a tied head is the embedding). */
static double model_bytes(const Model *m, double *params) {
    const ModelWeights *w = &m->weights;
    double b = tensor_bytes(&w->token_embd), p = (double)w->token_embd.rows * w->token_embd.cols;
    if (w->output.data != w->token_embd.data) {
        b += tensor_bytes(&w->output);
        p += (double)w->output.rows * w->output.cols;
    }
    for (int l = 0; l < m->config.n_layers; l++) {
        const Tensor *ts[LAYER_MATRICES];
        for (int i = 0, n = layer_matrices(&w->layers[l], ts); i < n; i++) {
            b += tensor_bytes(ts[i]);
            p += (double)ts[i]->rows * ts[i]->cols;
        }
    }
    *params = p;
    return b;
}

/* Flops of a prefill of n tokens after `depth` cached ones, as bench runs
 * it (logits of the last token only): 2 per weight per token in the
 * layers' matrices, 2 per weight of the head, and 4 per query element and
 * visible cell in attention (scores, then the values' sum; a sliding
 * window is not subtracted). */
static double prefill_flops(const Model *m, int n, int depth) {
    const ModelWeights *w = &m->weights;
    const ModelConfig *c = &m->config;
    double layer_params = 0.0;
    for (int l = 0; l < c->n_layers; l++) {
        const Tensor *ts[LAYER_MATRICES];
        for (int i = 0, count = layer_matrices(&w->layers[l], ts); i < count; i++)
            layer_params += (double)ts[i]->rows * ts[i]->cols;
    }
    double cells = (double)n * depth + (double)n * (n + 1) / 2.0; /* sum over queries of cells seen */
    return 2.0 * n * layer_params + 2.0 * (double)w->output.rows * w->output.cols +
           4.0 * c->n_layers * (double)model_q_dim(c) * cells;
}

/* ---- tests ------------------------------------------------------------ */

typedef struct {
    char name[40];
    int n_prompt, n_gen, depth;
    double mean, sd;    /* tok/s */
    double bytes_per_token;
    double bw_gbs;      /* decode only: mean of the probes beside each repetition; 0 otherwise */
    double bw_fraction; /* decode only: mean of bytes_per_token * tok/s / bandwidth per repetition */
    double gflops;      /* prefill only: mean achieved GFLOP/s (prefill_flops); 0 otherwise */
    double peak_gflops; /* prefill only: mean of the FMA probes beside each repetition */
    double flops_fraction; /* prefill only: mean of achieved / probed per repetition */
    int threads;
    double regions_per_token; /* parallel regions the matmuls and attention started, per token */
    double barriers_per_token; /* barriers inside them (a decoded token's team), per token */
    double matmul_share;      /* of the measured wall time, inside the matmuls */
    double idle_share;        /* decode only: of the threads' time, idle at the end of a matmul */
    double attention_share;   /* of the wall time, in attention over the cache */
} BenchResult;

/* The measured tokens after the `depth` cells filled before the first run
 * (the cells of the previous run are dropped, the depth's kept). */
static double run_once(Context *ctx, const int *tokens, int depth, int n_prompt, int n_gen) {
    kv_cache_remove(&ctx->cache, depth, ctx->cache.n_used - depth);
    tokens += depth;
    double t0 = time_now_s();
    if (n_prompt > 0) context_forward(ctx, tokens, n_prompt, depth, 0);
    for (int i = 0; i < n_gen; i++) context_forward(ctx, tokens + i, 1, depth + i, 0);
    return time_now_s() - t0;
}

static void test_name(char *buf, size_t size, int n_prompt, int n_gen, int depth) {
    int at = snprintf(buf, size, n_prompt ? "pp%d" : "tg%d", n_prompt ? n_prompt : n_gen);
    if (depth) snprintf(buf + at, size - (size_t)at, " @ d%d", depth); /* as llama-bench names it */
}

/* Prefill chunks of the depth: as large as the test's own, at least 512. */
#define DEPTH_CHUNK 512

static int run_test(const Model *m, const BenchOptions *o, int threads, int n_prompt, int n_gen, int depth,
                    const BandwidthProbe *probe, BenchResult *r, PosencError *err) {
    const ModelConfig *c = &m->config;
    omp_set_num_threads(threads); /* before the context: its scratch is per thread */
    int n = depth + (n_prompt > n_gen ? n_prompt : n_gen);
    int chunk = n_prompt > DEPTH_CHUNK ? n_prompt : DEPTH_CHUNK;
    int *tokens = malloc_or_exit((size_t)n * sizeof(int), "the benchmark's tokens");
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < n; i++) { /* fixed pseudo-random ids: every run reads the same rows */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        tokens[i] = (int)(s % (uint64_t)c->vocab_size);
    }
    test_name(r->name, sizeof r->name, n_prompt, n_gen, depth);
    Context ctx;
    if (context_build_kv(&ctx, m, &o->pe, n, chunk, o->kv_type, err) ||
        (depth > 0 && context_check_tokens(&ctx, tokens, depth, 0, err)) ||
        context_check_chunk(&ctx, tokens, n_prompt > 0 ? n_prompt : 1, depth, err) ||
        (n_gen > 0 && context_check_chunk(&ctx, tokens, 1, depth + n_gen - 1, err))) {
        free(tokens);
        if (ctx.model) context_free(&ctx);
        return posenc_error_prefix(err, r->name);
    }
    /* A decoded token at position i reads i + 1 cached keys and values per layer. */
    double kv_row = (double)tensor_row_bytes(o->kv_type, (size_t)model_kv_dim(c));
    double kv_bytes = n_gen ? 2.0 * c->n_layers * kv_row * (depth + (n_gen + 1) / 2.0) : 0.0;
    r->bytes_per_token = bench_weight_bytes_per_token(m) + kv_bytes;

    if (depth > 0) context_prefill(&ctx, tokens, depth, 0); /* not measured */
    run_once(&ctx, tokens, depth, n_prompt, n_gen); /* warm-up: page in the weights, spin up threads */
    memset(&ctx.stats, 0, sizeof ctx.stats);
    memset(&ctx.state.mm.stats, 0, sizeof ctx.state.mm.stats);
    double measured = 0.0;
    double flops = n_prompt ? prefill_flops(m, n_prompt, depth) : 0.0;
    double sum = 0.0, sum2 = 0.0, bw_sum = 0.0, frac_sum = 0.0, gf_sum = 0.0, peak_sum = 0.0, ff_sum = 0.0;
    for (int rep = 0; rep < o->reps; rep++) {
        double bw = n_gen ? bandwidth_probe_measure(probe) : 0.0;
        double peak = n_prompt ? kernels_fma_peak_gflops() : 0.0;
        double secs = run_once(&ctx, tokens, depth, n_prompt, n_gen), ts = (n_prompt + n_gen) / secs;
        measured += secs;
        sum += ts;
        sum2 += ts * ts;
        if (bw > 0.0) {
            bw_sum += bw;
            frac_sum += r->bytes_per_token * ts / (bw * 1e9);
        }
        if (peak > 0.0) {
            gf_sum += flops / secs / 1e9;
            peak_sum += peak;
            ff_sum += flops / secs / 1e9 / peak;
        }
    }
    const MatmulStats *ms = &ctx.state.mm.stats;
    r->threads = threads;
    double run_tokens = (double)(n_prompt + n_gen) * o->reps;
    r->regions_per_token = (double)(ms->regions + ctx.stats.regions) / run_tokens;
    r->barriers_per_token = (double)(ms->barriers + ctx.stats.barriers) / run_tokens;
    r->matmul_share = ms->seconds / measured;
    r->idle_share = n_gen ? ms->idle_seconds / (measured * threads) : 0.0;
    r->attention_share = ctx.stats.attention_seconds / measured;
    context_free(&ctx);
    free(tokens);

    r->n_prompt = n_prompt;
    r->n_gen = n_gen;
    r->depth = depth;
    r->mean = sum / o->reps;
    r->sd = o->reps > 1 ? sqrt(fmax(0.0, (sum2 - sum * sum / o->reps) / (o->reps - 1))) : 0.0;
    r->bw_gbs = bw_sum / o->reps;
    r->bw_fraction = frac_sum / o->reps;
    r->gflops = gf_sum / o->reps;
    r->peak_gflops = peak_sum / o->reps;
    r->flops_fraction = ff_sum / o->reps;
    return 0;
}

static const char *weight_type(const Model *m) {
    return tensor_type_name(m->weights.layers[0].wq.type);
}

static const char *model_name(const Model *m) {
    const char *slash = strrchr(m->path, '/');
    return slash ? slash + 1 : m->path;
}

/* Below this, the threads' start and join costs more than they save. */
#define SMALL_MODEL_BYTES 8e6

int bench_run(const Model *m, const BenchOptions *o, FILE *out, PosencError *err) {
    if (o->reps < 1) return posenc_error(err, "-r must be at least 1 (got %d)", o->reps);
    if (o->n_pp + o->n_tg == 0) return posenc_error(err, "--pp 0 and --tg 0 leave nothing to measure");
    int all = omp_get_max_threads(), one[1] = {all};
    const int *counts = o->n_threads ? o->threads : one;
    int n_counts = o->n_threads ? o->n_threads : 1, most = 0;
    char thread_list[BENCH_MAX_TESTS * 8] = "";
    for (int i = 0; i < n_counts; i++) {
        if (counts[i] > most) most = counts[i];
        size_t at = strlen(thread_list);
        snprintf(thread_list + at, sizeof thread_list - at, "%s%d", i ? "," : "", counts[i]);
    }
    double params, size = model_bytes(m, &params);
    BandwidthProbe probe = {0};
    if (o->n_tg > 0) bandwidth_probe_build(&probe);
    const char *kv = o->kv_type == TENSOR_F16 ? "f16" : "f32";
    if (!o->json) {
        fprintf(out, "# %s: %s, %.1f MB, %.1f M params, weights %s, positions %s, KV cache %s, "
                     "threads %s, kernels %s, AMX %s\n", model_name(m), m->config.family.name,
                size / 1e6, params / 1e6, weight_type(m), o->pe_label, kv, thread_list,
                kernels_path_name(), kernels_amx_name());
        fprintf(out, "| %-14s | %7s | %21s | %10s | %9s | %7s | %7s | %7s |\n", "test", "threads", "tok/s",
                "MB/token", "read GB/s", "of bw", "GFLOP/s", "of peak");
        fprintf(out, "| %-14s | %7s | %21s | %10s | %9s | %7s | %7s | %7s |\n", "--------------", "------:",
                "--------------------:", "---------:", "--------:", "------:", "------:", "------:");
    }
    int failed = 0, n_tests = o->n_pp + o->n_tg, n_runs = n_tests * o->n_depth * n_counts;
    BenchResult *results = calloc((size_t)n_runs, sizeof *results);
    if (!results) failed = posenc_error(err, "out of memory for %d benchmark results", n_runs);
    for (int i = 0; i < n_runs && !failed; i++) {
        int per_count = n_tests * o->n_depth, threads = counts[i / per_count], j = i % per_count;
        int t = j / o->n_depth, depth = o->depth[j % o->n_depth];
        int pp = t < o->n_pp ? o->pp[t] : 0, tg = t < o->n_pp ? 0 : o->tg[t - o->n_pp];
        BenchResult *r = &results[i];
        if ((failed = run_test(m, o, threads, pp, tg, depth, &probe, r, err))) break;
        if (o->json) {
            fprintf(out, "{\"model\": \"%s\", \"arch\": \"%s\", \"size_bytes\": %.0f, \"params\": %.0f, "
                         "\"weight_type\": \"%s\", \"pe\": \"%s\", \"kv_type\": \"%s\", "
                         "\"kernels\": \"%s\", \"amx\": \"%s\", "
                         "\"threads\": %d, \"test\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, "
                         "\"reps\": %d, \"tok_s\": %.3f, \"tok_s_sd\": %.3f, "
                         "\"bytes_per_token\": %.0f, \"read_bw_gbs\": %.2f, \"bw_fraction\": %.4f, "
                         "\"gflops\": %.6g, \"fma_peak_gflops\": %.6g, \"flops_fraction\": %.6g, "
                         "\"regions_per_token\": %.3f, \"barriers_per_token\": %.3f, "
                         "\"matmul_share\": %.4f, \"matmul_idle_share\": %.4f, "
                         "\"attention_share\": %.4f}\n",
                    model_name(m), m->config.family.name, size, params, weight_type(m),
                    o->pe_label, kv, kernels_path_name(), kernels_amx_name(), r->threads, r->name, r->n_prompt,
                    r->n_gen, r->depth, o->reps, r->mean, r->sd,
                    r->bytes_per_token, r->bw_gbs, r->bw_fraction, r->gflops, r->peak_gflops,
                    r->flops_fraction, r->regions_per_token, r->barriers_per_token, r->matmul_share, r->idle_share,
                    r->attention_share);
        } else {
            char ts[32], bw[16] = "", frac[16] = "", gf[16] = "", gfrac[16] = "";
            snprintf(ts, sizeof ts, "%.2f ± %.2f", r->mean, r->sd);
            if (r->bw_gbs > 0.0) {
                snprintf(bw, sizeof bw, "%.1f", r->bw_gbs);
                snprintf(frac, sizeof frac, "%.1f%%", 100.0 * r->bw_fraction);
            }
            if (r->peak_gflops > 0.0) {
                snprintf(gf, sizeof gf, "%.0f", r->gflops);
                snprintf(gfrac, sizeof gfrac, "%.1f%%", 100.0 * r->flops_fraction);
            }
            /* '±' is two bytes and one column: one more byte of padding keeps the bars aligned */
            fprintf(out, "| %-14s | %7d | %22s | %10.2f | %9s | %7s | %7s | %7s |\n", r->name, r->threads, ts,
                    r->bytes_per_token / 1e6, bw, frac, gf, gfrac);
        }
        fflush(out);
    }
    bandwidth_probe_free(&probe);
    omp_set_num_threads(all);
    if (!o->json && !failed) {
        fputs("\ntok/s: the mean of -r runs ± their standard deviation.  MB/token: the weights and\n"
              "KV cache a token reads.  of bw: decode's MB/token x tok/s against the read bandwidth\n"
              "measured beside it (read GB/s); above 100%, the weights are served from the CPU's\n"
              "caches, not from memory.  of peak: prefill's FLOP/s against these threads' probed\n"
              "FMA peak.\n", out);
        fprintf(out, "\n| %-19s | %7s | %13s | %14s | %7s | %10s | %9s | %8s |\n", "where the time went",
                "threads", "regions/token", "barriers/token", "matmuls", "their idle", "attention", "the rest");
        fprintf(out, "| %-19s | %7s | %13s | %14s | %7s | %10s | %9s | %8s |\n", "-------------------",
                "------:", "------------:", "-------------:", "------:", "---------:", "--------:", "-------:");
        for (int i = 0; i < n_runs; i++) {
            const BenchResult *r = &results[i];
            char idle[16] = "";
            if (r->n_gen) snprintf(idle, sizeof idle, "%.1f%%", 100.0 * r->idle_share);
            fprintf(out, "| %-19s | %7d | %13.1f | %14.1f | %6.1f%% | %10s | %8.1f%% | %7.1f%% |\n", r->name,
                    r->threads, r->regions_per_token, r->barriers_per_token, 100.0 * r->matmul_share, idle,
                    100.0 * r->attention_share,
                    100.0 * (1.0 - r->matmul_share - r->attention_share));
        }
        fputs("\nWhere the time went, as shares of each test's measured time: regions/token, the\n"
              "parallel regions (teams of threads started and joined) of the matmuls and attention,\n"
              "or one per decoded token that runs as a team; barriers/token, where that team's\n"
              "threads wait for each other; matmuls and attention, the wall time in each; their\n"
              "idle, decode's thread-time spent waiting at the end of a matrix-vector product (load\n"
              "imbalance and the join or barrier); the rest, the work between them (norms,\n"
              "quantizing the activations, rotation, the activation functions), one thread's or\n"
              "every thread's alike, whose share grows with the threads.\n", out);
        if (most > 1 && size < SMALL_MODEL_BYTES)
            fprintf(out, "A model of %.1f MB spends more in starting %d threads than in its "
                         "matmuls: --threads 1 may be faster.\n", size / 1e6, most);
    }
    free(results);
    return failed ? -1 : 0;
}
