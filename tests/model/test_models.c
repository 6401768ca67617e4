/* Real models through the GGUF loader, each converted here by
 * tools/convert.py from ../shared/models, against references:
 *   - the PE zoo (one GPT-2-layout model per positional scheme) and
 *     makemore-names: PyTorch logits and greedy text from reference.json;
 *   - stories260K: the GGUF conversions against the llama2.c .bin itself
 *     (same kernels, so F32 must be bit-identical), F16 within a measured
 *     bound, and the HF layout (GQA q/k permutation undone by the converter);
 *   - --pe overrides on the same weights, and malformed files.
 * Every comparison has a negative control: a deliberately wrong parameter
 * that must break it, so a comparison that cannot fail would show. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
#include "modes/inspect.h"
#include "model/sampler.h"
#include "tests/common.h"
#include "tests/fixtures/stories260k_ref.h"
#include "tests/fixtures/zoo_t5_ref.h"

/* Zoo and makemore logits are PyTorch float32 with another summation
 * order: both sides round at ~6e-8 relative per operation; over 4 layers
 * of width 128 the measured max error is 1.1e-6 .. 2.9e-6 (printed by the
 * tests).  1e-4 is the bound, 30x above that, while every negative
 * control below moves the logits by more than 100x it (measured 0.30 ..
 * 7.5). */
#define LOGIT_TOL 1e-4f
#define CONTROL_MIN (100 * LOGIT_TOL)

/* stories260K with F16 weights against the same weights in F32.  F16 keeps
 * 11 significant bits, a relative rounding of up to 2^-11 = 4.9e-4 per
 * weight; the errors mostly cancel in each dot product but not in the
 * logits' scale, so expect ~4.9e-4 x max |logit| (22 here) = 0.011, which
 * is what 200 greedy steps measure (0.0113; the zoo's learned model in
 * F16: 5.9e-4 against PyTorch).  0.05 leaves 4x headroom for another
 * summation order or platform, and is still 10x below the smallest
 * negative-control shift measured above. */
#define F16_TOL 0.05f

/* The zoo's rope model in BF16 (8 significant bits: 2^-8 = 3.9e-3
 * relative) and Q8_0 (each weight rounded to 1/254 of its 32-block's
 * largest magnitude) against PyTorch: ~3.9e-3 x max |logit| (6.2) = 0.024
 * expected for either.  BF16 measured 0.0057 (0.0081 where prefill rounds
 * the activations to BF16, on AMX or AVX512-BF16): its bound is twice the
 * larger, and the control is that q8_0's coarser rounding of the same model
 * lies outside it.  Q8_0 measured 0.021 (0.032 with int8 activations); 0.1
 * is 3x the larger. */
#define BF16_TOL 0.016f
#define Q8_0_TOL 0.1f

#define MAX_VOCAB 512
#define MAX_REF_IDS 256
#define STORIES_STEPS 200
#define ZOO_STEPS 120

/* ---- preparation: conversions and reference values, once ------------------- */

typedef struct {
    const char *dir;        /* under the models directory */
    const char *text_key;   /* reference.json key of the greedy text */
    const char *gguf;       /* the F32 conversion */
    int prompt[16], n_prompt;
    float logits[MAX_VOCAB];
    int n_logits;
    int text[MAX_REF_IDS];  /* ids of the greedy reference text */
    int n_text;
} Ref;

enum { ZOO_SINUSOIDAL, ZOO_LEARNED, ZOO_ROPE, ZOO_ALIBI, ZOO_NONE, ZOO_T5, N_ZOO,
       MAKEMORE = N_ZOO, N_REFS };

#define ZOO_REF(scheme) {.dir = "zoo/" scheme, .text_key = "greedy_120_window128_text"}
static Ref refs[N_REFS] = {
    ZOO_REF("sinusoidal"), ZOO_REF("learned"), ZOO_REF("rope"), ZOO_REF("alibi"), ZOO_REF("none"),
    ZOO_REF("t5"), {.dir = "makemore-names", .text_key = "greedy_from_bos"},
};

static const char *models;        /* NULL: every test skips */
static char prep_error[1024];     /* set when preparation failed: every test fails with it */
static char stories_bin[512], stories_tok[512];
static const char *stories_f32, *stories_f16, *stories_hf;

/* Reference models in other tensor types. */
typedef struct {
    int ref;
    const char *dtype;
    TensorType type;
    float tol;
    const char *gguf;
} Variant;

enum { V_F16, V_BF16, V_Q8_0 };
static Variant variants[] = {
    /* F16 also stores position_embd as f16: the loader converts it to f32 */
    [V_F16] = {ZOO_LEARNED, "f16", TENSOR_F16, F16_TOL, NULL},
    [V_BF16] = {ZOO_ROPE, "bf16", TENSOR_BF16, BF16_TOL, NULL},
    [V_Q8_0] = {ZOO_ROPE, "q8_0", TENSOR_Q8_0, Q8_0_TOL, NULL},
};
#define N_VARIANTS (int)(sizeof variants / sizeof variants[0])

