/* The position lab (issue 32): Self-Extend, llama.cpp's group attention,
 * the attention temperature of Llama 4 and Mistral 3, and chunked
 * attention, on tools/hf_tiny.py's SmolLM3 (three RoPE layers, a NoPE
 * fourth; 80 tokens, past every window here), each against
 * tools/hf_reference.py's float64 NumPy forward written from the paper or
 * the code that defines it, in one chunk, token by token and in two chunks
 * through the cache, with a control per comparison that must fail:
 *   - Self-Extend (G, W) for several pairs, W a multiple of G or not:
 *     within 1e-4 of the reference; controls: neighbours one position wider
 *     (p_q - p_k <= W), the repository's true-division shift, no
 *     Self-Extend at all; G = 1 is plain attention bit for bit; a model with
 *     no rotating layer is refused;
 *   - llama.cpp's group attention (the cache's positions edited before each
 *     call, keys re-rotated) against the reference's edits; control: the
 *     paper's Self-Extend with the same G and W differs from it;
 *   - the attention temperature in Mistral 3's form (every layer,
 *     floor(p / L)) and Llama 4's (the NoPE layer, floor((p + 1) / L));
 *     control: each with the other's floor;
 *   - chunked attention; control: chunks starting one position later. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/shift.h"
#include "tests/common.h"

/* float32 engine vs float64 (tests/model/test_layers.c's bound: logits
 * |l| <= 32 over four layers; measured below, each run prints it). */
#define LOGIT_TOL 1e-4f
#define CONTROL_MIN 1e-2f
#define N_TOKENS 80
#define VOCAB 256
#define SPLIT_AT 50

static int ids[N_TOKENS];
static char gguf[160];
static int ready = 0;

static void setup(void) {
    if (!tests_python_available("the position lab")) return;
    snprintf(gguf, sizeof gguf, "%s", tests_make_hf_case("smollm3"));
    TestsRun r = tests_run_python_ok((const char *[]){"tools/hf_tiny.py", "golden", "llama3", "ids", NULL});
    char *s = r.out;
    for (int i = 0; i < N_TOKENS; i++) ids[i] = (int)strtol(s, &s, 10);
    tests_run_free(&r);
    ready = 1;
}

static void teardown(void) {}

/* hf_reference.py's logits (N_TOKENS, VOCAB) with one lab option
 * (flag, value) fed as `mode`, and a --break or NULL. */
static float *reference(const char *flag, const char *value, const char *mode, const char *broken) {
    char list[N_TOKENS * 4 + 1] = "";
    for (int i = 0; i < N_TOKENS; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? "," : "", ids[i]);
    const char *args[] = {"tools/hf_reference.py", "logits", "build/hf/smollm3", "--ids", list,
                          "--mode", mode, flag, value, broken ? "--break" : NULL, broken, NULL};
    TestsRun r = tests_run_python_ok(args);
    float *rows = malloc(sizeof(float) * N_TOKENS * VOCAB);
    char *s = r.out, *end;
    for (int i = 0; i < N_TOKENS * VOCAB; i++, s = end) {
        rows[i] = strtof(s, &end);
        ck_assert_msg(end != s, "the reference's output ends after %d numbers", i);
    }
    tests_run_free(&r);
    return rows;
}

typedef enum { RUN_CHUNK, RUN_STEPS, RUN_SPLIT } RunKind;
static const char *const RUN_NAMES[] = {"chunk", "steps", "split:50"};

/* What a lab option does to the model's table. */
typedef enum { LAB_NONE, LAB_SELF_EXTEND, LAB_TEMPERATURE, LAB_TEMPERATURE_LLAMA4, LAB_CHUNK } Lab;

/* The engine's logits (N_TOKENS, VOCAB): the model's table with `lab`
 * (a, b its numbers), or with llama.cpp's group attention (G a, W b) when
 * `group_attention`, fed as `kind`. */
