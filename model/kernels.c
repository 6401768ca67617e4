/* Threading, cache blocking and path selection around the per-path inner
 * loops (kernels_impl.h), plus the small row-wise kernels. */
#include "model/kernels.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/kernels_impl.h"

static const KernelPath *best_path(void) {
    if (kernels_avx512) return kernels_avx512;
    if (kernels_avx2) return kernels_avx2;
    return &kernels_portable;
}

static const KernelPath *path;

static const KernelPath *active_path(void) {
    if (!path) path = best_path();
    return path;
}

int kernels_use(const char *name) {
    const KernelPath *all[] = {&kernels_portable, kernels_avx2, kernels_avx512};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] && !strcmp(all[i]->name, name)) {
            path = all[i];
            return 0;
        }
    return -1;
}

const char *kernels_path_name(void) { return active_path()->name; }

int kernels_int8_prefill(void) { return active_path()->gemm_q8 != NULL; }

/* AMX needs the kernel's leave to use its tile state (once per process);
 * without it BF16 prefill takes AVX512-BF16's pair products if the path
 * has them, else the f32 panels, and block-quantized prefill VNNI. */
static int amx_allowed = 1;
static int amx_bf16(void) { return active_path()->bf16_amx.gemm && amx_allowed && kernels_amx_ready(); }
static int amx_int8(void) { return active_path()->gemm_q8 && active_path()->gemm_q8_amx && amx_allowed && kernels_amx_ready(); }

void kernels_allow_amx(int allow) { amx_allowed = allow; }

static size_t amx_units;
size_t kernels_amx_units(void) { return amx_units; }

int kernels_int8_amx(void) { return amx_int8(); }

const char *kernels_amx_name(void) {
    int bf16 = amx_bf16(), int8 = amx_int8();
    return bf16 && int8 ? "bf16+int8" : bf16 ? "bf16" : int8 ? "int8" : "none";
}

/* The BF16 prefill in use, NULL for the f32 panels. */
static const Bf16Prefill *bf16_prefill(void) {
    if (amx_bf16()) return &active_path()->bf16_amx;
    return active_path()->bf16_pairs.gemm ? &active_path()->bf16_pairs : NULL;
}

int kernels_bf16_activations(void) { return bf16_prefill() != NULL; }

#define FMA_PEAK_PASSES 3

double kernels_fma_peak_gflops(void) {
    long rounds = 1 << 20;
    double best = 0.0;
    for (int pass = 0; pass < FMA_PEAK_PASSES; pass++) {
        double flops = 0.0, t0 = time_now_s();
        #pragma omp parallel reduction(+ : flops)
        flops += active_path()->fma_peak(rounds);
        double t = time_now_s() - t0;
        if (t < 0.01 && pass == 0) { /* too short to time: longer, and start over */
            rounds *= 16;
            pass = -1;
            continue;
        }
        if (flops / t / 1e9 > best) best = flops / t / 1e9;
    }
    return best;
}

void kernel_copy_f32(float *dst, const void *src, size_t n) { memcpy(dst, src, n * sizeof(float)); }

/* The kernel path p lacks for type t in this use, or NULL. */
static const char *path_lacks(const KernelPath *p, TensorType t, KernelUse use) {
    if ((unsigned)t >= TENSOR_TYPE_COUNT) return "row for it";
    const TypeKernels *k = &p->type[t];
    if (use == KERNEL_USE_WEIGHTS && !k->dot && !k->dot_q8 && !k->dot_q8k)
        return "dot, dot_q8 or dot_q8k";
    if (use == KERNEL_USE_KV_CACHE && !k->dot) return "dot";
    if (use == KERNEL_USE_KV_CACHE && !k->mix) return "mix";
    if (!k->to_f32) return "to_f32";
    return NULL;
}

int kernels_check_type(TensorType t, KernelUse use, PosencError *err) {
    const KernelPath *all[] = {&kernels_portable, kernels_avx2, kernels_avx512};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *lacks = all[i] ? path_lacks(all[i], t, use) : NULL;
        if (lacks)
            return posenc_error(err, "%s %s: the %s kernels have no %s", tensor_type_name(t),
                                use == KERNEL_USE_WEIGHTS ? "weights" : "KV cache", all[i]->name,
                                lacks);
    }
    return 0;
}

/* ---- matmul -------------------------------------------------------------- */