/* Prints, per reference directory: the prompt ids, logits_last, and the ids
 * of the greedy text.  Characters map to ids through vocab.json, whose keys
 * spell bytes with GPT-2's byte-to-unicode table (space is U+0120). */
static const char REF_SCRIPT[] =
    "import json, sys\n"
    "d, key = sys.argv[1], sys.argv[2]\n"
    "ref = json.load(open(d + \"/reference.json\"))\n"
    "vocab = json.load(open(d + \"/vocab.json\"))\n"
    "bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))\n"
    "cs = bs[:]\n"
    "for b in range(256):\n"
    "    if b not in bs:\n"
    "        bs.append(b)\n"
    "        cs.append(256 + len(cs) - 188)  # 188 printable bytes map to themselves\n"
    "byte_char = dict(zip(bs, map(chr, cs)))\n"
    "ids = [vocab[\"\".join(byte_char[b] for b in c.encode())] for c in ref[key]]\n"
    "print(\" \".join(map(str, ref[\"prompt_ids\"])))\n"
    "print(\" \".join(\"%.9g\" % x for x in ref[\"logits_last\"]))\n"
    "print(\" \".join(map(str, ids)))\n";

static int prep_fail(const char *fmt, const char *a, const char *b) {
    if (!prep_error[0]) snprintf(prep_error, sizeof prep_error, fmt, a, b);
    return -1;
}

/* Python's stdout (malloc'd) when it exits 0; else NULL, after passing its
 * stderr on to ours. */
static char *python_output(const char *const *args) {
    TestsRun r = tests_run_python(args);
    if (r.status != 0) {
        fputs(r.err, stderr);
        tests_run_free(&r);
        return NULL;
    }
    free(r.err);
    return r.out;
}

/* Parses one line of whitespace-separated numbers; returns the line's end. */
static const char *parse_ints(const char *s, int *out, int max, int *n) {
    for (*n = 0; *s && *s != '\n' && *n < max; (*n)++) out[*n] = (int)strtol(s, (char **)&s, 10);
    return *s == '\n' ? s + 1 : s;
}

static const char *parse_floats(const char *s, float *out, int max, int *n) {
    for (*n = 0; *s && *s != '\n' && *n < max; (*n)++) out[*n] = strtof(s, (char **)&s);
    return *s == '\n' ? s + 1 : s;
}

/* models/<input> converted with the extra args into a temporary GGUF
 * (removed at exit); NULL after recording the failure. */
static const char *convert(const char *input, const char *const *extra) {
    const char *out = tests_convert(models, input, extra);
    if (!out) prep_fail("tools/convert.py %s failed (see stderr)%s", input, "");
    return out;
}

static int read_reference(Ref *r) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", models, r->dir);
    const char *args[] = {"-c", REF_SCRIPT, dir, r->text_key, NULL};
    char *o = python_output(args);
    if (!o) return prep_fail("reading %s/reference.json failed (%s; see stderr)", dir, "");
    const char *s = parse_ints(o, r->prompt, 16, &r->n_prompt);
    s = parse_floats(s, r->logits, MAX_VOCAB, &r->n_logits);
    parse_ints(s, r->text, MAX_REF_IDS, &r->n_text);
    free(o);
    return 0;
}

/* The unchecked fixture of every test case (Check's assertions, which the
 * helpers use, work only under the runner); the first one does the work. */
static void prepare(void) {
    static int prepared;
    if (prepared) return;
    prepared = 1;
    models = tests_models_dir("GGUF models against their references");
    if (!models) return;
    if (!tests_python_available("GGUF model tests, which run tools/convert.py")) {
        models = NULL;
        return;
    }
    snprintf(stories_bin, sizeof stories_bin, "%s/stories260K/stories260K.bin", models);
    snprintf(stories_tok, sizeof stories_tok, "%s/stories260K/tok512.bin", models);
    for (int i = 0; i < N_REFS; i++)
        if (!(refs[i].gguf = convert(refs[i].dir, NULL)) || read_reference(&refs[i])) return;
    const char *const tok[] = {"--tokenizer", stories_tok, NULL};
    const char *const tok_f16[] = {"--tokenizer", stories_tok, "--dtype", "f16", NULL};
    if (!(stories_f32 = convert("stories260K/stories260K.bin", tok)) ||
        !(stories_f16 = convert("stories260K/stories260K.bin", tok_f16)) ||
        !(stories_hf = convert("stories260K-hf", tok)))
        return;
    for (int i = 0; i < N_VARIANTS; i++) {
        Variant *v = &variants[i];
        const char *const dtype[] = {"--dtype", v->dtype, NULL};
        if (!(v->gguf = convert(refs[v->ref].dir, dtype))) return;
    }
}