static float *engine(const Model *m, Lab lab, double a, int b, int group_attention, RunKind kind) {
    LayerAttention *table = model_layers_for(m, &m->pe);
    PosencError err;
    int rc = 0;
    for (int l = 0; lab == LAB_CHUNK && l < m->config.n_layers; l++)
        rc |= model_layer_chunk(m, table, l, b, &err);
    if (lab == LAB_SELF_EXTEND) rc = model_layers_self_extend(m, table, (int)a, b, &err);
    if (lab == LAB_TEMPERATURE || lab == LAB_TEMPERATURE_LLAMA4)
        rc = model_layers_temperature(m, table, (float)a, b, lab == LAB_TEMPERATURE_LLAMA4, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    Context ctx;
    tests_build_context(&ctx, m, &m->pe, 128);
    ck_assert_msg(context_use_layers(&ctx, table, &err) == 0, "%s", err.msg);
    GroupAttention ga = {(int)a, b, 0};
    if (group_attention) ck_assert_msg(group_attention_check(&ctx, ga.group, ga.window, &err) == 0, "%s", err.msg);
    float *out = malloc(sizeof(float) * N_TOKENS * VOCAB);
    int calls[N_TOKENS + 1], n_calls = 0, next = 0;
    if (kind == RUN_STEPS)
        for (int t = 0; t <= N_TOKENS; t++) calls[n_calls++] = t;
    else if (kind == RUN_SPLIT)
        calls[0] = 0, calls[1] = SPLIT_AT, calls[2] = N_TOKENS, n_calls = 3;
    else
        calls[0] = 0, calls[1] = N_TOKENS, n_calls = 2;
    for (int c = 0; c + 1 < n_calls; c++) {
        int t0 = calls[c], n = calls[c + 1] - t0;
        if (group_attention) next = group_attention_compress(&ctx, &ga, next, NULL);
        memcpy(out + (size_t)t0 * VOCAB, context_forward(&ctx, ids + t0, n, next, 1),
               sizeof(float) * (size_t)n * VOCAB);
        next += n;
    }
    context_free(&ctx);
    free(table);
    return out;
}

static float diff(const float *a, const float *b) {
    return tests_max_abs_diff(a, b, (size_t)N_TOKENS * VOCAB);
}

/* Every run of the engine within LOGIT_TOL of the reference (chunk, steps,
 * split); returns the chunk's logits. */
static float *expect_reference(const Model *m, Lab lab, double a, int b, int group_attention,
                               const char *flag, const char *value) {
    float *chunk = NULL;
    for (int k = RUN_CHUNK; k <= RUN_SPLIT; k++) {
        float *ref = reference(flag, value, RUN_NAMES[k], NULL);
        float *got = engine(m, lab, a, b, group_attention, (RunKind)k);
        float d = diff(got, ref);
        printf("%-20s %-10s %-8s: max |logit - reference| = %.3g\n", flag, value, RUN_NAMES[k], (double)d);
        ck_assert_msg(d <= LOGIT_TOL, "%s %s %s: %g from the reference", flag, value, RUN_NAMES[k], (double)d);
        free(ref);
        if (k == RUN_CHUNK) chunk = got;
        else free(got);
    }
    return chunk;
}

/* The engine's chunk against the reference with a feature broken: far. */
static void expect_far(const float *got, const char *flag, const char *value, const char *broken,
                       const char *what) {
    float *ref = reference(flag, value, "chunk", broken);
    float d = diff(got, ref);
    printf("control %-20s %-10s %-34s: %.3g\n", flag, value, what, (double)d);
    ck_assert_msg(d > CONTROL_MIN, "%s %s with %s: only %g from the engine", flag, value, what, (double)d);
    free(ref);
}

static const struct {
    int group, window;
} SELF_EXTEND[] = {{2, 8}, {4, 16}, {3, 10}, {5, 24}};

START_TEST(self_extend_matches_paper) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, gguf);
    char value[32];
    int g = SELF_EXTEND[_i].group, w = SELF_EXTEND[_i].window;
    snprintf(value, sizeof value, "%d,%d", g, w);
    float *got = expect_reference(&m, LAB_SELF_EXTEND, g, w, 0, "--self-extend", value);
    float *steps = engine(&m, LAB_SELF_EXTEND, g, w, 0, RUN_STEPS);
    printf("--self-extend %s: token by token %.3g from one chunk\n", value, (double)diff(steps, got));
    ck_assert_msg(diff(steps, got) <= 1e-5f, "decode differs from prefill by %g", (double)diff(steps, got));
    /* Where G divides W a key W back scores the same either way (its
     * grouped distance is W too: the shift makes the two kinds meet), so
     * the boundary shows only where it does not. */
    if (w % g) {
        expect_far(got, "--self-extend", value, "se-boundary", "neighbours p_q - p_k <= W");
        expect_far(got, "--self-extend", value, "se-true-division", "the shift W - W/G unfloored");
    }
    float *plain = engine(&m, LAB_NONE, 0, 0, 0, RUN_CHUNK);
    printf("control --self-extend %s: plain attention %.3g away\n", value, (double)diff(plain, got));
    ck_assert_msg(diff(plain, got) > CONTROL_MIN, "Self-Extend moved logits by only %g", (double)diff(plain, got));
    free(plain);
    free(steps);
    free(got);
    model_free(&m);
}
END_TEST