/* A weight panel of 256 KB and a token panel of as much stay in the 1 MB
 * L2 of a core together while every row meets every token of the tile.
 * A thread's panel also holds a block of BF16 rows (Bf16Prefill's pad). */
#define PANEL_FLOATS (1 << 16)
/* Rows per matrix-vector work item: contiguous halves for two threads,
 * in steps that keep the 16-row tiles whole. */
#define GEMV_ROW_STEP 16

/* thread_done's doubles per thread: a cache line each, so the threads'
 * stamps share none. */
#define THREAD_DONE_STRIDE 8

static size_t panel_floats(int max_cols) {
    size_t pad = (size_t)PAIRS_BF16_ROWS * max_cols / 2;
    if (pad < (size_t)16 * max_cols) pad = (size_t)16 * max_cols;
    return PANEL_FLOATS > pad ? PANEL_FLOATS : pad;
}

/* One token's activations quantized, a thread's: as Q8, one int8 per
 * column, one scale and one int32 sum per 32; as Q8_K, one int8 per column,
 * one scale per 256 and one int16 sum per 16.  The quants first, on cache
 * lines, then the scales and sums; the whole a number of cache lines. */
typedef struct {
    int8_t *xq, *kq;
    float *xd, *kd;
    int32_t *xsum;
    int16_t *ksum;
} TokenActs;

/* Where each array starts in a thread's bytes, and how many they are. */
typedef struct {
    size_t kq, xd, xsum, kd, ksum, bytes;
} TokenActsLayout;

static TokenActsLayout token_acts_layout(int max_cols) {
    size_t q = ((size_t)max_cols + 63) / 64 * 64, blocks = (size_t)(max_cols / QK + 1);
    TokenActsLayout l;
    l.kq = q;
    l.xd = 2 * q;
    l.xsum = l.xd + blocks * sizeof(float);
    l.kd = l.xsum + blocks * sizeof(int32_t);
    l.ksum = l.kd + (size_t)(max_cols / QK_K + 1) * sizeof(float);
    l.bytes = (l.ksum + (size_t)(max_cols / 16 + 1) * sizeof(int16_t) + 63) / 64 * 64;
    return l;
}

static TokenActs token_acts(const MatmulScratch *s, int thread) {
    TokenActsLayout l = token_acts_layout(s->max_cols);
    char *a = s->token_acts + (size_t)thread * l.bytes;
    return (TokenActs){(int8_t *)a, (int8_t *)(a + l.kq), (float *)(a + l.xd), (float *)(a + l.kd),
                       (int32_t *)(a + l.xsum), (int16_t *)(a + l.ksum)};
}

/* Prefill of block-quantized weights quantizes this many tokens at a time
 * and fills each unit of weight rows once per that many. */
#define QUANT_TOKENS 512

/* A chunk's activations as QuantActs; a unit's u bytes, and its d and m. */
static size_t acts_scale_bytes(int max_cols) { return (size_t)QUANT_TOKENS * (max_cols / QK) * sizeof(float); }
static size_t acts_sum_bytes(int max_cols) { return (size_t)QUANT_TOKENS * (max_cols / 16) * sizeof(int32_t); }
static size_t acts_bytes(int max_cols) {
    return acts_scale_bytes(max_cols) + acts_sum_bytes(max_cols) + (size_t)QUANT_TOKENS * max_cols;
}
/* QUANT_TOKENS tokens rounded to BF16 (gemm_bf16). */
static size_t xbf_bytes(int max_cols) { return (size_t)QUANT_TOKENS * max_cols * sizeof(uint16_t); }
static size_t unit_bytes(int max_cols) {
    return (size_t)UNIT_ROWS * max_cols + 2 * (size_t)(max_cols / QK) * 64 * sizeof(float);
}

size_t matmul_scratch_bytes(int max_cols) {
    return (panel_floats(max_cols) * sizeof(float) + unit_bytes(max_cols) + token_acts_layout(max_cols).bytes) *
               (size_t)omp_get_max_threads() +
           acts_bytes(max_cols) + xbf_bytes(max_cols);
}