/* First line of every test: skip without models, fail on a broken setup. */
#define REQUIRE_MODELS()                                             \
    do {                                                             \
        if (!models) return;                                         \
        ck_assert_msg(prep_error[0] == '\0', "%s", prep_error);      \
    } while (0)

/* ---- running models ---------------------------------------------------------------- */

/* The engine at scheme p: prefill `n` ids at positions pos0.., then
 * greedy-decode `steps` tokens one at a time (stopping after `stop`, if
 * >= 0).  Returns the number of generated ids in gen (may be NULL when
 * steps = 0); the prompt's last logits go to first (vocab floats) and,
 * when `all` is non-NULL, the logits of every decoded step follow there. */
typedef struct {
    const Model *m;
    PeParams pe;
    int pos0;
} Run;

static int run_greedy(const Run *r, const int *ids, int n, int steps, int stop, float *first,
                      int *gen, float *all) {
    int vocab = r->m->config.vocab_size;
    Context ctx;
    tests_build_context(&ctx, r->m, &r->pe, 512);
    PosencError err;
    ck_assert_msg(context_check_chunk(&ctx, ids, n, r->pos0, &err) == 0, "%s", err.msg);
    const float *l = context_forward(&ctx, ids, n, r->pos0, 0);
    memcpy(first, l, (size_t)vocab * sizeof(float));
    int count = 0, pos = r->pos0 + n;
    while (count < steps) {
        int next = sampler_argmax(l, vocab);
        gen[count++] = next;
        if (next == stop || count == steps) break;
        ck_assert_msg(context_check_chunk(&ctx, &next, 1, pos, &err) == 0, "%s", err.msg);
        l = context_forward(&ctx, &next, 1, pos++, 0);
        if (all) memcpy(all + (size_t)(count - 1) * vocab, l, (size_t)vocab * sizeof(float));
    }
    context_free(&ctx);
    return count;
}

static void prompt_logits(const Run *r, const int *ids, int n, float *out) {
    run_greedy(r, ids, n, 0, -1, out, NULL, NULL);
}

static Run native(const Model *m) {
    Run r = {m, m->pe, 0};
    return r;
}

/* ---- zoo and makemore: PyTorch references -------------------------------------------- */

/* Max |logit - reference| after the reference prompt under r. */
static float reference_error(const Ref *ref, const Run *r) {
    float l[MAX_VOCAB];
    ck_assert_int_eq(ref->n_logits, r->m->config.vocab_size);
    prompt_logits(r, ref->prompt, ref->n_prompt, l);
    return tests_max_abs_diff(l, ref->logits, ref->n_logits);
}

/* Greedy steps after the zoo prompt that agree with the reference text
 * before the first difference: 7 + 120 < 128 positions, plain decoding
 * inside the trained window. */
static int zoo_greedy_agreement(const Ref *ref, const Run *r) {
    ck_assert_int_eq(ref->n_text, ref->n_prompt + ZOO_STEPS);
    for (int i = 0; i < ref->n_prompt; i++) ck_assert_int_eq(ref->text[i], ref->prompt[i]);
    float l[MAX_VOCAB];
    int gen[ZOO_STEPS], same = 0;
    ck_assert_int_eq(run_greedy(r, ref->prompt, ref->n_prompt, ZOO_STEPS, -1, l, gen, NULL),
                     ZOO_STEPS);
    while (same < ZOO_STEPS && gen[same] == ref->text[ref->n_prompt + same]) same++;
    return same;
}

/* Bucketing q - k where T5 takes k - q puts every past key in bucket 0:
 * the same logits as a table whose every row is row 0. */
static float t5_bucket0_table[64 * 16];

static const float *t5_table_of_bucket_0(const PeTables *t, int n_heads) {
    size_t row = (size_t)n_heads * sizeof(float);
    ck_assert_uint_le((size_t)t->n_buckets * row, sizeof t5_bucket0_table);
    for (int b = 0; b < t->n_buckets; b++)
        memcpy(t5_bucket0_table + (size_t)b * n_heads, t->relative_bias, row);
    return t5_bucket0_table;
}

/* The negative control of reference `i`: one wrong parameter per scheme,
 * each of which a loader could plausibly get wrong.  alt is a shallow copy
 * of m whose config may differ (never freed). */
static Run control_run(int i, const Model *m, Model *alt, const char **what) {
    *alt = *m;
    Run r = {alt, m->pe, 0};
    switch (i) {
    case ZOO_SINUSOIDAL: alt->config.embed_scale = 1.0f; *what = "embedding scale 1"; break;
    case ZOO_LEARNED:
    case MAKEMORE:       r.pos0 = 1; *what = "positions off by one"; break;
    case ZOO_ROPE:       r.pe.rope_pairing = PE_ROPE_INTERLEAVED; *what = "interleaved pairs"; break;
    case ZOO_ALIBI:      r.pe.alibi_max_bias = 4.0f; *what = "alibi max bias 4"; break;
    case ZOO_T5:
        alt->weights.positional.relative_bias =
            t5_table_of_bucket_0(&m->weights.positional, m->config.n_heads);
        *what = "buckets of q - k instead of k - q";
        break;
    default:             r.pe.kind = PE_ALIBI; *what = "alibi added"; break;
    }
    return r;
}

