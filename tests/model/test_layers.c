/* Position per layer (Model.layers), rope scaling as Hugging Face computes
 * it, and today's families.  tools/hf_tiny.py's tiny random checkpoints
 * (Llama 3.1's llama3 scaling, YaRN with and without rounding of its
 * correction range, dynamic NTK, SmolLM3's NoPE layers, Phi-3's LongRoPE
 * over a partial rotary with a sliding window; Qwen3's per-head QK-norm,
 * Gemma 2's soft-caps and sandwich norms, Gemma 3's 5 local layers (theta
 * 10000, window 8) to a global one (theta 1e6, linear x8), OLMo 2's
 * post-norms and whole-projection QK-norm, Granite's multipliers, StableLM
 * 2's partial rotary, LayerNorm, qkv bias and per-head q/k LayerNorm in a
 * parallel block, Command R7B's parallel block with 3 sliding RoPE layers
 * to a global NoPE one, EXAONE 4's hybrid with llama3 scaling; the
 * mixtures of experts, gpt-oss's learned sinks, biases, clamped SwiGLU and
 * sliding/full layers among them), converted with tools/convert.py and
 * run by the engine over 80 tokens (past the original context of 32) in one
 * chunk, token by token, in two chunks and at an offset, against
 *   - tools/hf_reference.py, a float64 NumPy forward written from the
 *     Hugging Face modeling code, at every position, and
 *   - transformers 5.17's own logits for the same bits
 *     (tests/fixtures/hf_golden/<case>.json, made by tools/hf_golden.py).
 * Each feature's negative control must fail: the reference with the feature
 * broken, and the engine misconfigured (the YaRN paper's ramp, no scaling,
 * a NoPE layer rotated, dynamic NTK without the state transformers keeps,
 * LongRoPE's factors chosen by the context as llama.cpp does).
 * The cache: a context shift re-rotates the rotating layers only (control:
 * rotating the NoPE layer's keys too fails), and recomputes where the
 * rotation follows the sequence's length. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/shift.h"
#include "modes/bench.h"
#include "tests/common.h"

/* float32 engine vs float64: logits |l| <= 32 after two to six layers
 * agree to 1e-4 (measured: at most 1.6e-5).  Float rounding is relative:
 * a case whose logits reach further (Gemma 3's embeddings x 8 into a tied
 * head give |l| up to 53; measured 8.3e-5 there) gets the bound scaled by
 * its largest logit over 32 (tolerance()). */
#define LOGIT_TOL 1e-4f
#define LOGIT_TOL_SCALE 32.0f
/* A broken feature moves logits by far more (each failure prints it). */
#define CONTROL_MIN 1e-2f

#define N_TOKENS 80
#define VOCAB 256
#define SPLIT_AT 50 /* tools/hf_tiny.py's SPLIT_AT and OFFSET */
#define OFFSET 7

typedef struct {
    const char *name; /* tools/hf_tiny.py's case */
    const char *arch; /* the GGUF architecture convert.py writes */
} Case;