/* G = 1 groups nothing and its shift is W - W = 0: the grouped scores are
 * the neighbours' own, bit for bit, whatever W. */
START_TEST(self_extend_group_one_is_plain) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, gguf);
    float *plain = engine(&m, LAB_NONE, 0, 0, 0, RUN_CHUNK), *one = engine(&m, LAB_SELF_EXTEND, 1, 8, 0, RUN_CHUNK);
    ck_assert_msg(memcmp(plain, one, sizeof(float) * N_TOKENS * VOCAB) == 0,
                  "G = 1 differs from plain attention by %g", (double)diff(plain, one));
    LayerAttention *table = model_layers_for(&m, &m.pe);
    PosencError err;
    ck_assert_int_eq(model_layers_self_extend(&m, table, 2, 8, &err), 0);
    ck_assert_int_eq(table[2].self_extend_group, 2); /* the RoPE layers group, */
    ck_assert_int_eq(table[3].self_extend_group, 0); /* the NoPE layer is left as it is */
    PeParams none = pe_params_default(PE_NONE);
    LayerAttention *nope = model_layers_for(&m, &none);
    for (int l = 0; l < m.config.n_layers; l++) nope[l].pe = none;
    ck_assert_int_eq(model_layers_self_extend(&m, nope, 2, 8, &err), -1);
    ck_assert_msg(strstr(err.msg, "no layer of this model rotates"), "%s", err.msg);
    free(nope);
    free(table);
    free(plain);
    free(one);
    model_free(&m);
}
END_TEST

/* A context shift under Self-Extend on layer 0 alone (its keys depend only
 * on tokens and positions): the next token's logits equal the kept tokens
 * run afresh at their new positions, the grouped keys moved by
 * floor(new / G) - floor(old / G) (keys at 40 - 16 = 24 positions cross
 * group boundaries of G = 3 unevenly).  Control: the grouped keys moved
 * back where they were (the neighbour keys moved). */
static float shift_vs_fresh(const Model *m, int grouped_stale) {
    enum { N_CTX = 48, FED = 40, KEEP = 4, DISCARD = 16 };
    Model one = *m;
    one.config.n_layers = 1;
    LayerAttention *table = model_layers_for(&one, &one.pe);
    PosencError err;
    ck_assert_int_eq(model_layers_self_extend(&one, table, 3, 10, &err), 0);
    Context ctx, fresh;
    tests_build_context(&ctx, &one, &one.pe, N_CTX);
    tests_build_context(&fresh, &one, &one.pe, N_CTX);
    ck_assert_msg(context_use_layers(&ctx, table, &err) == 0 && context_use_layers(&fresh, table, &err) == 0,
                  "%s", err.msg);
    context_forward(&ctx, ids, FED, 0, 0);
    ck_assert_msg(context_shift(&ctx, KEEP, DISCARD, CONTEXT_SHIFT_ON, &err) == 0, "%s", err.msg);
    for (int c = KEEP; grouped_stale && c < ctx.cache.n_used; c++) {
        int now = ctx.cache.pos[c];
        kv_cache_load_grouped(&ctx.cache, 0, c, 1, ctx.state.k);
        pe_rope_rerotate(&ctx.layers[0].pe, ctx.state.k, m->config.n_kv_heads, (now + DISCARD) / 3 - now / 3);
        kv_cache_store_grouped(&ctx.cache, 0, c, 1, ctx.state.k);
    }
    float shifted[VOCAB];
    memcpy(shifted, context_forward(&ctx, ids + FED, 1, FED - DISCARD, 0), sizeof shifted);
    int kept[FED - DISCARD + 1], n = 0;
    for (int i = 0; i <= FED; i++)
        if (i < KEEP || i >= KEEP + DISCARD) kept[n++] = ids[i];
    float d = tests_max_abs_diff(shifted, context_forward(&fresh, kept, n, 0, 0), VOCAB);
    context_free(&ctx);
    context_free(&fresh);
    free(table);
    return d;
}