START_TEST(logits_match_reference) {
    REQUIRE_MODELS();
    const Ref *ref = &refs[_i];
    Model m, alt;
    tests_load_model(&m, ref->gguf);
    Run r = native(&m);
    float d = reference_error(ref, &r);
    fprintf(stderr, "%-16s %-10s max |logit - reference| = %.3g\n", ref->dir,
            pe_kind_name(m.pe.kind), (double)d);
    ck_assert_msg(d <= LOGIT_TOL, "%s: max |logit error| %g > %g", ref->dir, (double)d,
                  (double)LOGIT_TOL);
    const char *what;
    r = control_run(_i, &m, &alt, &what);
    d = reference_error(ref, &r);
    fprintf(stderr, "%-16s control (%s): max |logit - reference| = %.3g\n", ref->dir, what,
            (double)d);
    ck_assert_msg(d > CONTROL_MIN, "%s with %s is still within %g of the reference", ref->dir,
                  what, (double)d);
    model_free(&m);
}
END_TEST

/* Every scheme's hooks (the embedding's, rotation, score biases) inside a
 * decoded token's team: the bits of one thread's steps. */
START_TEST(zoo_team_decode) {
    REQUIRE_MODELS();
    const Ref *ref = &refs[_i];
    tests_check_team_decode(ref->gguf, ref->text, ref->n_text < 48 ? ref->n_text : 48, ref->dir);
}
END_TEST

START_TEST(zoo_greedy_matches_reference) {
    REQUIRE_MODELS();
    const Ref *ref = &refs[_i];
    Model m, alt;
    tests_load_model(&m, ref->gguf);
    Run r = native(&m);
    int same = zoo_greedy_agreement(ref, &r);
    ck_assert_msg(same == ZOO_STEPS, "%s: greedy id %d differs from the reference", ref->dir,
                  same);
    const char *what;
    r = control_run(_i, &m, &alt, &what);
    same = zoo_greedy_agreement(ref, &r);
    fprintf(stderr, "%-16s control (%s): greedy text diverges at step %d\n", ref->dir, what, same);
    ck_assert_msg(same < ZOO_STEPS, "%s with %s still generates the reference", ref->dir, what);
    model_free(&m);
}
END_TEST

/* The zoo's t5 model against the independent float64 NumPy reference
 * (tools/reference.py --zoo, tests/fixtures/zoo_t5_ref.h): PyTorch's
 * reference.json and the engine both agree with it, to the tolerance that
 * holds against PyTorch; the engine bucketing q - k does not. */
START_TEST(t5_matches_numpy_reference) {
    REQUIRE_MODELS();
    const Ref *ref = &refs[ZOO_T5];
    ck_assert_int_eq(ref->n_prompt, REFT5_N_PROMPT_IDS);
    for (int i = 0; i < REFT5_N_PROMPT_IDS; i++) ck_assert_int_eq(ref->prompt[i], REFT5_PROMPT_IDS[i]);
    ck_assert_int_eq(ref->n_logits, (int)(sizeof REFT5_LOGITS / sizeof *REFT5_LOGITS));
    float d_json = tests_max_abs_diff(ref->logits, REFT5_LOGITS, ref->n_logits);

    Model m, alt;
    tests_load_model(&m, ref->gguf);
    float l[MAX_VOCAB];
    Run r = native(&m);
    prompt_logits(&r, REFT5_PROMPT_IDS, REFT5_N_PROMPT_IDS, l);
    float d_engine = tests_max_abs_diff(l, REFT5_LOGITS, ref->n_logits);
    const char *what;
    r = control_run(ZOO_T5, &m, &alt, &what);
    prompt_logits(&r, REFT5_PROMPT_IDS, REFT5_N_PROMPT_IDS, l);
    float d_control = tests_max_abs_diff(l, REFT5_LOGITS, ref->n_logits);
    fprintf(stderr, "zoo/t5 against NumPy: max |logit diff| reference.json %.3g, engine %.3g, "
            "control (%s) %.3g\n", (double)d_json, (double)d_engine, what, (double)d_control);
    ck_assert_msg(d_json <= LOGIT_TOL, "reference.json is %g from NumPy", (double)d_json);
    ck_assert_msg(d_engine <= LOGIT_TOL, "the engine is %g from NumPy", (double)d_engine);
    ck_assert_msg(d_control > CONTROL_MIN, "%s is within %g of NumPy", what, (double)d_control);

    /* The greedy texts: reference.json's (which the engine generates, see
     * zoo_greedy_matches_reference) is NumPy's, character for character. */
    Tokenizer tok;
    PosencError err;
    ck_assert_msg(tokenizer_load_gguf(&tok, m.gguf, &err) == 0, "%s", err.msg);
    int ids[MAX_REF_IDS + 3], n = 0;
    ck_assert_int_eq(tokenizer_encode(&tok, REFT5_GREEDY_TEXT, strlen(REFT5_GREEDY_TEXT), 0, 0,
                                      ids, &n, &err), 0);
    ck_assert_int_eq(n, ref->n_text);
    for (int i = 0; i < n; i++) ck_assert_int_eq(ids[i], ref->text[i]);
    tokenizer_free(&tok);
    model_free(&m);
}
END_TEST