static const Case CASES[] = {
    {"llama3", "llama"},        {"llama_yarn", "llama"}, {"llama_yarn_untruncated", "llama"},
    {"llama_dynamic", "llama"}, {"smollm3", "smollm3"},      {"phi3", "phi3"},
    {"qwen3", "qwen3"},         {"gemma2", "gemma2"},         {"gemma3", "gemma3"},
    {"olmo2", "olmo2"},         {"granite", "granite"},       {"stablelm", "stablelm"},
    {"stablelm_parallel", "stablelm"}, {"cohere2", "cohere2"}, {"exaone4", "exaone4"},
    {"qwen3_moe", "qwen3moe"},  {"olmoe", "olmoe"},           {"granitemoe", "granitemoe"},
    {"gpt_oss", "gpt-oss"},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

/* The reference's controls: hf_reference.py --break on a case. */
static const struct {
    const char *name, *broken;
} CONTROLS[] = {
    {"llama3", "rope-default"},     {"llama_yarn", "yarn-paper"},
    {"llama_yarn_untruncated", "yarn-paper"}, {"llama_dynamic", "rope-default"},
    {"smollm3", "nope-rotated"},    {"phi3", "long-factors-short"},
    {"phi3", "no-window"},          {"qwen3", "qk-norm"},
    {"gemma2", "softcap"},          {"gemma2", "post-norm"},
    {"gemma2", "no-window"},        {"gemma3", "shared-theta"},
    {"gemma3", "qk-norm"},          {"gemma3", "no-window"},
    {"olmo2", "qk-norm"},           {"olmo2", "post-norm"},
    {"granite", "multipliers"},     {"stablelm", "full-rotary"},
    {"stablelm_parallel", "parallel"}, {"stablelm_parallel", "qk-norm"},
    {"cohere2", "nope-rotated"},    {"cohere2", "parallel"},
    {"cohere2", "no-window"},       {"exaone4", "nope-rotated"},
    {"exaone4", "qk-norm"},         {"exaone4", "post-norm"},
    {"exaone4", "rope-default"},
    /* the mixtures of experts' routers (qwen3_moe renormalises, so its softmax is the
     * same on either side of the top k) */
    {"qwen3_moe", "topk-norm"},     {"qwen3_moe", "top1"},
    {"olmoe", "topk-norm"},         {"olmoe", "softmax-side"},
    {"olmoe", "top1"},              {"olmoe", "qk-norm"},
    {"granitemoe", "softmax-side"}, {"granitemoe", "top1"},
    {"granitemoe", "multipliers"},
    /* gpt-oss: its learned sinks, its router's bias and its sliding layers (the clamp
     * binds only in gpt_oss_hot: clamp_controls) */
    {"gpt_oss", "sinks"},           {"gpt_oss", "router-bias"},
    {"gpt_oss", "no-window"},       {"gpt_oss", "top1"},
};
#define N_CONTROLS ((int)(sizeof CONTROLS / sizeof CONTROLS[0]))

/* gpt_oss with its experts' gate_up_proj x 3 (tools/hf_tiny.py's VARIANTS): the
 * clamped SwiGLU's limit binds there; no golden, the reference only. */
#define HOT "gpt_oss_hot"

static int ids[N_TOKENS];
static char ggufs[N_CASES][160], hot_gguf[160];
static int ready = 0;

static void setup(void) {
    if (!tests_python_available("per-layer positions and rope scaling")) return;
    for (int c = 0; c < N_CASES; c++)
        snprintf(ggufs[c], sizeof ggufs[c], "%s", tests_make_hf_case(CASES[c].name));
    snprintf(hot_gguf, sizeof hot_gguf, "%s", tests_make_hf_case(HOT));
    TestsRun r = tests_run_python_ok(
        (const char *[]){"tools/hf_tiny.py", "golden", "llama3", "ids", NULL});
    char *s = r.out;
    for (int i = 0; i < N_TOKENS; i++) ids[i] = (int)strtol(s, &s, 10);
    tests_run_free(&r);
    ready = 1;
}

static void teardown(void) {}

static int case_index(const char *name) {
    for (int c = 0; c < N_CASES; c++)
        if (!strcmp(CASES[c].name, name)) return c;
    ck_abort_msg("%s is not in CASES", name);
    return -1;
}

/* n rows of VOCAB numbers from a program's output; a row may start with
 * its position (`positions`: filled, else NULL). */
static float *parse_rows(const char *out, int n, int *positions) {
    float *rows = malloc(sizeof(float) * (size_t)n * VOCAB);
    const char *s = out;
    for (int r = 0; r < n; r++) {
        char *end;
        if (positions) positions[r] = (int)strtol(s, &end, 10), s = end;
        for (int i = 0; i < VOCAB; i++, s = end) {
            rows[(size_t)r * VOCAB + i] = strtof(s, &end);
            ck_assert_msg(end != s, "row %d ends after %d numbers", r, i);
        }
    }
    return rows;
}

/* hf_reference.py's logits (N_TOKENS, VOCAB) of tools/hf_tiny.py's checkpoint
 * `name`. */
static float *reference_of(const char *name, const char *mode, int pos0, const char *broken) {
    char list[N_TOKENS * 4 + 1] = "", p0[16], dir[160];
    for (int i = 0; i < N_TOKENS; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? "," : "", ids[i]);
    snprintf(p0, sizeof p0, "%d", pos0);
    snprintf(dir, sizeof dir, "build/hf/%s", name);
    const char *args[] = {"tools/hf_reference.py", "logits", dir, "--ids", list, "--pos0", p0,
                          "--mode", mode, broken ? "--break" : NULL, broken, NULL};
    TestsRun r = tests_run_python_ok(args);
    float *rows = parse_rows(r.out, N_TOKENS, NULL);
    tests_run_free(&r);
    return rows;
}

static float *reference(int c, const char *mode, int pos0, const char *broken) {
    return reference_of(CASES[c].name, mode, pos0, broken);
}

/* transformers' logits of one run of tools/hf_golden.py: *n rows at the
 * positions (indexes into the 80 tokens) in positions[]. */
static float *golden(int c, const char *run, int *positions, int *n) {
    TestsRun r = tests_run_python_ok(
        (const char *[]){"tools/hf_tiny.py", "golden", CASES[c].name, run, NULL});
    *n = 0;
    for (const char *s = r.out; *s; s++) *n += *s == '\n';
    float *rows = parse_rows(r.out, *n, positions);
    tests_run_free(&r);
    return rows;
}

typedef enum { RUN_CHUNK, RUN_STEPS, RUN_SPLIT } RunKind;

/* The engine's logits (N_TOKENS, VOCAB) in a context already built. */
static float *engine_run(Context *ctx, RunKind kind, int pos0) {
    float *out = malloc(sizeof(float) * N_TOKENS * VOCAB);
    size_t row = VOCAB * sizeof(float);
    if (kind == RUN_CHUNK) {
        memcpy(out, context_forward(ctx, ids, N_TOKENS, pos0, 1), N_TOKENS * row);
    } else if (kind == RUN_STEPS) {
        for (int t = 0; t < N_TOKENS; t++)
            memcpy(out + (size_t)t * VOCAB, context_forward(ctx, ids + t, 1, pos0 + t, 0), row);
    } else {
        memcpy(out, context_forward(ctx, ids, SPLIT_AT, pos0, 1), SPLIT_AT * row);
        memcpy(out + (size_t)SPLIT_AT * VOCAB,
               context_forward(ctx, ids + SPLIT_AT, N_TOKENS - SPLIT_AT, pos0 + SPLIT_AT, 1),
               (N_TOKENS - SPLIT_AT) * row);
    }
    return out;
}

/* The same in a fresh context of the model's scheme (p: NULL) or of p. */
static float *engine(const Model *m, const PeParams *p, RunKind kind, int pos0) {
    Context ctx;
    tests_build_context(&ctx, m, p ? p : &m->pe, 128);
    float *out = engine_run(&ctx, kind, pos0);
    context_free(&ctx);
    return out;
}

static float tolerance(const float *ref, size_t n) {
    float top = 0.0f;
    for (size_t i = 0; i < n; i++) top = fabsf(ref[i]) > top ? fabsf(ref[i]) : top;
    return top > LOGIT_TOL_SCALE ? LOGIT_TOL * top / LOGIT_TOL_SCALE : LOGIT_TOL;
}

/* max |a[pos] - b[row]| over the golden's rows. */
static float rows_diff(const float *all, const float *rows, const int *positions, int n) {
    float d = 0.0f;
    for (int r = 0; r < n; r++) {
        float dr = tests_max_abs_diff(all + (size_t)positions[r] * VOCAB, rows + (size_t)r * VOCAB,
                                      VOCAB);
        d = dr > d || dr != dr ? dr : d;
    }
    return d;
}

START_TEST(matches_reference) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, ggufs[_i]);
    ck_assert_str_eq(m.config.family.name, CASES[_i].arch);
    const struct {
        const char *mode;
        RunKind kind;
        int pos0;
    } runs[] = {{"chunk", RUN_CHUNK, 0}, {"steps", RUN_STEPS, 0}, {"split:50", RUN_SPLIT, 0},
                {"chunk", RUN_CHUNK, OFFSET}};
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        float *ref = reference(_i, runs[k].mode, runs[k].pos0, NULL);
        float *got = engine(&m, NULL, runs[k].kind, runs[k].pos0);
        float d = tests_max_abs_diff(got, ref, (size_t)N_TOKENS * VOCAB);
        float tol = tolerance(ref, (size_t)N_TOKENS * VOCAB);
        printf("%-24s %-8s pos0 %d: max |logit - reference| = %.3g (bound %.3g)\n",
               CASES[_i].name, runs[k].mode, runs[k].pos0, (double)d, (double)tol);
        ck_assert_msg(d <= tol, "%s %s at %d: %g from the reference (bound %g)", CASES[_i].name,
                      runs[k].mode, runs[k].pos0, (double)d, (double)tol);
        free(ref);
        free(got);
    }
    model_free(&m);
}
END_TEST

START_TEST(team_decode_is_the_steps_bits) {
    if (ready) tests_check_team_decode(ggufs[_i], ids, N_TOKENS, CASES[_i].name);
}
END_TEST

/* A model whose matrices are worth sharing (kv_dim x dim = 192 x 192, over
 * PARALLEL_MIN_MACS) decodes as a team by default; the cases above are
 * too small to. */