int matmul_scratch_build(MatmulScratch *s, int max_cols, PosencError *err) {
    memset(s, 0, sizeof *s);
    s->n_threads = omp_get_max_threads();
    active_path(); /* chosen here, before the threads of a team all ask for it */
    s->max_cols = max_cols;
    s->panel_floats = panel_floats(max_cols);
    s->panel = malloc_lines(s->panel_floats * sizeof(float) * (size_t)s->n_threads);
    s->token_acts = malloc_lines(token_acts_layout(max_cols).bytes * (size_t)s->n_threads);
    s->acts = malloc(sizeof *s->acts);
    s->acts_data = malloc_lines(acts_bytes(max_cols));
    s->xbf = malloc_lines(xbf_bytes(max_cols));
    s->units = calloc((size_t)s->n_threads, sizeof *s->units);
    s->units_data = malloc_lines(unit_bytes(max_cols) * (size_t)s->n_threads);
    s->thread_done = malloc_lines((size_t)s->n_threads * THREAD_DONE_STRIDE * sizeof(double));
    s->thread_idle = malloc_lines((size_t)s->n_threads * THREAD_DONE_STRIDE * sizeof(double));
    if (!s->thread_done || !s->thread_idle || !s->panel || !s->token_acts || !s->acts || !s->acts_data ||
        !s->xbf || !s->units || !s->units_data) {
        matmul_scratch_free(s);
        return posenc_error_oom(err, s->panel_floats * (size_t)s->n_threads, sizeof(float),
                                "the matmul panels");
    }
    memset(s->thread_idle, 0, (size_t)s->n_threads * THREAD_DONE_STRIDE * sizeof(double));
    /* f32 arrays first, then the bytes: every array stays aligned */
    char *a = s->acts_data;
    *s->acts = (QuantActs){max_cols, (int8_t *)(a + acts_scale_bytes(max_cols) + acts_sum_bytes(max_cols)),
                           (float *)a, (int32_t *)(a + acts_scale_bytes(max_cols))};
    for (int t = 0; t < s->n_threads; t++) {
        char *u = s->units_data + unit_bytes(max_cols) * (size_t)t;
        size_t scales = (size_t)(max_cols / QK) * 64;
        s->units[t].d = (float *)u;
        s->units[t].m = (float *)u + scales;
        s->units[t].q = (uint8_t *)(u + 2 * scales * sizeof(float));
    }
    return 0;
}

void matmul_scratch_free(MatmulScratch *s) {
    free(s->panel);
    free(s->token_acts);
    free(s->acts);
    free(s->acts_data);
    free(s->xbf);
    free(s->units);
    free(s->units_data);
    free(s->thread_done);
    free(s->thread_idle);
    memset(s, 0, sizeof *s);
}

int matmul_scratch_threads(const MatmulScratch *s) {
    int t = omp_get_max_threads();
    return t < s->n_threads ? t : s->n_threads;
}

static int n_threads_for(const MatmulScratch *s, size_t macs) {
    return macs < PARALLEL_MIN_MACS ? 1 : matmul_scratch_threads(s);
}

/* Whether decode reads w's packed copy on the path in use; the group that
 * holds row r0 (a multiple of PACK_ROWS). */
static int packed(const Tensor *w) { return w->packed && active_path()->type[w->type].dot_packed; }
static const void *packed_group(const Tensor *w, int r0) {
    return (const char *)w->packed + (size_t)(r0 / PACK_ROWS) * pack_group_bytes(w->type, w->cols);
}

/* Block-quantized weights are dotted with activations quantized to Q8
 * blocks or, the K-quants, to Q8_K super-blocks (a), on their packed copy
 * when they have one (r0 is a multiple of PACK_ROWS); the others with the
 * f32 activations (a->x). */
static void gemv_rows(float *out, const DecodeActs *a, const Tensor *w, int r0, int r1) {
    const TypeKernels *tk = &active_path()->type[w->type];
    int k = w->cols;
    const void *rows = tensor_row(w, r0);
    size_t row_bytes = tensor_row_bytes(w->type, (size_t)k);
    if (packed(w))
        tk->dot_packed(out + r0, a, packed_group(w, r0), r1 - r0, k);
    else if (tk->dot_q8)
        tk->dot_q8(out + r0, a->q, a->d, rows, row_bytes, r1 - r0, k);
    else if (tk->dot_q8k)
        tk->dot_q8k(out + r0, a->kq, a->kd, a->ksum, rows, row_bytes, r1 - r0, k);
    else
        tk->dot(out + r0, 0, a->x, 0, rows, (size_t)k, 1, r1 - r0, k);
}

/* x quantized into t as the matrices' kernels read it, and the view of
 * both that they take. */