/* makemore: from BOS ('.' = 0) the greedy name, then the end '.'; the
 * control's name differs. */
static int makemore_name_matches(const Ref *ref, const Run *r) {
    float l[MAX_VOCAB];
    int gen[16], bos = 0;
    int n = run_greedy(r, &bos, 1, 15, 0, l, gen, NULL);
    if (n != ref->n_text + 1 || gen[ref->n_text] != 0) return 0;
    return memcmp(gen, ref->text, (size_t)ref->n_text * sizeof(int)) == 0;
}

START_TEST(makemore_greedy_name) {
    REQUIRE_MODELS();
    const Ref *ref = &refs[MAKEMORE];
    Model m, alt;
    tests_load_model(&m, ref->gguf);
    ck_assert_int_eq(m.weights.positional.n_positions, 16);
    Run r = native(&m);
    ck_assert_msg(makemore_name_matches(ref, &r), "greedy name is not the reference's");
    const char *what;
    r = control_run(MAKEMORE, &m, &alt, &what);
    ck_assert_msg(!makemore_name_matches(ref, &r), "%s: still the reference name", what);
    model_free(&m);
}
END_TEST

/* ---- stories260K: GGUF against the llama2.c .bin --------------------------------------- */

typedef struct {
    float first[MAX_VOCAB];
    int gen[STORIES_STEPS];
    float all[STORIES_STEPS * MAX_VOCAB];
} Trajectory;

/* From BOS, 200 greedy steps with every step's logits. */
static void stories_trajectory(const char *path, PeRopePairing pairing, Trajectory *t) {
    Model m;
    tests_load_model(&m, path);
    ck_assert_int_eq(m.config.vocab_size, 512);
    Run r = native(&m);
    r.pe.rope_pairing = pairing;
    int bos = 1;
    ck_assert_int_eq(run_greedy(&r, &bos, 1, STORIES_STEPS, -1, t->first, t->gen, t->all),
                     STORIES_STEPS);
    model_free(&m);
}

typedef struct {
    int same_ids;     /* greedy steps before the first id that differs */
    int bitwise;      /* every compared logit has the same bits */
    float max_diff;   /* over the logits whose input ids agree */
    float max_logit;  /* largest |logit| of the .bin, for scale */
} VsBin;

/* `path` read with `pairing` against the llama2.c .bin, along both greedy
 * paths from BOS. */
static VsBin compare_with_bin(const char *path, PeRopePairing pairing) {
    Trajectory *a = calloc_or_exit(1, sizeof *a, "a trajectory");
    Trajectory *b = calloc_or_exit(1, sizeof *b, "a trajectory");
    stories_trajectory(stories_bin, PE_ROPE_INTERLEAVED, a);
    stories_trajectory(path, pairing, b);
    VsBin v = {STORIES_STEPS, 1, 0.0f, 0.0f};
    for (int i = 0; i < STORIES_STEPS; i++)
        if (a->gen[i] != b->gen[i]) {
            v.same_ids = i;
            break;
        }
    /* all[k] follows input gen[k]: comparable while the ids agree */
    int n = 512 * (v.same_ids < STORIES_STEPS ? v.same_ids : STORIES_STEPS - 1);
    v.bitwise = memcmp(a->first, b->first, sizeof a->first) == 0 &&
                memcmp(a->all, b->all, (size_t)n * sizeof(float)) == 0;
    float d_first = tests_max_abs_diff(a->first, b->first, 512);
    float d_all = tests_max_abs_diff(a->all, b->all, (size_t)n);
    v.max_diff = isnan(d_first) || d_first > d_all ? d_first : d_all; /* a NaN stays */
    for (int i = 0; i < n; i++) v.max_logit = fmaxf(v.max_logit, fabsf(a->all[i]));
    free(a);
    free(b);
    return v;
}

/* Same tensor bytes, same kernels: every id and every logit of every step
 * must be bit-identical. */
START_TEST(stories_f32_bit_identical) {
    REQUIRE_MODELS();
    VsBin v = compare_with_bin(stories_f32, PE_ROPE_INTERLEAVED);
    ck_assert_int_eq(v.same_ids, STORIES_STEPS);
    ck_assert_msg(v.bitwise, "logits differ by up to %g", (double)v.max_diff);
}
END_TEST