START_TEST(team_by_default_where_large) {
    if (!ready) return;
    TestsRun r = tests_run_python_ok((const char *[]){"tools/random_model.py", "custom", "build/team", "--dim", "192",
                                                      "--hidden", "512", "--layers", "2", "--heads", "4",
                                                      "--kv-heads", "4", "--vocab", "260", "--seq", "64",
                                                      "--formats", "f32", NULL});
    tests_run_free(&r);
    tests_check_team_decode("build/team/custom-192x2-f32.gguf", ids, 48, "random 192 x 2 layers");
}
END_TEST

/* transformers ran chunk, steps, split and offset in that order on one
 * model: dynamic NTK keeps the theta it grew for the 80-token chunk through
 * the split's first 50 tokens (its steps restart below the original
 * context, which resets it).  The engine's context keeps that state too:
 * the split runs after an 80-token chunk in the same context. */
static float *engine_like_golden(const Model *m, const PeParams *p, const char *run) {
    Context ctx;
    tests_build_context(&ctx, m, p ? p : &m->pe, 128);
    float *out;
    if (!strcmp(run, "split")) {
        free(engine_run(&ctx, RUN_CHUNK, 0));
        kv_cache_clear(&ctx.cache);
        out = engine_run(&ctx, RUN_SPLIT, 0);
    } else {
        out = engine_run(&ctx, !strcmp(run, "steps") ? RUN_STEPS : RUN_CHUNK,
                         !strcmp(run, "offset") ? OFFSET : 0);
    }
    context_free(&ctx);
    return out;
}

static const char *const GOLDEN_RUNS[] = {"chunk", "steps", "split", "offset"};

START_TEST(matches_transformers) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, ggufs[_i]);
    for (int k = 0; k < 4; k++) {
        int positions[32], n;
        float *rows = golden(_i, GOLDEN_RUNS[k], positions, &n);
        float *got = engine_like_golden(&m, NULL, GOLDEN_RUNS[k]);
        float d = rows_diff(got, rows, positions, n), tol = tolerance(rows, (size_t)n * VOCAB);
        printf("%-24s %-6s max |logit - transformers| = %.3g over %d positions (bound %.3g)\n",
               CASES[_i].name, GOLDEN_RUNS[k], (double)d, n, (double)tol);
        ck_assert_msg(d <= tol, "%s %s: %g from transformers (bound %g)", CASES[_i].name,
                      GOLDEN_RUNS[k], (double)d, (double)tol);
        free(rows);
        free(got);
    }
    model_free(&m);
}
END_TEST

START_TEST(reference_controls) {
    if (!ready) return;
    int c = case_index(CONTROLS[_i].name);
    Model m;
    tests_load_model(&m, ggufs[c]);
    float *ref = reference(c, "chunk", 0, CONTROLS[_i].broken);
    float *got = engine(&m, NULL, RUN_CHUNK, 0);
    float d = tests_max_abs_diff(got, ref, (size_t)N_TOKENS * VOCAB);
    printf("control %-24s %-14s: %.3g\n", CONTROLS[_i].name, CONTROLS[_i].broken, (double)d);
    ck_assert_msg(d > CONTROL_MIN, "%s with %s broken: only %g from the engine",
                  CONTROLS[_i].name, CONTROLS[_i].broken, (double)d);
    free(ref);
    free(got);
    model_free(&m);
}
END_TEST

/* The engine misconfigured against transformers' chunk (or split): each
 * must be far from it. */
static void expect_far(const char *name, const PeParams *p, const char *run, const char *what) {
    int c = case_index(name), positions[32], n;
    Model m;
    tests_load_model(&m, ggufs[c]);
    float *rows = golden(c, run, positions, &n);
    float *got = p ? engine_like_golden(&m, p, run) : engine(&m, NULL, RUN_SPLIT, 0);
    float d = rows_diff(got, rows, positions, n);
    printf("control %-24s %-40s: %.3g\n", name, what, (double)d);
    ck_assert_msg(d > CONTROL_MIN, "%s with %s: only %g from transformers", name, what,
                  (double)d);
    free(rows);
    free(got);
    model_free(&m);
}

static PeParams scheme_of(const char *name) {
    Model m;
    tests_load_model(&m, ggufs[case_index(name)]);
    PeParams p = m.pe;
    model_free(&m);
    return p;
}

START_TEST(engine_controls) {
    if (!ready) return;
    PeParams p = scheme_of("llama_yarn");
    p.rope_scaling = PE_ROPE_SCALING_YARN_PAPER;
    expect_far("llama_yarn", &p, "chunk", "the YaRN paper's ramp");
    p = scheme_of("llama_yarn_untruncated");
    p.yarn_no_truncate = 0;
    expect_far("llama_yarn_untruncated", &p, "chunk", "the correction range rounded");
    p = scheme_of("llama3");
    p.rope_scaling = PE_ROPE_SCALING_NONE;
    expect_far("llama3", &p, "chunk", "no scaling (rope_freqs ignored)");
    p = scheme_of("llama_dynamic");
    p.rope_scaling = PE_ROPE_SCALING_NTK;
    expect_far("llama_dynamic", &p, "chunk", "fixed NTK instead of dynamic");
    expect_far("llama_dynamic", NULL, "split", "a fresh context (no grown theta)");
    p = scheme_of("phi3");
    p.longrope_rule = PE_LONGROPE_BY_CONTEXT;
    expect_far("phi3", &p, "steps", "llama.cpp's LongRoPE rule (by context)");
}
END_TEST

/* The engine's router misconfigured against transformers' chunk: each
 * must be far from it. */
static void expect_router_far(const char *name, const char *what, int renormalise, RouterKind kind,
                              int used) {
    int c = case_index(name), positions[32], n;
    Model m;
    tests_load_model(&m, ggufs[c]);
    m.config.expert_weights_norm = renormalise;
    m.config.family.router = kind;
    m.config.n_experts_used = used;
    float *rows = golden(c, "chunk", positions, &n), *got = engine(&m, NULL, RUN_CHUNK, 0);
    float d = rows_diff(got, rows, positions, n);
    printf("control %-24s %-40s: %.3g\n", name, what, (double)d);
    ck_assert_msg(d > CONTROL_MIN, "%s with %s: only %g from transformers", name, what, (double)d);
    free(rows);
    free(got);
    model_free(&m);
}

START_TEST(router_controls) {
    if (!ready) return;
    expect_router_far("qwen3_moe", "no renormalisation", 0, ROUTER_SOFTMAX_TOPK, 2);
    expect_router_far("qwen3_moe", "top 1", 1, ROUTER_SOFTMAX_TOPK, 1);
    expect_router_far("olmoe", "softmax after the top k", 0, ROUTER_TOPK_SOFTMAX, 2);
    expect_router_far("olmoe", "renormalised", 1, ROUTER_SOFTMAX_TOPK, 2);
    expect_router_far("olmoe", "top 1", 0, ROUTER_SOFTMAX_TOPK, 1);
    expect_router_far("granitemoe", "softmax before the top k", 0, ROUTER_SOFTMAX_TOPK, 2);
    expect_router_far("granitemoe", "top 1", 0, ROUTER_TOPK_SOFTMAX, 1);
}
END_TEST