START_TEST(self_extend_through_a_shift) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, gguf);
    float d = shift_vs_fresh(&m, 0), stale = shift_vs_fresh(&m, 1);
    printf("Self-Extend 3,10 after a shift: %.3g from the kept tokens afresh; grouped keys not moved: %.3g\n",
           (double)d, (double)stale);
    ck_assert_msg(d <= LOGIT_TOL, "after a shift: %g", (double)d);
    ck_assert_msg(stale > CONTROL_MIN, "unmoved grouped keys only %g off", (double)stale);
    model_free(&m);
}
END_TEST

/* llama.cpp's edits, token by token and after a 50-token chunk (a chunk
 * alone is never edited: llama.cpp groups between calls). */
START_TEST(group_attention_matches_llamacpp) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, gguf);
    const struct { int g, w; } cases[] = {{2, 8}, {4, 16}};
    for (int i = 0; i < 2; i++) {
        char value[32];
        snprintf(value, sizeof value, "%d,%d", cases[i].g, cases[i].w);
        float *chunk = expect_reference(&m, LAB_NONE, cases[i].g, cases[i].w, 1, "--group-attention", value);
        float *plain = engine(&m, LAB_NONE, 0, 0, 0, RUN_CHUNK);
        ck_assert_msg(memcmp(chunk, plain, sizeof(float) * N_TOKENS * VOCAB) == 0, "a chunk alone was edited");
        float *steps = engine(&m, LAB_NONE, cases[i].g, cases[i].w, 1, RUN_STEPS);
        float *paper = reference("--self-extend", value, "steps", NULL);
        printf("control --group-attention %s: the paper's Self-Extend %.3g away; plain %.3g\n", value,
               (double)diff(steps, paper), (double)diff(steps, plain));
        ck_assert_msg(diff(steps, paper) > CONTROL_MIN, "llama.cpp's grouping equals the paper's (%g)",
                      (double)diff(steps, paper));
        ck_assert_msg(diff(steps, plain) > CONTROL_MIN, "group attention changed nothing (%g)",
                      (double)diff(steps, plain));
        free(paper);
        free(steps);
        free(plain);
        free(chunk);
    }
    model_free(&m);
}
END_TEST

START_TEST(temperature_matches_families) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, gguf);
    /* L = 10 puts floor steps at 10, 20, ... and Llama 4's one position earlier */
    float *mistral = expect_reference(&m, LAB_TEMPERATURE, 0.5, 10, 0, "--attn-temperature", "0.5,10");
    expect_far(mistral, "--attn-temperature", "0.5,10", "temperature-offset", "floor((p + 1) / L)");
    float *llama4 = expect_reference(&m, LAB_TEMPERATURE_LLAMA4, 0.5, 10, 0, "--attn-temperature",
                                     "0.5,10,llama4");
    expect_far(llama4, "--attn-temperature", "0.5,10,llama4", "temperature-offset", "floor(p / L)");
    free(mistral);
    free(llama4);
    model_free(&m);
}
END_TEST

START_TEST(chunked_attention_matches_reference) {
    if (!ready) return;
    Model m;
    tests_load_model(&m, gguf);
    float *got = expect_reference(&m, LAB_CHUNK, 0, 16, 0, "--chunk", "16");
    expect_far(got, "--chunk", "16", "chunk-shifted", "chunks starting at 1, 17, ...");
    free(got);
    model_free(&m);
}
END_TEST