/* GQA permutation: HF rotate_half q/k rows converted back to interleaved
 * pairs generate the .bin's ids (bit-identical too: the converter
 * reproduces the .bin's tensors exactly); the control reads the same file
 * with NeoX pairing, i.e. as if the rows had been left in HF order. */
START_TEST(stories_hf_greedy_identical) {
    REQUIRE_MODELS();
    VsBin v = compare_with_bin(stories_hf, PE_ROPE_INTERLEAVED);
    ck_assert_int_eq(v.same_ids, STORIES_STEPS);
    ck_assert(v.bitwise);
    v = compare_with_bin(stories_hf, PE_ROPE_NEOX);
    fprintf(stderr, "stories260K-hf control (neox pairing): diverges at step %d\n", v.same_ids);
    ck_assert_int_lt(v.same_ids, STORIES_STEPS);
}
END_TEST

/* F16 weights against the f32 .bin: the logits of every step whose input
 * ids agree are within F16_TOL, and not identical (the control showing
 * that the bit-identity test above can fail).  The greedy ids are
 * reported, not asserted: a near-tie may legitimately flip under f16. */
START_TEST(stories_f16_close) {
    REQUIRE_MODELS();
    VsBin v = compare_with_bin(stories_f16, PE_ROPE_INTERLEAVED);
    fprintf(stderr, "stories260K f16: max |logit - f32| = %.3g (max |logit| %.3g); greedy ids "
                    "match the f32 .bin for %d of %d steps\n",
            (double)v.max_diff, (double)v.max_logit, v.same_ids, STORIES_STEPS);
    ck_assert_msg(v.max_diff <= F16_TOL, "f16 logits differ by %g > %g", (double)v.max_diff,
                  (double)F16_TOL);
    ck_assert_msg(!v.bitwise, "f16 logits are bit-identical to f32: were the weights converted?");
}
END_TEST

/* Matrices in another type still match the reference within the type's
 * tolerance, and not within LOGIT_TOL (the weights really were rounded);
 * vectors stored in it are converted to f32 into m->owned.  Controls: the
 * model's wrong parameter (control_run) is outside the type's tolerance, and
 * bf16's is tight enough that q8_0's rounding of the same model fails it. */
START_TEST(tensor_types_match_reference) {
    REQUIRE_MODELS();
    const Variant *v = &variants[_i];
    const Ref *ref = &refs[v->ref];
    Model m, alt;
    tests_load_model(&m, v->gguf);
    ck_assert_int_eq(m.weights.token_embd.type, v->type);
    ck_assert_int_eq(m.weights.layers[3].wv.type, v->type);
    if (m.weights.positional.positions) ck_assert_ptr_nonnull(m.owned);
    Run r = native(&m);
    float d = reference_error(ref, &r);
    fprintf(stderr, "%-16s %-10s max |logit - reference| = %.3g\n", ref->dir, v->dtype,
            (double)d);
    ck_assert_msg(d <= v->tol && d > LOGIT_TOL, "%s %s: error %g", ref->dir, v->dtype,
                  (double)d);
    const char *what;
    r = control_run(v->ref, &m, &alt, &what);
    d = reference_error(ref, &r);
    fprintf(stderr, "%-16s %-10s control (%s): max |logit - reference| = %.3g\n", ref->dir,
            v->dtype, what, (double)d);
    ck_assert_msg(d > v->tol, "%s %s with %s is still within %g of the reference", ref->dir,
                  v->dtype, what, (double)v->tol);
    model_free(&m);
    if (_i != V_BF16) return;
    tests_load_model(&m, variants[V_Q8_0].gguf);
    r = native(&m);
    d = reference_error(ref, &r);
    fprintf(stderr, "%-16s control (q8_0 against bf16's bound %g): max |logit - reference| = "
            "%.3g\n", ref->dir, (double)BF16_TOL, (double)d);
    ck_assert_msg(d > BF16_TOL, "control: q8_0's error %g is within bf16's bound %g", (double)d,
                  (double)BF16_TOL);
    model_free(&m);
}
END_TEST

/* ---- --pe overrides on the same weights ------------------------------------------------ */

/* Every scheme runs on every zoo model that has what it needs, with finite
 * logits that differ from the native scheme's; `learned` and `t5` run only
 * where their table exists and are otherwise refused with one line naming
 * the scheme and the tensor. */