static DecodeActs gemv_quantize(const TokenActs *t, const float *x, const Tensor *const *ws, int count) {
    int q8 = 0, q8k = 0, q8_packed = 0;
    for (int i = 0; i < count; i++) {
        q8 |= active_path()->type[ws[i]->type].dot_q8 != NULL;
        q8k |= active_path()->type[ws[i]->type].dot_q8k != NULL;
        q8_packed |= active_path()->type[ws[i]->type].dot_q8 && packed(ws[i]);
    }
    if (q8) active_path()->quantize_q8(t->xq, t->xd, x, ws[0]->cols);
    if (q8_packed) quant_sums(t->xsum, t->xq, ws[0]->cols, QK); /* the packed Q4_0 kernel's centre term */
    if (q8k) active_path()->quantize_q8k(t->kq, t->kd, t->ksum, x, ws[0]->cols);
    return (DecodeActs){t->xq, t->xd, t->xsum, t->kq, t->kd, t->ksum, x};
}

/* Thread `thread` of `threads`' share of several matrices over the same
 * x: their rows laid end to end in steps of GEMV_ROW_STEP and split by
 * bytes, so the threads stream from the first row to the last without a
 * barrier between matrices, each reading as many bytes (in Q4_K_M, the q
 * and k of Q4_K beside a v of Q6_K, half again as wide: an even split by
 * rows left one thread a third more to read).  A thread's steps are those
 * that start in its part of the bytes. */
static void gemv_share(float *const *outs, const DecodeActs *a, const Tensor *const *ws, int count, int thread,
                       int threads) {
    int steps[MATMUL_MANY_MAX];
    size_t step_bytes[MATMUL_MANY_MAX], all_bytes = 0;
    for (int i = 0; i < count; i++) {
        steps[i] = (ws[i]->rows + GEMV_ROW_STEP - 1) / GEMV_ROW_STEP;
        step_bytes[i] = GEMV_ROW_STEP * tensor_row_bytes(ws[i]->type, (size_t)ws[i]->cols);
        all_bytes += (size_t)steps[i] * step_bytes[i];
    }
    size_t lo = all_bytes * (size_t)thread / (size_t)threads, hi = all_bytes * (size_t)(thread + 1) / (size_t)threads;
    size_t base = 0;
    for (int i = 0; i < count && base < hi; i++) {
        size_t first = lo > base ? (lo - base + step_bytes[i] - 1) / step_bytes[i] : 0;
        size_t last = (hi - base + step_bytes[i] - 1) / step_bytes[i];
        if (first > (size_t)steps[i]) first = (size_t)steps[i];
        if (last > (size_t)steps[i]) last = (size_t)steps[i];
        int r0 = (int)first * GEMV_ROW_STEP, r1 = (int)last * GEMV_ROW_STEP < ws[i]->rows ? (int)last * GEMV_ROW_STEP : ws[i]->rows;
        if (r0 < r1) gemv_rows(outs[i], a, ws[i], r0, r1);
        base += (size_t)steps[i] * step_bytes[i];
    }
}

/* Decode outside a team: x quantized once, then a region of its own. */
static void gemv(float *const *outs, const float *x, const Tensor *const *ws, int count,
                 MatmulScratch *s) {
    TokenActs first = token_acts(s, 0);
    DecodeActs a = gemv_quantize(&first, x, ws, count);
    int steps = 0;
    for (int i = 0; i < count; i++) steps += (ws[i]->rows + GEMV_ROW_STEP - 1) / GEMV_ROW_STEP;
    int nt = n_threads_for(s, (size_t)steps * GEMV_ROW_STEP * ws[0]->cols), team = 1;
    double t0 = time_now_s();
    #pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num();
        if (t == 0) team = omp_get_num_threads();
        gemv_share(outs, &a, ws, count, t, omp_get_num_threads());
        s->thread_done[t * THREAD_DONE_STRIDE] = time_now_s() - t0;
    }
    double wall = time_now_s() - t0;
    s->stats.seconds += wall;
    if (team > 1) {
        s->stats.regions++;
        for (int t = 0; t < team; t++) s->stats.idle_seconds += wall - s->thread_done[t * THREAD_DONE_STRIDE];
    }
}