/* gpt-oss's clamped SwiGLU where its limit binds (gpt_oss_hot): the engine
 * within the bound of the reference in a chunk and token by token; the
 * reference without the clamp, and the engine without it (limit infinite),
 * far from it. */
START_TEST(clamp_binds) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, hot_gguf);
    const struct {
        const char *mode;
        RunKind kind;
    } runs[] = {{"chunk", RUN_CHUNK}, {"steps", RUN_STEPS}};
    float *ref = NULL;
    for (int k = 0; k < 2; k++) {
        free(ref);
        ref = reference_of(HOT, runs[k].mode, 0, NULL);
        float *got = engine(&m, NULL, runs[k].kind, 0);
        float d = tests_max_abs_diff(got, ref, (size_t)N_TOKENS * VOCAB);
        float tol = tolerance(ref, (size_t)N_TOKENS * VOCAB);
        printf("%-24s %-8s: max |logit - reference| = %.3g (bound %.3g)\n", HOT, runs[k].mode,
               (double)d, (double)tol);
        ck_assert_msg(d <= tol, "%s %s: %g from the reference (bound %g)", HOT, runs[k].mode,
                      (double)d, (double)tol);
        free(got);
    }
    float *unclamped = reference_of(HOT, "steps", 0, "clamp");
    float *got = engine(&m, NULL, RUN_STEPS, 0);
    float d_ref = tests_max_abs_diff(got, unclamped, (size_t)N_TOKENS * VOCAB);
    free(got);
    m.config.family.swiglu_limit = INFINITY;
    got = engine(&m, NULL, RUN_STEPS, 0);
    float d_engine = tests_max_abs_diff(got, ref, (size_t)N_TOKENS * VOCAB);
    printf("control %s: the reference without the clamp %.3g, the engine without it %.3g\n", HOT,
           (double)d_ref, (double)d_engine);
    ck_assert_msg(d_ref > CONTROL_MIN, "the reference without the clamp is only %g from the engine",
                  (double)d_ref);
    ck_assert_msg(d_engine > CONTROL_MIN, "the engine without the clamp is only %g from the reference",
                  (double)d_engine);
    free(got);
    free(ref);
    free(unclamped);
    model_free(&m);
}
END_TEST

/* The A/B switch --sinks off (model_layers_sinks_off): gpt-oss run without
 * its learned sinks equals the reference with them dropped, in a chunk and
 * token by token, and is far from transformers' logits with them; a model
 * without sinks refuses it. */
START_TEST(sinks_off) {
    if (!ready) return;
    int c = case_index("gpt_oss"), positions[32], n;
    Model m;
    tests_load_model(&m, ggufs[c]);
    LayerAttention *table = model_layers_for(&m, &m.pe);
    PosencError err;
    ck_assert_msg(model_layers_sinks_off(&m, table, &err) == 0, "%s", err.msg);
    float *golden_rows = golden(c, "chunk", positions, &n);
    const RunKind kinds[] = {RUN_CHUNK, RUN_STEPS};
    for (int k = 0; k < 2; k++) {
        Context ctx;
        tests_build_context(&ctx, &m, &m.pe, 128);
        ck_assert_msg(context_use_layers(&ctx, table, &err) == 0, "%s", err.msg);
        float *got = engine_run(&ctx, kinds[k], 0);
        float *ref = reference(c, k ? "steps" : "chunk", 0, "sinks");
        float d = tests_max_abs_diff(got, ref, (size_t)N_TOKENS * VOCAB);
        float far = rows_diff(got, golden_rows, positions, n);
        printf("gpt_oss --sinks off %s: %.3g from the reference without sinks; control: %.3g from "
               "transformers with them\n", k ? "steps" : "chunk", (double)d, (double)far);
        ck_assert_msg(d <= LOGIT_TOL, "sinks off: %g from the reference without sinks", (double)d);
        ck_assert_msg(far > CONTROL_MIN, "sinks off: only %g from transformers with sinks", (double)far);
        free(got);
        free(ref);
        context_free(&ctx);
    }
    free(golden_rows);
    free(table);
    model_free(&m);
    tests_load_model(&m, ggufs[case_index("qwen3_moe")]);
    table = model_layers_for(&m, &m.pe);
    ck_assert_int_eq(model_layers_sinks_off(&m, table, &err), -1);
    ck_assert_msg(strstr(err.msg, "no learned attention sinks"), "%s", err.msg);
    free(table);
    model_free(&m);
}
END_TEST

/* The observer's rows (the attention views' path, a softmax over whole
 * rows): the share of each (layer, head, query) row its sink takes. */
typedef struct {
    int n_heads;
    float *share; /* (layers, heads, N_TOKENS) */
} SinkShares;

static void record_sink_share(void *user, int layer, int head, int pos_q, const float *w, int n) {
    SinkShares *s = user;
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += w[i];
    s->share[((size_t)layer * s->n_heads + head) * N_TOKENS + (size_t)pos_q] = (float)(1.0 - sum);
}

/* The engine's sink weights, 1 - each observed row's sum, (layers, heads,
 * N_TOKENS), with the logits of that pass into *logits; sinks off where
 * `off`. */
static float *engine_sink_shares(const Model *m, int off, float **logits) {
    SinkShares s = {m->config.n_heads,
                    calloc((size_t)m->config.n_layers * m->config.n_heads * N_TOKENS, sizeof(float))};
    LayerAttention *table = model_layers_for(m, &m->pe);
    PosencError err;
    ck_assert_msg(!off || model_layers_sinks_off(m, table, &err) == 0, "%s", err.msg);
    Context ctx;
    tests_build_context(&ctx, m, &m->pe, 128);
    ck_assert_msg(context_use_layers(&ctx, table, &err) == 0 &&
                  context_observe_attention(&ctx, record_sink_share, &s, &err) == 0, "%s", err.msg);
    *logits = engine_run(&ctx, RUN_CHUNK, 0);
    free(table);
    context_free(&ctx);
    return s.share;
}

/* -m attention's sinks: the weight each head's sink takes in each row,
 * through the observed path, within SINK_TOL of the NumPy reference (the
 * views' bound: float32 softmaxes of float32 scores, ~1e-6), and the
 * observed pass's logits within the bound of the reference's; control: with
 * --sinks off every share is 0, far from the reference's.  Through ./run,
 * the JSON has the sinks' mean mass (and none with --sinks off, control);
 * --sinks misused is one error line. */