/* From the command line: the trace shows both kinds of positions (and
 * llama.cpp's edits), -m inspect the table; misuse is one error line
 * naming the flag, before any work. */
START_TEST(lab_flags) {
    if (!ready) return;
    const char *se[] = {gguf, "-i", "hello world, this is a test", "-n", "40", "-t", "0",
                        "--self-extend", "2,8", "--trace-positions", NULL};
    TestsRun r = tests_run_engine_ok(se);
    ck_assert_msg(strstr(r.err, "[pos] q=39 't' cache=0-38 (39/128 cells) self-extend G=2 W=8: q=39 reads "
                                "32-39 at their positions, 32 cells at 0-31 grouped to 0-15 with q at 23"),
                  "%s", r.err);
    tests_run_free(&r);
    const char *ga[] = {gguf, "-i", "hello world, this is a test", "-n", "40", "-t", "0",
                        "--self-extend-llamacpp", "2,8", "--trace-positions", NULL};
    r = tests_run_engine_ok(ga);
    ck_assert_msg(strstr(r.err, "[group] the tokens first at positions 0-7 now at 0-3 (grouped by 2); "
                                "the next token takes position 24\n") &&
                  strstr(r.err, "cache=0-15 x2,16-22 (39/128 cells)"), "%s", r.err);
    tests_run_free(&r);
    const char *show[] = {gguf, "-m", "inspect", "--self-extend", "4,32", "--attn-temperature",
                          "0.1,64,llama4", NULL};
    r = tests_run_engine_ok(show);
    ck_assert_msg(strstr(r.out, "  0-2              rope theta=10000 full self-extend=4,32\n"
                                "  3                none full temperature=0.1,64,llama4\n"), "%s", r.out);
    tests_run_free(&r);
    const struct {
        const char *flag, *value, *needle;
    } bad[] = {
        {"--self-extend", "2", "--self-extend expects G,W (a group and a window, integers >= 1), got '2'"},
        {"--self-extend", "0,8", "--self-extend expects G,W"},
        {"--self-extend-llamacpp", "3,8", "--self-extend-llamacpp 3,8: group attention needs a width that is "
                                          "a multiple of the group"},
        {"--attn-temperature", "0.1", "--attn-temperature expects B,L or B,L,llama4"},
        {"--attn-temperature", "0.1,8,llama3", "--attn-temperature expects B,L or B,L,llama4"},
        {"--pe", "alibi", "--self-extend with --pe alibi: Self-Extend groups rotary positions and no layer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int pe = !strcmp(bad[i].flag, "--pe");
        const char *args[] = {gguf, "-i", "hi", bad[i].flag, bad[i].value, pe ? "--self-extend" : NULL, "2,8", NULL};
        tests_expect_error(args, bad[i].needle);
    }
    const char *both[] = {gguf, "--self-extend", "2,8", "--self-extend-llamacpp", "2,8", NULL};
    tests_expect_error(both, "--self-extend and --self-extend-llamacpp exclude each other");
    const char *keep[] = {gguf, "--self-extend-llamacpp", "2,8", "--keep", "4", NULL};
    tests_expect_error(keep, "--keep applies to context shifts, and --self-extend-llamacpp replaces them");
    const char *nope[] = {gguf, "--attn-temperature", "0.1,8,llama4", "--pe-layers", "3=rope", "-m", "inspect", NULL};
    tests_expect_error(nope, "--attn-temperature: Llama 4's attention temperature acts on the layers without position");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("position_lab");
    TCase *tc = tcase_create("lab");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, self_extend_matches_paper, 0, (int)(sizeof SELF_EXTEND / sizeof *SELF_EXTEND));
    tcase_add_test(tc, self_extend_group_one_is_plain);
    tcase_add_test(tc, self_extend_through_a_shift);
    tcase_add_test(tc, group_attention_matches_llamacpp);
    tcase_add_test(tc, temperature_matches_families);
    tcase_add_test(tc, chunked_attention_matches_reference);
    tcase_add_test(tc, lab_flags);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tests_run_suite(suite()); }