void matmul_team(float *const *outs, const float *x, const Tensor *const *ws, int count, MatmulScratch *s) {
    int t = omp_get_thread_num();
    TokenActs own = token_acts(s, t);
    DecodeActs a = gemv_quantize(&own, x, ws, count);
    double t0 = time_now_s();
    gemv_share(outs, &a, ws, count, t, omp_get_num_threads());
    double done = time_now_s();
    #pragma omp barrier
    double end = time_now_s();
    s->thread_idle[t * THREAD_DONE_STRIDE] += end - done;
    if (t == 0) {
        s->stats.seconds += end - t0;
        s->stats.barriers++;
    }
}

void matmul_team_end(MatmulScratch *s) {
    int t = omp_get_thread_num();
    #pragma omp atomic
    s->stats.idle_seconds += s->thread_idle[t * THREAD_DONE_STRIDE];
    s->thread_idle[t * THREAD_DONE_STRIDE] = 0.0;
}

/* Work item (row panel, token panel); a panel of f16/bf16/quantized rows is
 * converted to f32 once per thread and reused for the following items
 * that share it. */
static void gemm(float *out, const float *x, const Tensor *w, int n, MatmulScratch *s) {
    const KernelPath *p = active_path();
    int rows = w->rows, k = w->cols;
    int mc_max = (int)(s->panel_floats / (size_t)k) / 16 * 16;
    if (mc_max < 16) mc_max = 16;
    int n_rp = (rows + mc_max - 1) / mc_max;
    int mc = ((rows + n_rp - 1) / n_rp + 15) / 16 * 16; /* equal panels */
    int nc = PANEL_FLOATS / k / 4 * 4;
    if (nc < 16) nc = 16;
    if (nc > 128) nc = 128;
    int n_tp = (n + nc - 1) / nc;
    int items = n_rp * n_tp;
    int nt = n_threads_for(s, (size_t)rows * k * n);
    s->stats.regions += nt > 1;
    #pragma omp parallel num_threads(nt)
    {
        float *panel = s->panel + (size_t)omp_get_thread_num() * s->panel_floats;
        int have = -1;
        #pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < items; it++) {
            int rp = it / n_tp, tp = it % n_tp;
            int r0 = rp * mc, r1 = r0 + mc < rows ? r0 + mc : rows;
            int t0 = tp * nc, t1 = t0 + nc < n ? t0 + nc : n;
            const float *wf = tensor_row(w, r0);
            if (w->type != TENSOR_F32) {
                if (have != rp) p->type[w->type].to_f32(panel, wf, (size_t)(r1 - r0) * k);
                have = rp;
                wf = panel;
            }
            p->type[TENSOR_F32].dot(out + (size_t)t0 * rows + r0, (size_t)rows, x + (size_t)t0 * k,
                                    (size_t)k, wf, (size_t)k, t1 - t0, r1 - r0, k);
        }
    }
}

/* Packed F32 rows (kernels_impl.h): work items of PACKED_PANEL_ROWS rows
 * by PACKED_PANEL_TOKENS tokens, whose weights (384 KB at k = 768) and
 * activations stay in a core's L2.  Of its neighbours (half or twice the
 * rows or the tokens), 128 x 24 keeps the three GEMMs of a 110M-shaped
 * layer (k = 768 with 768 and 2048 rows, k = 2048) nearest the FMA peak;
 * 256 rows fall behind at k = 2048, where their weights (2 MB) overflow
 * L2. */
#define PACKED_PANEL_ROWS 128
#define PACKED_PANEL_TOKENS 24
static void gemm_packed(float *out, const float *x, const Tensor *w, int n, MatmulScratch *s) {
    int rows = w->rows, k = w->cols;
    int n_rp = (rows + PACKED_PANEL_ROWS - 1) / PACKED_PANEL_ROWS;
    int n_tp = (n + PACKED_PANEL_TOKENS - 1) / PACKED_PANEL_TOKENS, items = n_rp * n_tp;
    const TypeKernels *tk = &active_path()->type[w->type];
    int threads = n_threads_for(s, (size_t)rows * k * n);
    s->stats.regions += threads > 1;
    #pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int it = 0; it < items; it++) {
        int r0 = it / n_tp * PACKED_PANEL_ROWS, t0 = it % n_tp * PACKED_PANEL_TOKENS;
        int m = rows - r0 < PACKED_PANEL_ROWS ? rows - r0 : PACKED_PANEL_ROWS;
        int nt = n - t0 < PACKED_PANEL_TOKENS ? n - t0 : PACKED_PANEL_TOKENS;
        tk->gemm_packed(out + (size_t)t0 * rows + r0, (size_t)rows, x + (size_t)t0 * k, (size_t)k,
                        packed_group(w, r0), nt, m, k);
    }
}