#define SINK_TOL 1e-5f
START_TEST(sink_weights) {
    if (!ready) return;
    int c = case_index("gpt_oss");
    Model m;
    tests_load_model(&m, ggufs[c]);
    size_t rows = (size_t)m.config.n_layers * m.config.n_heads;
    char list[N_TOKENS * 4 + 1] = "";
    for (int i = 0; i < N_TOKENS; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? "," : "", ids[i]);
    TestsRun r = tests_run_python_ok((const char *[]){"tools/hf_reference.py", "sinks",
                                                      "build/hf/gpt_oss", "--ids", list, NULL});
    float *ref = malloc(sizeof(float) * rows * N_TOKENS);
    char *p = r.out;
    for (size_t i = 0; i < rows; i++) {
        strtol(p, &p, 10), strtol(p, &p, 10); /* layer, head: in order */
        for (int t = 0; t < N_TOKENS; t++) ref[i * N_TOKENS + t] = strtof(p, &p);
    }
    tests_run_free(&r);
    float *logits, *off_logits;
    float *got = engine_sink_shares(&m, 0, &logits), *off = engine_sink_shares(&m, 1, &off_logits);
    float *ref_logits = reference(c, "chunk", 0, NULL);
    float d = tests_max_abs_diff(got, ref, rows * N_TOKENS);
    float d_logits = tests_max_abs_diff(logits, ref_logits, (size_t)N_TOKENS * VOCAB);
    float control = tests_max_abs_diff(off, ref, rows * N_TOKENS);
    printf("gpt_oss sink weights: %.3g from the reference (logits %.3g); --sinks off: %.3g\n",
           (double)d, (double)d_logits, (double)control);
    ck_assert_msg(d <= SINK_TOL, "sink weights %g from the reference", (double)d);
    ck_assert_msg(d_logits <= LOGIT_TOL, "observed logits %g from the reference", (double)d_logits);
    ck_assert_msg(control > CONTROL_MIN, "with --sinks off the shares are only %g off", (double)control);
    free(ref), free(got), free(off), free(logits), free(off_logits), free(ref_logits);
    model_free(&m);
    const char *args[] = {ggufs[c], "-m", "attention", "-i", "hello", "--json", NULL};
    TestsRun on = tests_run_engine_ok(args);
    const char *off_args[] = {ggufs[c], "-m", "attention", "-i", "hello", "--json", "--sinks", "off", NULL};
    TestsRun without = tests_run_engine_ok(off_args);
    ck_assert_msg(strstr(on.out, "\"sink\":[["), "%s", on.out);
    ck_assert_msg(!strstr(without.out, "\"sink\""), "--sinks off still shows sinks");
    tests_run_free(&on);
    tests_run_free(&without);
    const char *refused[] = {ggufs[case_index("olmoe")], "-m", "attention", "-i", "hello", "--sinks",
                             "off", NULL};
    tests_expect_error(refused, "--sinks off: the model has no learned attention sinks");
    const char *sinks_on[] = {ggufs[c], "-m", "attention", "-i", "hello", "--sinks", "on", NULL};
    tests_expect_error(sinks_on, "--sinks takes off");
    const char *bench[] = {ggufs[c], "-m", "bench", "--sinks", "off", NULL};
    tests_expect_error(bench, "--sinks is not used by -m bench");
}
END_TEST

/* gpt-oss misconfigured in the engine against transformers' chunk: the
 * router without its bias, the experts without theirs, the sliding layer
 * full; each must be far from it. */
START_TEST(gpt_oss_engine_controls) {
    if (!ready) return;
    int c = case_index("gpt_oss"), positions[32], n;
    float *rows = golden(c, "chunk", positions, &n);
    for (int k = 0; k < 3; k++) {
        static const char *const what[] = {"the router's bias dropped", "the experts' biases dropped",
                                           "the sliding layer full"};
        Model m;
        tests_load_model(&m, ggufs[c]);
        for (int l = 0; l < m.config.n_layers; l++) {
            LayerWeights *w = &m.weights.layers[l];
            if (k == 0) w->b_router = NULL;
            if (k == 1) w->b_gate_exps = w->b_up_exps = w->b_down_exps = NULL;
            if (k == 2) m.layers[l].window = 0;
        }
        float *got = engine(&m, NULL, RUN_CHUNK, 0);
        float d = rows_diff(got, rows, positions, n);
        printf("control %-24s %-40s: %.3g\n", "gpt_oss", what[k], (double)d);
        ck_assert_msg(d > CONTROL_MIN, "gpt_oss with %s: only %g from transformers", what[k], (double)d);
        free(got);
        model_free(&m);
    }
    free(rows);
}
END_TEST

/* Prefill reads each expert's matrices once per chunk: an 80-token chunk
 * runs one expert feed-forward per (layer, expert) that some token picked,
 * at most layers x experts; token by token it runs layers x top k per
 * token (control: the grouping's count is far below that).  Where the
 * kernel path packs the experts' type, they are packed with the other
 * matrices (this model is far smaller than the memory), and each expert's
 * view reads the copy. */
START_TEST(experts_read_once_per_chunk) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, ggufs[case_index("qwen3_moe")]);
    const ModelConfig *c = &m.config;
    const Tensor *gate = &m.weights.layers[0].gate_exps;
    if (kernels_packed_bytes(gate)) {
        ck_assert_int_eq(m.experts_packed, 1);
        ck_assert_ptr_nonnull(model_expert_matrix(gate, c->n_experts, c->n_experts - 1).packed);
    }
    Context ctx;
    tests_build_context(&ctx, &m, &m.pe, 128);
    free(engine_run(&ctx, RUN_CHUNK, 0));
    size_t chunk = ctx.expert_passes;
    ctx.expert_passes = 0;
    kv_cache_clear(&ctx.cache);
    free(engine_run(&ctx, RUN_STEPS, 0));
    size_t steps = ctx.expert_passes;
    printf("expert feed-forwards: %zu for one chunk of %d tokens, %zu token by token\n", chunk,
           N_TOKENS, steps);
    ck_assert_uint_le(chunk, (size_t)c->n_layers * c->n_experts);
    ck_assert_uint_ge(chunk, (size_t)c->n_layers * c->n_experts_used);
    ck_assert_uint_eq(steps, (size_t)N_TOKENS * c->n_layers * c->n_experts_used);
    context_free(&ctx);
    model_free(&m);
}
END_TEST

