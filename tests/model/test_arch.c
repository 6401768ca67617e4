/* Every architecture family against an independent float64 NumPy forward
 * written from the Hugging Face modeling code (tools/arch_reference.py):
 * tiny random checkpoints at each family's real layout (GQA, partial
 * rotary, per-head fused qkv, multi-query, tied and untied heads) are
 * generated, converted with tools/convert.py and run by the engine, for a
 * prompt in one chunk, at an offset, and token by token.  Each family's
 * negative control breaks its distinctive feature in the reference, which
 * must then disagree with the engine.  The same files in llama.cpp
 * (tests/fixtures/arch_llamacpp.h) give a second, independent check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common.h"
#include "tests/fixtures/arch_llamacpp.h"

/* float32 engine vs float64 reference: logits |l| < 30 from dot products
 * of <= 256 terms in two layers; rounding moves them by ~1e-5. */
#define LOGIT_TOL 1e-4f
/* A broken feature moves logits by far more (each failure prints it). */
#define CONTROL_MIN 1e-2f

/* The prompt: byte tokens (the checkpoints' vocabulary is the 256 bytes). */
static const int IDS[] = {72, 101, 108, 108, 111, 44, 32, 112, 111, 115, 101, 110, 99, 33};
#define N_IDS ((int)(sizeof IDS / sizeof IDS[0]))
#define VOCAB 256
#define OFFSET 9

typedef struct {
    const char *name;    /* build/arch/<name> */
    const char *family;  /* arch_reference.py's family (HF model_type) */
    const char *arch;    /* the GGUF general.architecture convert.py writes */
    int tied;
} Case;