/* BF16 weights with the activations rounded to BF16 (Bf16Prefill), for
 * `count` matrices of the same width (q, k, v; gate, up): per QUANT_TOKENS
 * tokens the activations are rounded once (in parallel) for all of them,
 * then each thread multiplies blocks of rows, of any of the matrices, with
 * every token of the chunk (rounded per matrix, the same rounding would be
 * repeated for each). */
static void gemm_bf16(float *const *outs, const float *x, const Tensor *const *ws, int count, int n,
                      const Bf16Prefill *bp, MatmulScratch *s) {
    int k = ws[0]->cols, blocks = 0;
    size_t rows_all = 0;
    for (int i = 0; i < count; i++) {
        blocks += (ws[i]->rows + bp->rows - 1) / bp->rows;
        rows_all += (size_t)ws[i]->rows;
    }
    for (int t0 = 0; t0 < n; t0 += QUANT_TOKENS) {
        int tokens = n - t0 < QUANT_TOKENS ? n - t0 : QUANT_TOKENS;
        int nt = n_threads_for(s, rows_all * k * tokens);
        s->stats.regions += nt > 1;
        #pragma omp parallel num_threads(nt)
        {
            int th = omp_get_thread_num(), ths = omp_get_num_threads();
            bp->round(s->xbf, x + (size_t)t0 * k, tokens, k, tokens * th / ths / 16 * 16,
                      th + 1 == ths ? tokens : tokens * (th + 1) / ths / 16 * 16);
            #pragma omp barrier
            uint16_t *pad = (uint16_t *)(s->panel + (size_t)th * s->panel_floats);
            #pragma omp for schedule(dynamic, 1)
            for (int it = 0; it < blocks; it++) {
                int i = 0, b = it;
                while (b >= (ws[i]->rows + bp->rows - 1) / bp->rows) b -= (ws[i++]->rows + bp->rows - 1) / bp->rows;
                int rows = ws[i]->rows, r0 = b * bp->rows, r1 = r0 + bp->rows < rows ? r0 + bp->rows : rows;
                bp->gemm(outs[i] + (size_t)t0 * rows, (size_t)rows, s->xbf, ws[i]->data, (size_t)k, r0, r1, tokens, k,
                         pad);
            }
        }
    }
}

/* Block-quantized weights on a path with an int8 product: per QUANT_TOKENS
 * tokens, the activations are quantized once (in parallel), then every
 * unit of UNIT_ROWS rows of every matrix is filled once, by the thread that
 * multiplies it with all those tokens while it sits in that core's cache.
 * Each output is one thread's, computed the same way whatever the tile, so
 * the result depends on neither the threads nor the chunking. */