/* Expert counts and shapes that disagree: one error line naming the file. */
START_TEST(malformed_moe_file) {
    if (!ready) return;
    const struct {
        const char *set, *needle;
    } bad[] = {
        {"olmoe.expert_count=u:0", "expert_count = 0 is out of range (1..4096)"},
        {"olmoe.expert_used_count=u:5", "expert_used_count 5 is larger than expert_count 4"},
        {"olmoe.expert_used_count=u:0", "expert_used_count = 0 is out of range"},
        {"olmoe.expert_count=u:3", "blk.0.ffn_gate_inp.weight"},
        {"olmoe.expert_feed_forward_length=u:16", "blk.0.ffn_gate_exps.weight"},
        {"olmoe.expert_count=u:2;olmoe.expert_used_count=u:2", "blk.0.ffn_gate_inp.weight"},
        {"", NULL}, /* control: the copy loads */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char out[300];
        snprintf(out, sizeof out, "build/hf/olmoe.edit-%zu.gguf", i);
        const char *args[] = {"tools/gguf_edit.py", ggufs[case_index("olmoe")], out, "", bad[i].set, NULL};
        TestsRun r = tests_run_python_ok(args);
        tests_run_free(&r);
        Model m;
        PosencError err;
        int rc = model_load(&m, out, &err);
        if (!bad[i].needle) {
            ck_assert_msg(rc == 0, "the unedited copy does not load: %s", err.msg);
            model_free(&m);
        } else {
            ck_assert_msg(rc != 0, "%s loaded despite %s", out, bad[i].set);
            tests_expect_file_error(err.msg, out, bad[i].needle);
        }
        remove(out);
    }
}
END_TEST

/* gpt-oss files without a sink, bias or with a sink vector of the wrong
 * length: one error line naming the file and the tensor. */
START_TEST(malformed_gpt_oss_file) {
    if (!ready) return;
    const struct {
        const char *drop, *set, *needle;
    } bad[] = {
        {"blk.1.attn_sinks.weight", "", "missing tensor 'blk.1.attn_sinks.weight'"},
        {"blk.0.attn_sinks.weight:3", "", "blk.0.attn_sinks.weight"},
        {"blk.0.attn_sinks.weight:5", "", "blk.0.attn_sinks.weight"},
        {"blk.0.ffn_gate_inp.bias", "", "missing tensor 'blk.0.ffn_gate_inp.bias'"},
        {"blk.1.ffn_down_exps.bias", "", "missing tensor 'blk.1.ffn_down_exps.bias'"},
        {"blk.0.attn_output.bias", "", "missing tensor 'blk.0.attn_output.bias'"},
        {"", "gpt-oss.expert_count=u:3", "blk.0.ffn_gate_inp.weight"},
        {"", "gpt-oss.expert_feed_forward_length=u:16", "blk.0.ffn_gate_exps.weight"},
        {"", "", NULL}, /* control: the copy loads */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char out[300];
        snprintf(out, sizeof out, "build/hf/gpt_oss.edit-%zu.gguf", i);
        const char *args[] = {"tools/gguf_edit.py", ggufs[case_index("gpt_oss")], out, bad[i].drop,
                              bad[i].set, NULL};
        TestsRun r = tests_run_python_ok(args);
        tests_run_free(&r);
        Model m;
        PosencError err;
        int rc = model_load(&m, out, &err);
        if (!bad[i].needle) {
            ck_assert_msg(rc == 0, "the unedited copy does not load: %s", err.msg);
            model_free(&m);
        } else {
            ck_assert_msg(rc != 0, "%s loaded despite %s%s", out, bad[i].drop, bad[i].set);
            tests_expect_file_error(err.msg, out, bad[i].needle);
        }
        remove(out);
    }
}
END_TEST

/* -m inspect shows gpt-oss's specials: the clamp, the sinks, YaRN's
 * unrounded range, the alternating sliding and full layers, and the active
 * parameters: the file's 108752 less, in 2 layers, 2 unpicked experts of 3
 * matrices of 64 x 32 and biases of 32, 32 and 64 (25088); and the bytes a
 * decoded token reads: the file's 435008 (all f32) less those parameters'
 * 100352 bytes and 255 of the untied embedding's 256 rows of 64 (65280).
 * Control: OLMoE shows no sinks nor clamp. */
START_TEST(inspect_gpt_oss) {
    if (!ready) return;
    TestsRun r = tests_run_engine_ok((const char *[]){ggufs[case_index("gpt_oss")], "-m", "inspect", NULL});
    const char *want[] = {"  swiglu_limit     7\n", "  attn_sinks       learned, one logit per head\n",
                          "  rope_yarn_range  unrounded (truncate: false)\n",
                          "  params_total     108752\n", "  params_active    83664\n",
                          "  bytes_active     269376\n",
                          "  0                rope theta=150000 yarn x4 window=8\n"
                          "  1                rope theta=150000 yarn x4 full\n"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_msg(strstr(r.out, want[i]), "no '%s' in:\n%s", want[i], r.out);
    Model m; /* whether its experts are packed, as this process's kernel path packs them */
    tests_load_model(&m, ggufs[case_index("gpt_oss")]);
    char packed[64];
    snprintf(packed, sizeof packed, "  experts_packed   %s\n", m.experts_packed ? "true" : "false");
    ck_assert_msg(strstr(r.out, packed), "no '%s' in:\n%s", packed, r.out);
    model_free(&m);
    tests_run_free(&r);
    r = tests_run_engine_ok((const char *[]){ggufs[case_index("olmoe")], "-m", "inspect", NULL});
    ck_assert_msg(!strstr(r.out, "attn_sinks") && !strstr(r.out, "swiglu_limit"), "%s", r.out);
    tests_run_free(&r);
}
END_TEST

/* -m bench's bytes a decoded token reads, counted from the model's
 * matrices (the router and the picked experts' share of the stacked ones
 * among them), are inspect's bytes_active, counted from the file's tensor
 * table, less what is no matrix: the norms and sinks (1-D) and the picked
 * share of the experts' biases.  Control: without the experts' share the
 * count is short by more than the bound. */
START_TEST(bench_counts_the_picked_experts) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, ggufs[case_index("gpt_oss")]);
    const ModelConfig *c = &m.config;
    double no_matrix = 0.0, experts = 0.0;
    for (size_t i = 0; i < m.gguf->n_tensors; i++) {
        const GgufTensor *t = &m.gguf->tensors[i];
        if (strstr(t->name, "_exps.bias")) no_matrix += (double)t->nbytes * c->n_experts_used / c->n_experts;
        else if (t->n_dims == 1) no_matrix += (double)t->nbytes;
        if (strstr(t->name, "_exps.weight")) experts += (double)t->nbytes * c->n_experts_used / c->n_experts;
    }
    double bench = bench_weight_bytes_per_token(&m), active = model_bytes_active(&m);
    printf("gpt_oss bytes a token reads: bench %.0f + %.0f outside the matrices = %.0f, bytes_active %.0f\n", bench,
           no_matrix, bench + no_matrix, active);
    ck_assert_msg(fabs(bench + no_matrix - active) < 0.5, "%.1f vs %.1f", bench + no_matrix, active);
    ck_assert_msg(fabs(bench - experts + no_matrix - active) > 0.5, "control: the experts' share is %.0f", experts);
    model_free(&m);
}
END_TEST

/* convert.py refuses what llama.cpp's gpt-oss cannot hold, a clamp other
 * than its fixed 7, and MXFP4 expert blocks of the wrong shape (the float
 * tensor renamed _blocks; test_gguf converts the release's form); the
 * checkpoint as written converts (control). */