static const Case CASES[] = {
    {"qwen2", "qwen2", "qwen2", 0},          {"qwen2-tied", "qwen2", "qwen2", 1},
    {"gptneox", "gpt_neox", "gptneox", 0},   {"bloom", "bloom", "bloom", 0},
    {"starcoder", "gpt_bigcode", "starcoder", 0}, {"phi2", "phi", "phi2", 0},
    {"mpt", "mpt", "mpt", 0},                {"gemma", "gemma", "gemma", 0},
    {"mistral", "mistral", "llama", 0},      /* llama with a sliding window of 5 */
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

/* The negative controls: arch_reference.py --break on a case's checkpoint. */
typedef struct {
    const char *name;
    const char *broken;
} Control;

static const Control CONTROLS[] = {
    {"qwen2", "qkv-bias"},      {"qwen2-tied", "qkv-bias"},  {"gptneox", "parallel"},
    {"gptneox", "full-rotary"}, {"gptneox", "qkv-order"},    {"bloom", "embed-norm"},
    {"bloom", "qkv-order"},     {"starcoder", "positions"},  {"phi2", "shared-norm"},
    {"mpt", "clamp"},           {"gemma", "norm-plus-one"},    {"mistral", "window"},
};

static char dirs[N_CASES][256], ggufs[N_CASES][256];
static int ready = 0;

static void setup(void) {
    if (!tests_python_available("architecture families")) return;
    for (int i = 0; i < N_CASES; i++) {
        snprintf(dirs[i], sizeof dirs[i], "build/arch/%s", CASES[i].name);
        snprintf(ggufs[i], sizeof ggufs[i], "%s",
                 tests_make_family(CASES[i].family, CASES[i].tied, CASES[i].name));
    }
    ready = 1;
}

static void teardown(void) {}

static int case_index(const char *name) {
    for (int i = 0; i < N_CASES; i++)
        if (strcmp(CASES[i].name, name) == 0) return i;
    ck_abort_msg("%s is not in CASES", name);
    return -1;
}

/* The reference's logits (N_IDS, VOCAB) for the case, at pos0, with
 * `broken` (or NULL) broken. */
static float *reference(int c, int pos0, const char *broken) {
    char ids[256] = "", p0[16];
    for (int i = 0; i < N_IDS; i++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", IDS[i]);
    snprintf(p0, sizeof p0, "%d", pos0);
    const char *args[] = {"tools/arch_reference.py", "logits", dirs[c], "--ids", ids, "--pos0", p0,
                          broken ? "--break" : NULL, broken, NULL};
    TestsRun r = tests_run_python_ok(args);
    float *out = malloc(sizeof(float) * N_IDS * VOCAB);
    char *s = r.out;
    for (int i = 0; i < N_IDS * VOCAB; i++) {
        char *end;
        out[i] = strtof(s, &end);
        ck_assert_msg(end != s, "%s: reference output ends after %d numbers", CASES[c].name, i);
        s = end;
    }
    tests_run_free(&r);
    return out;
}

/* max |engine - ref| over the prompt, in one chunk at pos0 */
static float chunk_diff(const Model *m, const float *ref, int pos0) {
    Context ctx;
    tests_build_context(&ctx, m, &m->pe, 64);
    const float *lg = context_forward(&ctx, IDS, N_IDS, pos0, 1);
    float d = tests_max_abs_diff(lg, ref, (size_t)N_IDS * VOCAB);
    context_free(&ctx);
    return d;
}

START_TEST(matches_reference) {
    if (!ready) return;
    const Case *c = &CASES[_i];
    Model m;
    tests_load_model(&m, ggufs[_i]);
    ck_assert_str_eq(m.config.family.name, c->arch);
    float *ref = reference(_i, 0, NULL), *ref_off = reference(_i, OFFSET, NULL);

    float d = chunk_diff(&m, ref, 0);
    printf("%-15s chunk  max |logit - reference| = %.3g\n", c->name, (double)d);
    ck_assert_msg(d <= LOGIT_TOL, "%s: chunked prompt differs by %g", c->name, (double)d);
    d = chunk_diff(&m, ref_off, OFFSET);
    ck_assert_msg(d <= LOGIT_TOL, "%s: prompt at offset %d differs by %g", c->name, OFFSET,
                  (double)d);

    Context ctx;
    tests_build_context(&ctx, &m, &m.pe, 64);
    float worst = 0;
    for (int t = 0; t < N_IDS; t++) {
        const float *lg = context_forward(&ctx, IDS + t, 1, t, 0);
        float dt = tests_max_abs_diff(lg, ref + (size_t)t * VOCAB, VOCAB);
        worst = dt > worst || dt != dt ? dt : worst;
    }
    printf("%-15s decode max |logit - reference| = %.3g\n", c->name, (double)worst);
    ck_assert_msg(worst <= LOGIT_TOL, "%s: token-by-token decode differs by %g", c->name,
                  (double)worst);
    context_free(&ctx);
    free(ref);
    free(ref_off);
    model_free(&m);
}
END_TEST

START_TEST(team_decode_is_the_steps_bits) {
    if (ready) tests_check_team_decode(ggufs[_i], IDS, N_IDS, CASES[_i].name);
}
END_TEST

START_TEST(broken_feature_is_detected) {
    if (!ready) return;
    const Control *c = &CONTROLS[_i];
    int k = case_index(c->name);
    Model m;
    tests_load_model(&m, ggufs[k]);
    float *ref = reference(k, 0, c->broken);
    float d = chunk_diff(&m, ref, 0);
    printf("%-15s control --break %s: max |logit - reference| = %.3g\n", c->name, c->broken,
           (double)d);
    ck_assert_msg(d > CONTROL_MIN, "%s: breaking %s leaves the logits within %g", c->name,
                  c->broken, (double)d);
    free(ref);
    model_free(&m);
}
END_TEST

/* ---- llama.cpp -------------------------------------------------------------------------- */

/* llama.cpp computes in f32 too, but with its own kernels: its GELU is the
 * tanh form from an f16 table (HF's GPT-NeoX and MPT use erf), which moves
 * the mean NLL by up to 2e-4 (measured: starcoder, mpt); without GELU
 * (qwen2) the difference is ~1e-7. */
#define LLAMACPP_TOL 1e-3
#define WINDOW 64
#define WINDOWS 20

/* The engine's mean NLL as llama-perplexity scores it: in each window of
 * WINDOW byte tokens (a fresh cache, positions from 0), the tokens
 * predicted from positions WINDOW/2 .. WINDOW-2. */
static double llamacpp_nll(const Model *m, const PeParams *pe, const char *text) {
    Context ctx;
    tests_build_context(&ctx, m, pe, WINDOW);
    double sum = 0;
    int count = 0;
    for (int w = 0; w < WINDOWS; w++) {
        int ids[WINDOW];
        for (int t = 0; t < WINDOW; t++) ids[t] = (unsigned char)text[w * WINDOW + t];
        kv_cache_clear(&ctx.cache);
        const float *lg = context_forward(&ctx, ids, WINDOW, 0, 1);
        for (int t = WINDOW / 2; t < WINDOW - 1; t++, count++) {
            const float *row = lg + (size_t)t * VOCAB;
            double mx = row[0], z = 0;
            for (int v = 1; v < VOCAB; v++) mx = row[v] > mx ? row[v] : mx;
            for (int v = 0; v < VOCAB; v++) z += exp(row[v] - mx);
            sum += mx + log(z) - row[ids[t + 1]];
        }
    }
    context_free(&ctx);
    return sum / count;
}

/* The family's distinctive feature switched off in the loaded engine: the
 * negative control of the llama.cpp comparison.  (BLOOM's embedding norm
 * moves this NLL by only 0.007 on random weights whose embeddings are
 * already near unit scale; its ALiBi is the feature checked here.) */
static void break_feature(Model *m, PeParams *pe, const char *arch) {
    if (strcmp(arch, "qwen2") == 0) pe->rope_pairing = PE_ROPE_INTERLEAVED;
    else if (strcmp(arch, "gptneox") == 0 || strcmp(arch, "phi2") == 0)
        m->config.family.parallel_residual = 0;
    else if (strcmp(arch, "mpt") == 0) m->config.clamp_kqv = 0.0f;
    else if (strcmp(arch, "gemma") == 0) m->config.embed_scale = 1.0f;
    else if (strcmp(arch, "bloom") == 0 || strcmp(arch, "starcoder") == 0)
        *pe = pe_params_default(PE_NONE);
    else ck_abort_msg("no control for %s", arch);
}

START_TEST(matches_llamacpp) {
    if (!ready) return;
    const ArchLlamacppRef *f = &ARCH_LLAMACPP[_i];
    int c = case_index(f->name);
    const char *models = tests_models_dir("the llama.cpp comparison");
    if (!models) return;
    char script[512];
    snprintf(script, sizeof script,
             "import hashlib; print(hashlib.sha256(open('%s/model.safetensors', 'rb')"
             ".read()).hexdigest()[:16])", dirs[c]);
    const char *args[] = {"-c", script, NULL};
    TestsRun r = tests_run_python_ok(args);
    ck_assert_msg(strncmp(r.out, f->sha256_16, 16) == 0,
                  "%s: the generated checkpoint (sha256 %.16s) is not the one the fixture was "
                  "measured on (%s): NumPy's generator changed?", f->name, r.out, f->sha256_16);
    tests_run_free(&r);

    size_t len;
    char *text = tests_read_file(tests_text_path(models, "tiny-shakespeare.txt"), &len);
    ck_assert(len >= WINDOW * WINDOWS);
    Model m;
    tests_load_model(&m, ggufs[c]);
    PeParams pe = m.pe;
    double want = log(f->ppl), d = fabs(llamacpp_nll(&m, &pe, text) - want);
    printf("%-15s llama.cpp NLL %.6f, |posenc - llama.cpp| = %.3g\n", f->name, want, d);
    ck_assert_msg(d <= LLAMACPP_TOL, "%s: mean NLL differs from llama.cpp's by %g", f->name, d);
    break_feature(&m, &pe, CASES[c].arch);
    d = fabs(llamacpp_nll(&m, &pe, text) - want);
    printf("%-15s control (feature off): |posenc - llama.cpp| = %.3g\n", f->name, d);
    ck_assert_msg(d > 10 * LLAMACPP_TOL, "%s: the control stays within %g of llama.cpp", f->name, d);
    model_free(&m);
    free(text);
}
END_TEST

/* ---- refusals ------------------------------------------------------------------------- */

typedef struct {
    const char *name; /* the case whose file is edited */
    const char *drop; /* tensor left out, or "" */
    const char *set;  /* key set, or "" */
    const char *needle;
} Refusal;

static const Refusal REFUSALS[] = {
    {"qwen2", "blk.1.attn_k.bias", "", "missing tensor 'blk.1.attn_k.bias'"},
    {"bloom", "token_embd_norm.bias", "", "missing tensor 'token_embd_norm.bias'"},
    {"phi2", "output.bias", "", "missing tensor 'output.bias'"},
    {"gptneox", "blk.0.ffn_norm.weight", "", "missing tensor 'blk.0.ffn_norm.weight'"},
    {"mpt", "", "mpt.attention.clamp_kqv=f:-1", "mpt.attention.clamp_kqv -1 is out of range"},
    {"gemma", "", "gemma.attention.value_length=u:16",
     "gemma.attention.value_length = 16 differs from the key length 32"},
    {"gptneox", "", "gptneox.rope.dimension_count=u:18",
     "rotary dims 18 must be even and in 2..16"},
    {"starcoder", "", "general.architecture=s:falcon",
     "unsupported architecture 'falcon' (supported: llama, gpt2, qwen2, gptneox, bloom, "
     "starcoder, phi2, mpt, gemma, smollm3, phi3, qwen3, gemma2, gemma3, olmo2, exaone4, "
     "granite, stablelm, cohere2, qwen3moe, olmoe, granitemoe, gpt-oss)"},
    /* control: the same copy with nothing changed loads */
    {"qwen2", "", "", NULL},
};

/* The case's GGUF edited by tools/gguf_edit.py into `out`. */
static void edited_copy(int c, const char *drop, const char *set, char *out, size_t n, int tag) {
    snprintf(out, n, "%s.edit-%d.gguf", dirs[c], tag);
    const char *args[] = {"tools/gguf_edit.py", ggufs[c], out, drop, set, NULL};
    TestsRun r = tests_run_python_ok(args);
    tests_run_free(&r);
}

START_TEST(malformed_family_file) {
    if (!ready) return;
    const Refusal *f = &REFUSALS[_i];
    int c = case_index(f->name);
    char out[300];
    edited_copy(c, f->drop, f->set, out, sizeof out, (int)_i);
    Model m;
    PosencError err;
    int rc = model_load(&m, out, &err);
    if (!f->needle) {
        ck_assert_msg(rc == 0, "the unedited copy does not load: %s", err.msg);
        model_free(&m);
    } else {
        ck_assert_msg(rc != 0, "%s loaded despite the edit", out);
        tests_expect_file_error(err.msg, out, f->needle);
    }
    remove(out);
}
END_TEST

/* An MPT file as llama.cpp writes it (no posenc.* keys): ALiBi, unless
 * max_alibi_bias is 0 ("no alibi"), when its positions are the learned
 * table's or none. */
START_TEST(mpt_without_alibi) {
    if (!ready) return;
    static const struct {
        const char *set;
        PeKind want;
    } cases[] = {
        {"posenc.positional=", PE_ALIBI},
        {"posenc.positional=;mpt.attention.max_alibi_bias=f:0", PE_NONE},
        {"posenc.positional=;mpt.attention.max_alibi_bias=f:8", PE_ALIBI},
    };
    int c = case_index("mpt");
    for (int i = 0; i < 3; i++) {
        char out[300];
        edited_copy(c, "", cases[i].set, out, sizeof out, 100 + i);
        Model m;
        tests_load_model(&m, out);
        ck_assert_msg(m.pe.kind == cases[i].want, "%s: scheme %s, expected %s", cases[i].set,
                      pe_kind_name(m.pe.kind), pe_kind_name(cases[i].want));
        model_free(&m);
        remove(out);
    }
}
END_TEST

/* The sliding window, visible: the position trace says what the chunk's
 * last query still sees and how many cached cells it cannot, the cache
 * dump marks those cells (window 5: after 9 tokens the next, at position
 * 9, sees 5-9, so positions 0-4 are out).  Control: a family without a
 * window prints none of it. */
START_TEST(window_shown) {
    if (!ready) return;
    const char *args[] = {ggufs[case_index("mistral")], "-t", "0", "-n", "10", "-i", "abcdef",
                          "--trace-positions", "--dump-cache", NULL};
    TestsRun r = tests_run_engine_ok(args);
    ck_assert_msg(strstr(r.err, "cache=empty (0/64 cells) window=5: q=5 sees 1-5, 0 cached cells out of reach\n"),
                  "%s", r.err);
    ck_assert_msg(strstr(r.err, "cache=0-7 (8/64 cells) window=5: q=8 sees 4-8, 4 cached cells out of reach\n"),
                  "%s", r.err);
    ck_assert_msg(strstr(r.err, "window 5: the next token (position 9) sees positions 5-9\n"), "%s", r.err);
    int marked = 0;
    for (const char *p = r.err; (p = strstr(p, " (out of the window)\n")); p++) marked++;
    ck_assert_int_eq(marked, 5);
    tests_run_free(&r);

    const char *plain[] = {ggufs[case_index("qwen2")], "-t", "0", "-n", "10", "-i", "abcdef",
                           "--trace-positions", "--dump-cache", NULL};
    r = tests_run_engine_ok(plain);
    ck_assert_msg(strstr(r.err, "[pos] q=8 ") && !strstr(r.err, "window"), "%s", r.err);
    tests_run_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("arch");
    TCase *tc = tcase_create("families");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, matches_reference, 0, N_CASES);
    tcase_add_loop_test(tc, team_decode_is_the_steps_bits, 0, N_CASES);
    tcase_add_loop_test(tc, broken_feature_is_detected, 0,
                        (int)(sizeof CONTROLS / sizeof CONTROLS[0]));
    tcase_add_loop_test(tc, malformed_family_file, 0,
                        (int)(sizeof REFUSALS / sizeof REFUSALS[0]));
    tcase_add_test(tc, mpt_without_alibi);
    tcase_add_test(tc, window_shown);
    tcase_add_loop_test(tc, matches_llamacpp, 0,
                        (int)(sizeof ARCH_LLAMACPP / sizeof ARCH_LLAMACPP[0]));
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