static void gemm_quant(float *const *outs, const float *x, const Tensor *const *ws, int count, int n,
                       MatmulScratch *s) {
    const KernelPath *p = active_path();
    int k = ws[0]->cols, units = 0;
    for (int i = 0; i < count; i++) units += (ws[i]->rows + UNIT_ROWS - 1) / UNIT_ROWS;
    for (int t0 = 0; t0 < n; t0 += QUANT_TOKENS) {
        int tokens = n - t0 < QUANT_TOKENS ? n - t0 : QUANT_TOKENS;
        int nt = n_threads_for(s, (size_t)units * UNIT_ROWS * k * tokens);
        QuantActs *a = s->acts;
        a->k = k;
        int amx = amx_int8();
        s->stats.regions += nt > 1;
        #pragma omp parallel num_threads(nt)
        {
            /* AMX's tile reads 16 tokens: under 16, zeros (not stale values) in
             * the rows it reads past the chunk, whose outputs are not stored */
            int rows_read = amx && tokens < 16 ? 16 : tokens;
            #pragma omp for schedule(static)
            for (int t = 0; t < rows_read; t++) {
                if (t >= tokens) {
                    memset(a->q + (size_t)t * k, 0, (size_t)k);
                    memset(a->d + (size_t)t * (k / QK), 0, (size_t)(k / QK) * sizeof(float));
                    continue;
                }
                p->quantize_q8(a->q + (size_t)t * k, a->d + (size_t)t * (k / QK), x + (size_t)(t0 + t) * k, k);
                quant_sums(a->sum + (size_t)t * (k / 16), a->q + (size_t)t * k, k, 16);
            }
            QuantUnit *u = &s->units[omp_get_thread_num()];
            #pragma omp for schedule(dynamic, 1)
            for (int it = 0; it < units; it++) {
                int i = 0, j = it;
                while (j >= (ws[i]->rows + UNIT_ROWS - 1) / UNIT_ROWS) j -= (ws[i++]->rows + UNIT_ROWS - 1) / UNIT_ROWS;
                const Tensor *w = ws[i];
                int r0 = j * UNIT_ROWS, rows = w->rows - r0 < UNIT_ROWS ? w->rows - r0 : UNIT_ROWS;
                /* on AMX only the centred types with one scale per block: half
                 * blocks take two products and two stores per block, and a min
                 * one more multiply-add per output, which cost AMX more than
                 * its products gain over VNNI's */
                quant_unit_kind(u, w->type, k);
                int on_amx = amx && !u->split && !u->has_min;
                size_t row_bytes = tensor_row_bytes(w->type, (size_t)k);
                if (w->packed && w->type == TENSOR_Q8_0 && p->unit_fill_packed_q8_0)
                    p->unit_fill_packed_q8_0(u, packed_group(w, r0), rows, k);
                else if (w->packed) /* the mapped rows then stay untouched after load */
                    quant_unit_fill_packed(u, w->type, packed_group(w, r0), rows, k);
                else if (w->type == TENSOR_Q8_0 && p->unit_fill_q8_0)
                    p->unit_fill_q8_0(u, tensor_row(w, r0), row_bytes, rows, k, on_amx);
                else
                    quant_unit_fill(u, w->type, tensor_row(w, r0), row_bytes, rows, k);
                if (on_amx) {
                    if (!u->centred) quant_unit_centre(u);
                    #pragma omp atomic
                    amx_units++;
                    p->gemm_q8_amx(outs[i] + (size_t)t0 * w->rows + r0, (size_t)w->rows, u, rows, a, 0, tokens);
                } else {
                    p->gemm_q8(outs[i] + (size_t)t0 * w->rows + r0, (size_t)w->rows, u, rows, a, 0, tokens);
                }
            }
        }
    }
}

size_t kernels_packed_bytes(const Tensor *w) {
    size_t group = pack_group_bytes(w->type, w->cols);
    if (!active_path()->type[w->type].dot_packed || !group) return 0;
    size_t groups = ((size_t)w->rows + PACK_ROWS - 1) / PACK_ROWS;
    return groups > SIZE_MAX / group ? SIZE_MAX : groups * group;
}

_Static_assert(PACK_ROWS == KERNELS_PACK_ROWS, "kernels.h's count of packed rows is kernels_impl.h's");

Tensor kernels_rows(const Tensor *w, int first, int n) {
    Tensor view = tensor_rows(w, first, n);
    if (w->packed && first % PACK_ROWS == 0) view.packed = packed_group(w, first);
    return view;
}

void kernels_pack(void *dst, const Tensor *w) {
    size_t group = pack_group_bytes(w->type, w->cols), row_bytes = tensor_row_bytes(w->type, (size_t)w->cols);
    int groups = (w->rows + PACK_ROWS - 1) / PACK_ROWS;
    #pragma omp parallel for schedule(static) if (groups > 64)
    for (int g = 0; g < groups; g++) {
        int r0 = g * PACK_ROWS, n = w->rows - r0 < PACK_ROWS ? w->rows - r0 : PACK_ROWS;
        pack_group(w->type, (char *)dst + (size_t)g * group, tensor_row(w, r0), row_bytes, n, w->cols);
    }
}

static int quantized(const Tensor *w) {
    const TypeKernels *tk = &active_path()->type[w->type];
    return tk->dot_q8 || tk->dot_q8k;
}

void matmul(float *out, const float *x, const Tensor *w, int n, MatmulScratch *s) {
    matmul_many(&out, x, &w, 1, n, s);
}