static const char EDIT_GPT_OSS[] =
    "import json, struct, sys\n"
    "sys.path.insert(0, 'tools')\n"
    "import hf_tiny\n"
    "d, what = sys.argv[1], sys.argv[2]\n"
    "hf_tiny.make('gpt_oss', d)\n"
    "if what == 'limit':\n"
    "    c = json.load(open(d + '/config.json'))\n"
    "    c['swiglu_limit'] = 5.0\n"
    "    json.dump(c, open(d + '/config.json', 'w'))\n"
    "elif what == 'mxfp4':\n"
    "    p = d + '/model.safetensors'\n"
    "    b = open(p, 'rb').read()\n"
    "    n = struct.unpack('<Q', b[:8])[0]\n"
    "    h = json.loads(b[8:8 + n])\n"
    "    h['model.layers.0.mlp.experts.gate_up_proj_blocks'] = "
    "h.pop('model.layers.0.mlp.experts.gate_up_proj')\n"
    "    hb = json.dumps(h).encode()\n"
    "    hb += b' ' * (-len(hb) % 8)\n"
    "    open(p, 'wb').write(struct.pack('<Q', len(hb)) + hb + b[8 + n:])\n";

START_TEST(convert_gpt_oss_refusals) {
    if (!ready) return;
    const struct {
        const char *what, *needle;
    } cases[] = {
        {"limit", "swiglu_limit 5 is not 7"},
        {"mxfp4", "model.layers.0.mlp.experts.gate_up_proj_blocks has shape [4, 64, 64], expected [4, 64, 2, 16]"},
        {"none", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *dir = tests_temp_dir();
        char out[600];
        snprintf(out, sizeof out, "%s/out.gguf", dir);
        TestsRun r = tests_run_python_ok((const char *[]){"-c", EDIT_GPT_OSS, dir, cases[i].what, NULL});
        tests_run_free(&r);
        const char *args[] = {dir, out, NULL};
        if (cases[i].needle) {
            tests_expect_convert_error(args, cases[i].needle);
        } else {
            r = tests_run_python_ok((const char *[]){"tools/convert.py", dir, out, NULL});
            tests_run_free(&r);
        }
        tests_remove_dir(dir);
    }
}
END_TEST

/* SmolLM3 with its NoPE layer rotated, through the per-layer override. */
START_TEST(nope_layer_rotated_fails) {
    if (!ready) return;
    int c = case_index("smollm3"), positions[32], n;
    Model m;
    tests_load_model(&m, ggufs[c]);
    ck_assert_int_eq(m.layers[3].pe.kind, PE_NONE);
    ck_assert_int_eq(m.layers[2].pe.kind, PE_ROPE);
    LayerAttention *table = model_layers_for(&m, &m.pe);
    PosencError err;
    ck_assert_msg(model_layer_override(&m, &m.pe, table, 3, PE_ROPE, -1, &err) == 0, "%s", err.msg);
    Context ctx;
    tests_build_context(&ctx, &m, &m.pe, 128);
    ck_assert_msg(context_use_layers(&ctx, table, &err) == 0, "%s", err.msg);
    float *got = engine_run(&ctx, RUN_CHUNK, 0), *rows = golden(c, "chunk", positions, &n);
    float d = rows_diff(got, rows, positions, n);
    printf("control smollm3 NoPE layer rotated: %.3g\n", (double)d);
    ck_assert_msg(d > CONTROL_MIN, "rotating SmolLM3's NoPE layer moved logits by only %g",
                  (double)d);
    free(got);
    free(rows);
    free(table);
    context_free(&ctx);
    model_free(&m);
}
END_TEST

/* Layer l of m alone, a one-layer model sharing m's weights: its keys and
 * values depend only on the tokens and their positions, so a shift of its
 * cache equals running the kept tokens afresh at their new positions
 * exactly (deeper layers saw the dropped tokens: test_context_shift.c). */
static Model one_layer(const Model *m, int l) {
    Model one = *m;
    one.config.n_layers = 1;
    one.weights.layers = m->weights.layers + l;
    one.layers = m->layers + l;
    return one;
}

/* max |logits after a shift - logits of the kept tokens run afresh|; with
 * `rotate_keys` the cached keys are also rotated by the shift as a rotating
 * layer's would be. */
static float shift_vs_fresh(const Model *m, const PositionalEncoding *rope, int rotate_keys) {
    enum { N_CTX = 48, FED = 40, KEEP = 4, DISCARD = 16 };
    Context ctx, fresh;
    tests_build_context(&ctx, m, &m->pe, N_CTX);
    context_forward(&ctx, ids, FED, 0, 0);
    PosencError err;
    ck_assert_msg(context_shift(&ctx, KEEP, DISCARD, CONTEXT_SHIFT_ON, &err) == 0, "%s", err.msg);
    for (int c = KEEP; rotate_keys && c < ctx.cache.n_used; c++) {
        float *k = ctx.state.k;
        kv_cache_load_keys(&ctx.cache, 0, c, 1, k);
        pe_rope_rerotate(rope, k, m->config.n_kv_heads, -DISCARD);
        kv_cache_store(&ctx.cache, 0, c, 1, k, NULL);
    }
    float shifted[VOCAB];
    memcpy(shifted, context_forward(&ctx, ids + FED, 1, FED - DISCARD, 0), sizeof shifted);
    int kept[FED - DISCARD + 1], n = 0;
    for (int i = 0; i <= FED; i++)
        if (i < KEEP || i >= KEEP + DISCARD) kept[n++] = ids[i];
    tests_build_context(&fresh, m, &m->pe, N_CTX);
    float d = tests_max_abs_diff(shifted, context_forward(&fresh, kept, n, 0, 0), VOCAB);
    context_free(&ctx);
    context_free(&fresh);
    return d;
}

/* SmolLM3: the rotating layers re-rotate their keys, the NoPE layer only
 * has its positions updated (control: rotating its keys breaks it). */
START_TEST(shift_rerotates_rotating_layers_only) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, ggufs[case_index("smollm3")]);
    Context whole;
    tests_build_context(&whole, &m, &m.pe, 16);
    ck_assert_str_eq(context_shift_action(&whole, CONTEXT_SHIFT_ON), "keys re-rotated");
    Model rope = one_layer(&m, 0), nope = one_layer(&m, 3);
    float d_rope = shift_vs_fresh(&rope, NULL, 0), d_nope = shift_vs_fresh(&nope, NULL, 0);
    float broken = shift_vs_fresh(&nope, &whole.layers[0].pe, 1);
    printf("shift vs fresh: rotating layer %.3g, NoPE layer %.3g; NoPE keys rotated: %.3g\n",
           (double)d_rope, (double)d_nope, (double)broken);
    ck_assert_msg(d_rope <= LOGIT_TOL, "rotating layer after a shift: %g", (double)d_rope);
    ck_assert_msg(d_nope <= LOGIT_TOL, "NoPE layer after a shift: %g", (double)d_nope);
    ck_assert_msg(broken > CONTROL_MIN, "rotating the NoPE keys moved logits by only %g",
                  (double)broken);
    context_free(&whole);
    model_free(&m);
}
END_TEST