START_TEST(pe_overrides) {
    REQUIRE_MODELS();
    const Ref *ref = &refs[_i];
    Model m;
    tests_load_model(&m, ref->gguf);
    float native_l[MAX_VOCAB], l[MAX_VOCAB];
    Run r = native(&m);
    prompt_logits(&r, ref->prompt, ref->n_prompt, native_l);
    for (int k = 0; k < PE_COUNT; k++) {
        r.pe = m.pe;
        r.pe.kind = (PeKind)k;
        const PeTables *t = &m.weights.positional;
        if ((k == PE_LEARNED && !t->positions) || (k == PE_T5 && !t->relative_bias)) {
            Context ctx;
            PosencError err = {{0}};
            ck_assert_int_eq(context_build(&ctx, &m, &r.pe, 64, 64, &err), -1);
            ck_assert_msg(strstr(err.msg, pe_kind_name(r.pe.kind)) &&
                          strstr(err.msg, k == PE_T5 ? "attn_rel_b" : "position_embd") &&
                          !strchr(err.msg, '\n'), "%s", err.msg);
            continue;
        }
        prompt_logits(&r, ref->prompt, ref->n_prompt, l);
        for (int i = 0; i < m.config.vocab_size; i++)
            ck_assert_msg(isfinite(l[i]), "%s --pe %s: logit %d is %g", ref->dir,
                          pe_kind_name(r.pe.kind), i, (double)l[i]);
        if (k == (int)m.pe.kind) continue;
        float d = tests_max_abs_diff(l, native_l, m.config.vocab_size);
        ck_assert_msg(d > CONTROL_MIN, "%s --pe %s: logits within %g of %s", ref->dir,
                      pe_kind_name(r.pe.kind), (double)d, pe_kind_name(m.pe.kind));
    }
    model_free(&m);
}
END_TEST

/* ---- inspect ------------------------------------------------------------------------- */

static char *inspect_to_string(const char *path, int json) {
    Model m;
    tests_load_model(&m, path);
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    LayerAttention *layers = model_layers_for(&m, &m.pe);
    model_inspect(&m, &m.pe, layers, f, json, m.config.seq_len, TENSOR_F32);
    free(layers);
    fclose(f);
    model_free(&m);
    return s;
}

/* The JSON is one valid object (checked by Python's parser) with the
 * fields a script needs; the text names the scheme and, for a .bin, that
 * no tokenizer is embedded. */
START_TEST(inspect_output) {
    REQUIRE_MODELS();
    char *json = inspect_to_string(refs[ZOO_ROPE].gguf, 1);
    const char *path = tests_write_temp(json, strlen(json), ".json");
    const char *args[] = {"-c",
                          "import json, sys\n"
                          "d = json.load(open(sys.argv[1]))\n"
                          "p = d[\"positional\"]\n"
                          "print(d[\"architecture\"], d[\"totals\"][\"n_tensors\"], p[\"scheme\"],"
                          " p[\"rope_pairing\"], p[\"rope_dim\"], d[\"tokenizer\"][\"model\"],"
                          " d[\"tokenizer\"][\"n_tokens\"], len(d[\"tensors\"]))",
                          path, NULL};
    char *out = python_output(args);
    ck_assert_msg(out != NULL, "invalid JSON: %s", json);
    ck_assert_str_eq(out, "gpt2 51 rope neox 32 gpt2 65 51\n");
    free(out);
    free(json);

    char *text = inspect_to_string(stories_bin, 0);
    ck_assert_msg(strstr(text, "none embedded") && strstr(text, "interleaved") &&
                  strstr(text, "blk.4.ffn_up.weight"), "%s", text);
    free(text);
}
END_TEST

/* ---- malformed files through model_load ---------------------------------------------- */

typedef struct {
    char *p;
    size_t n;
} Bytes;

static Bytes read_bytes(const char *path) {
    Bytes b;
    b.p = tests_read_file(path, &b.n);
    return b;
}

/* model_load must refuse: -1, one line starting with the file's name and
 * mentioning `needle`, and nothing left to free. */
static void expect_load_error(const Bytes *b, const char *needle) {
    const char *path = tests_write_temp(b->p, b->n, ".gguf");
    Model m;
    PosencError err = {{0}};
    ck_assert_int_eq(model_load(&m, path, &err), -1);
    tests_expect_file_error(err.msg, path, needle);
    ck_assert(m.gguf == NULL && m.weights.layers == NULL && m.owned == NULL);
}

/* A copy of src with the `len` bytes that start `skip` bytes after the
 * first GGUF string `at` replaced by v. */
static void expect_patched(const Bytes *src, const char *at, long skip, const void *v,
                           size_t len, const char *needle) {
    Bytes b = {malloc_or_exit(src->n, "a copy of a file"), src->n};
    memcpy(b.p, src->p, b.n);
    memcpy(b.p + (long)tests_gguf_string_end(b.p, b.n, at) + skip, v, len);
    expect_load_error(&b, needle);
    free(b.p);
}

/* The string `from` itself renamed to `to` (same length). */
static void expect_renamed(const Bytes *src, const char *from, const char *to,
                           const char *needle) {
    expect_patched(src, from, -(long)strlen(from), to, strlen(to), needle);
}

/* The value of the u32 key `key` (after its u32 type). */
static void expect_key_u32(const Bytes *src, const char *key, uint32_t v, const char *needle) {
    expect_patched(src, key, 4, &v, 4, needle);
}