/* A chunk of n > 1 tokens. */
static void matmul_chunk(float *const *outs, const float *x, const Tensor *const *ws, int count, int n,
                         MatmulScratch *s) {
    float *q_outs[MATMUL_MANY_MAX], *b_outs[MATMUL_MANY_MAX];
    const Tensor *q_ws[MATMUL_MANY_MAX], *b_ws[MATMUL_MANY_MAX];
    int nq = 0, nb = 0;
    for (int i = 0; i < count; i++)
        if (active_path()->gemm_q8 && quantized(ws[i]) && nq < MATMUL_MANY_MAX) {
            q_outs[nq] = outs[i];
            q_ws[nq++] = ws[i];
        } else if (ws[i]->type == TENSOR_BF16 && ws[i]->cols % 32 == 0 && bf16_prefill() && nb < MATMUL_MANY_MAX) {
            b_outs[nb] = outs[i];
            b_ws[nb++] = ws[i];
        } else if (packed(ws[i]) && active_path()->type[ws[i]->type].gemm_packed) {
            gemm_packed(outs[i], x, ws[i], n, s);
        } else {
            gemm(outs[i], x, ws[i], n, s);
        }
    if (nq) gemm_quant(q_outs, x, q_ws, nq, n, s);
    if (nb) gemm_bf16(b_outs, x, b_ws, nb, n, bf16_prefill(), s);
}

void matmul_many(float *const *outs, const float *x, const Tensor *const *ws, int count, int n,
                 MatmulScratch *s) {
    if (n == 1) { /* its stats count the region alone: the activations are quantized before it, serially */
        gemv(outs, x, ws, count, s);
        return;
    }
    double t0 = time_now_s();
    matmul_chunk(outs, x, ws, count, n, s);
    s->stats.seconds += time_now_s() - t0;
}

void dot_rows(float *out, size_t ldo, const float *x, size_t ldx, TensorType wt, const void *w,
              size_t ldw, int n, int m, int k) {
    active_path()->type[wt].dot(out, ldo, x, ldx, w, ldw, n, m, k);
}

void mix_rows(float *out, size_t ldo, const float *p, size_t ldp, TensorType vt, const void *v,
              size_t ldv, int n, int cells, int hs) {
    active_path()->type[vt].mix(out, ldo, p, ldp, v, ldv, n, cells, hs);
}

void convert_to_f16(uint16_t *dst, const float *src, size_t n) { active_path()->to_f16(dst, src, n); }

void convert_to_f32(float *dst, const void *src, TensorType t, size_t n) {
    active_path()->type[t].to_f32(dst, src, n);
}

/* ---- row-wise kernels ------------------------------------------------------ */

void add_bias(float *y, const float *b, int n, int width) {
    if (!b) return;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < width; i++) y[(size_t)t * width + i] += b[i];
}

void rmsnorm(float *out, const float *x, const float *w, int dim, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < dim; i++) ss += x[i] * x[i];
    ss /= (float)dim;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int i = 0; i < dim; i++) out[i] = w[i] * (ss * x[i]);
}

void layernorm(float *out, const float *x, const float *w, const float *b, int dim, float eps) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < dim; i++) mean += x[i];
    mean /= dim;
    for (int i = 0; i < dim; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= dim;
    float inv = (float)(1.0 / sqrt(var + eps));
    for (int i = 0; i < dim; i++) out[i] = ((float)(x[i] - mean) * inv) * w[i] + (b ? b[i] : 0.0f);
}

void quantize_q8k(int8_t *q, float *d, int16_t *sum, const float *x, int k) {
    active_path()->quantize_q8k(q, d, sum, x, k);
}

void softmax(float *x, int n) { active_path()->softmax(x, n); }

float sum_exp(const float *x, int n, float *max) { return active_path()->sum_exp(x, n, max); }

float exp_sum(float *x, int n, float max) { return active_path()->exp_sum(x, n, max); }

float exp_sum_running(float *x, int n, float *max) {
    float top = active_path()->max_of(x, n);
    if (top > *max) *max = top;
    if (*max == -INFINITY) { /* nothing visible yet: weights 0 */
        memset(x, 0, (size_t)n * sizeof(float));
        return 0.0f;
    }
    return active_path()->exp_sum(x, n, *max);
}

void swiglu(float *h, const float *g, int n) { active_path()->swiglu(h, g, n); }

void gelu(float *h, int n) { active_path()->gelu(h, n); }

void gelu_erf(float *h, int n) {
    for (int i = 0; i < n; i++) h[i] = 0.5f * h[i] * (1.0f + erff(h[i] * 0.70710678118654752f));
}