/* Dynamic NTK's rotation follows the sequence's length, so a shift must
 * recompute; YaRN's is fixed and is re-rotated. */
START_TEST(shift_action_follows_the_scaling) {
    if (!ready) return;
    const struct {
        const char *name, *action;
    } want[] = {{"llama_dynamic", "recomputed"}, {"llama_yarn", "keys re-rotated"}};
    for (int i = 0; i < 2; i++) {
        Model m;
        tests_load_model(&m, ggufs[case_index(want[i].name)]);
        Context ctx;
        tests_build_context(&ctx, &m, &m.pe, 16);
        ck_assert_str_eq(context_shift_action(&ctx, CONTEXT_SHIFT_ON), want[i].action);
        context_free(&ctx);
        model_free(&m);
    }
}
END_TEST

/* Chunked attention: with chunks of 16 in every layer, the tokens of the
 * third chunk (positions 32..47) see none of the first two at any depth,
 * so their logits equal a context that ran only them, at the same
 * positions.  Control: without chunks they differ. */
static float third_chunk_vs_alone(const Model *m, int chunk) {
    enum { C = 16, N = 3 * C };
    LayerAttention *table = model_layers_for(m, &m->pe);
    PosencError err;
    for (int l = 0; l < m->config.n_layers; l++)
        ck_assert_msg(model_layer_chunk(m, table, l, chunk, &err) == 0, "%s", err.msg);
    Context all, alone;
    tests_build_context(&all, m, &m->pe, N);
    tests_build_context(&alone, m, &m->pe, N);
    ck_assert_msg(context_use_layers(&all, table, &err) == 0 &&
                  context_use_layers(&alone, table, &err) == 0, "%s", err.msg);
    const float *lg = context_forward(&all, ids, N, 0, 1);
    float *third = malloc(sizeof(float) * C * VOCAB);
    memcpy(third, lg + (size_t)2 * C * VOCAB, sizeof(float) * C * VOCAB);
    float d = tests_max_abs_diff(third, context_forward(&alone, ids + 2 * C, C, 2 * C, 1),
                                 (size_t)C * VOCAB);
    free(third);
    free(table);
    context_free(&all);
    context_free(&alone);
    return d;
}

START_TEST(chunked_attention_isolates_chunks) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, ggufs[case_index("smollm3")]);
    float d = third_chunk_vs_alone(&m, 16), control = third_chunk_vs_alone(&m, 0);
    printf("chunks of 16: the third chunk %.3g from running it alone; without chunks %.3g\n",
           (double)d, (double)control);
    ck_assert_msg(d <= LOGIT_TOL, "chunked: %g from the chunk alone", (double)d);
    ck_assert_msg(control > CONTROL_MIN, "without chunks only %g from the chunk alone",
                  (double)control);
    model_free(&m);
}
END_TEST

/* The per-layer flags from the command line: -m inspect shows the table
 * they give; misuse is one error line naming the flag, before any work. */
START_TEST(layer_flags) {
    if (!ready) return;
    const char *gguf = ggufs[case_index("smollm3")];
    const char *show[] = {gguf, "-m", "inspect", "--pe-layers", "every2=none/0=alibi", "--window",
                          "3=16", NULL};
    TestsRun r = tests_run_engine_ok(show);
    ck_assert_msg(strstr(r.out, "  0                alibi full\n  1                none full\n"
                                "  2                rope theta=10000 full\n"
                                "  3                none window=16\n"), "%s", r.out);
    tests_run_free(&r);
    const char *plain[] = {gguf, "-m", "inspect", NULL}; /* control: the checkpoint's table */
    r = tests_run_engine_ok(plain);
    ck_assert_msg(strstr(r.out, "  0-2              rope theta=10000 full\n"
                                "  3                none full\n"), "%s", r.out);
    tests_run_free(&r);
    const struct {
        const char *flag, *value, *needle;
    } bad[] = {
        {"--pe-layers", "4=none", "--pe-layers: '4' is not a layer or range of the model's layers 0..3"},
        {"--pe-layers", "all=learned", "--pe-layers: layer 0: learned adds position to the embedding"},
        {"--pe-layers", "every0=none", "--pe-layers: 'every0': everyN needs N in 1..4"},
        {"--pe-layers", "1=nope", "--pe-layers: unknown scheme 'nope'"},
        {"--pe-layers", "none", "--pe-layers: 'none' needs the form LAYERS=SCHEME"},
        {"--window", "1=65", "--window: a window of 65 is wider than the context of 64 (--ctx)"},
        {"--chunk", "65", "--chunk: a chunk of 65 is wider than the context of 64 (--ctx)"},
        {"--window", "-3", "--window"},
        {"--pe", "rope@2-1=none", "--pe: '2-1' is not a layer or range"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *args[] = {gguf, "-m", "ppl", "-f", "README.md", "--ctx", "64", bad[i].flag,
                              bad[i].value, NULL};
        tests_expect_error(args, bad[i].needle);
    }
    const char *bench[] = {gguf, "-m", "bench", "--pe-layers", "all=none", NULL};
    tests_expect_error(bench, "--pe-layers is not used by -m bench");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("hf");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, matches_reference, 0, N_CASES);
    tcase_add_loop_test(tc, matches_transformers, 0, N_CASES);
    tcase_add_loop_test(tc, team_decode_is_the_steps_bits, 0, N_CASES);
    tcase_add_test(tc, team_by_default_where_large);
    tcase_add_loop_test(tc, reference_controls, 0, N_CONTROLS);
    tcase_add_test(tc, engine_controls);
    tcase_add_test(tc, router_controls);
    tcase_add_test(tc, experts_read_once_per_chunk);
    tcase_add_test(tc, bench_counts_the_picked_experts);
    tcase_add_test(tc, clamp_binds);
    tcase_add_test(tc, gpt_oss_engine_controls);
    tcase_add_test(tc, sinks_off);
    tcase_add_test(tc, sink_weights);
    tcase_add_test(tc, malformed_moe_file);
    tcase_add_test(tc, malformed_gpt_oss_file);
    tcase_add_test(tc, convert_gpt_oss_refusals);
    tcase_add_test(tc, inspect_gpt_oss);
    tcase_add_test(tc, nope_layer_rotated_fails);
    tcase_add_test(tc, shift_rerotates_rotating_layers_only);
    tcase_add_test(tc, shift_action_follows_the_scaling);
    tcase_add_test(tc, layer_flags);
    tcase_add_test(tc, chunked_attention_isolates_chunks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tests_run_suite(suite()); }