/* Dimension `dim` of tensor `name` (after its u32 n_dims). */
static void expect_tensor_dim(const Bytes *src, const char *name, int dim, uint64_t v,
                              const char *needle) {
    expect_patched(src, name, 4 + 8 * dim, &v, 8, needle);
}

START_TEST(malformed_files) {
    REQUIRE_MODELS();
    Bytes rope = read_bytes(refs[ZOO_ROPE].gguf), learned = read_bytes(refs[ZOO_LEARNED].gguf);
    expect_renamed(&rope, "gpt2", "bert", "unsupported architecture 'bert'");
    expect_renamed(&rope, "gpt2.block_count", "gpt2.block_counX", "missing key 'gpt2.block_count'");
    expect_renamed(&rope, "blk.2.ffn_up.weight", "blk.2.ffn_up.weighX",
                   "missing tensor 'blk.2.ffn_up.weight'");
    expect_renamed(&rope, "output_norm.bias", "output_norm.biaX",
                   "missing tensor 'output_norm.bias'");
    expect_renamed(&learned, "position_embd.weight", "position_embX.weight",
                   "unexpected tensor 'position_embX.weight'");
    /* string values: after the key, u32 type and u64 length */
    expect_patched(&rope, "posenc.positional", 12, "ropX", 4, "unknown posenc.positional 'ropX'");
    expect_patched(&rope, "posenc.rope.pairing", 12, "nexo", 4,
                   "unknown posenc.rope.pairing 'nexo'");
    expect_key_u32(&rope, "gpt2.attention.head_count", 3, "not a multiple of n_heads 3");
    expect_key_u32(&rope, "gpt2.rope.dimension_count", 31, "rotary dims 31");
    expect_key_u32(&rope, "gpt2.context_length", 0, "seq_len = 0 is out of range");
    expect_tensor_dim(&rope, "blk.1.attn_norm.weight", 0, 64,
                      "tensor 'blk.1.attn_norm.weight' has shape [64], expected [128]");
    expect_tensor_dim(&rope, "blk.0.attn_qkv.weight", 1, 383,
                      "tensor 'blk.0.attn_qkv.weight' has shape [128, 383], expected [128, 384]");
    expect_tensor_dim(&rope, "token_embd.weight", 1, 64,
                      "tokenizer.ggml.tokens has 65 tokens but token_embd.weight has 64 rows");
    /* t5: its keys against its table, and the encoder's form refused */
    Bytes t5 = read_bytes(refs[ZOO_T5].gguf);
    expect_key_u32(&t5, "gpt2.attention.relative_buckets_count", 16,
                   "positional scheme t5: the relative bucket count is 16 but the bias table "
                   "has 32 rows");
    expect_key_u32(&t5, "posenc.relative_attention.max_distance", 16,
                   "the relative max distance 16 must be in 17..");
    expect_patched(&t5, "posenc.relative_attention.bidirectional", 4, "\x01", 1,
                   "bidirectional relative attention buckets (an encoder's) are not supported");
    expect_tensor_dim(&t5, "blk.0.attn_rel_b.weight", 0, 3,
                      "tensor 'blk.0.attn_rel_b.weight' has shape [3, 32], expected [4, 32]");
    expect_renamed(&t5, "blk.0.attn_rel_b.weight", "blk.1.attn_rel_b.weight",
                   "unexpected tensor 'blk.1.attn_rel_b.weight'");
    /* truncated: the GGUF reader's error, through model_load */
    Bytes cut = {rope.p, rope.n - 1000};
    expect_load_error(&cut, "extends past the end of the file");
    free(rope.p);
    free(learned.p);
    free(t5.p);
}
END_TEST

int main(void) {
    Suite *s = suite_create("models");
    TCase *tc = tcase_create("references");
    tcase_add_unchecked_fixture(tc, prepare, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, logits_match_reference, 0, N_REFS);
    tcase_add_loop_test(tc, zoo_greedy_matches_reference, 0, N_ZOO);
    tcase_add_loop_test(tc, zoo_team_decode, 0, N_ZOO);
    tcase_add_test(tc, makemore_greedy_name);
    tcase_add_test(tc, t5_matches_numpy_reference);
    suite_add_tcase(s, tc);

    tc = tcase_create("stories260k");
    tcase_add_unchecked_fixture(tc, prepare, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, stories_f32_bit_identical);
    tcase_add_test(tc, stories_hf_greedy_identical);
    tcase_add_test(tc, stories_f16_close);
    tcase_add_loop_test(tc, tensor_types_match_reference, 0, N_VARIANTS);
    suite_add_tcase(s, tc);

    tc = tcase_create("loader");
    tcase_add_unchecked_fixture(tc, prepare, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, pe_overrides, 0, N_ZOO);
    tcase_add_test(tc, inspect_output);
    tcase_add_test(tc, malformed_files);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
