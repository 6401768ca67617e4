/* posenc against today's llama.cpp, run live: the npm package node-llama-cpp
 * 3.21.1 and its prebuilt CPU binary, llama.cpp release v0.4.0 of
 * 2026-09-12 (tools/llamacpp_reference.mjs; tools/ensure_npm.sh installs
 * them).  For stories260K converted to GGUF and tools/arch_reference.py's
 * tiny random checkpoint of every architecture family, both give the
 * natural-log probability of each next token of a prompt (posenc:
 * context_forward with every row's logits, then a log-softmax in double;
 * llama.cpp: the softmax node-llama-cpp's controlledEvaluate returns, with
 * an f32 KV cache as posenc's), and that of llama.cpp's five most probable
 * next tokens at every position.  One node process serves every model.
 *
 * Two things llama.cpp computes otherwise, found by this suite:
 *  - GELU.  ggml's CPU GELU (ggml-cpu/vec.h, GGML_GELU_FP16) is the tanh
 *    form read from a table indexed by the input rounded to f16, its value
 *    stored as f16, for every family, also GPT-NeoX and MPT whose GELU is
 *    erf.  On these random weights that moves log p by up to 1.5e-2
 *    (measured, next token / top 5: gptneox 1.7e-3 / 2.1e-3, bloom 1.1e-2 /
 *    8.0e-3, starcoder 8.0e-3 / 1.1e-2, phi2 2.1e-3 / 1.3e-3, mpt 9.5e-3 /
 *    1.5e-2, gemma 2.5e-3 / 1.9e-3), more than the 1e-3 nats the rest must
 *    meet (measured <= 2.3e-5): the float64
 *    reference (arch_reference.py) with that table put in its GELU agrees
 *    with llama.cpp within 9e-5 for gptneox, phi2 and gemma, and within
 *    what moving the table's inputs by one float32 ulp changes for the
 *    others (their activations are large: logits near -30).  So each GELU
 *    family is checked twice: as it is, within GELU_TOL, and with its
 *    feed-forward switched off (every ffn_down zeroed in a copy of the
 *    file, so no GELU reaches the output) within 1e-3, which proves the
 *    rest of the family (attention, positions, norms, biases) agrees.
 *  - The sliding window.  llama.cpp reads no sliding window for the llama
 *    architecture (src/models/llama.cpp), nor applies Phi-3's
 *    (src/models/phi3.cpp sets none), so the mistral case, a llama with a
 *    window of 5, and the phi3 case (window 16) are compared with posenc's
 *    window off; with it on, they must differ.
 *  - EXAONE 4's layers.  llama.cpp slides (and leaves the global layers
 *    without position) only in a 64-layer model, the 32B
 *    (src/models/exaone4.cpp); Hugging Face wherever the config has a
 *    window and layer_types.  The exaone4 case (4 layers, 3 sliding) is
 *    compared with every layer full and rotating in posenc.
 *  - Gemma 2's score scale.  llama.cpp takes 1/sqrt(head size)
 *    (src/models/gemma2.cpp), Hugging Face query_pre_attn_scalar^-1/2 (24 in
 *    the tiny checkpoint, 32 the head size): the gemma2 case is compared with
 *    posenc's scale set to llama.cpp's; with the file's, they must differ.
 *  - gpt-oss's YaRN.  llama.cpp always rounds the correction range to whole
 *    dimensions (ggml_rope_yarn_corr_dims), Hugging Face's truncate: false
 *    does not: the gpt_oss case is compared with posenc rounding it; as
 *    the file says, they must differ.  Its learned sinks, biases, router
 *    and clamped SwiGLU are llama.cpp's own (src/models/openai-moe.cpp).
 *
 * The MXFP4 file the issue asks for is gpt_oss through tools/quantize.py's
 * mxfp4_moe: its NLL of the prompt within LOGP_TOL of llama.cpp's, each log p
 * within INT8_TOL (below).  Control: posenc on the file before quantizing is
 * not within LOGP_TOL of llama.cpp's NLL on the quantized one (measured
 * 1.4e-2), so the bound sees MXFP4's rounding.
 *
 * Negative control, every case: llama.cpp given the prompt with its first
 * token changed disagrees with posenc's log-probabilities of the prompt. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gguf.h"
#include "tests/common.h"

/* The bound, in nats: float32 against float32. */
#define LOGP_TOL 1e-3
/* llama.cpp's f16-table GELU (above): measured up to 1.5e-2. */
#define GELU_TOL 3e-2
/* A different first token moves later log-probabilities by far more. */
#define CONTROL_MIN 0.1
/* Block-quantized weights: both engines quantize the activations to int8
 * blocks for them, each its own way (ggml's Q8_0 rounds the block's scale
 * to f16, posenc keeps it in f32: model/kernels_impl.h), which moves each
 * log p of these random models (measured on gpt_oss-mxfp4: 2.1e-2 next
 * token, 2.9e-2 top 5) but hardly the NLL, their mean (4.8e-5), which is held
 * to LOGP_TOL as the issue asks.  The bound is twice test_quant_models's
 * per-token bound for int8 activations against float64 (0.035): two such
 * roundings, one per engine. */
#define INT8_TOL 7e-2
/* llama.cpp's most probable next ids whose log-probabilities are compared
 * too (the whole distribution, not only the prompt's next token). */
#define TOP 5
#define MAX_IDS 64

typedef struct {
    const char *name;
    const char *family; /* arch_reference.py's family, or tools/hf_tiny.py's case when hf;
                           NULL: stories260K */
    int derived;        /* FFN_OFF or MXFP4_MOE, from the family's own case before it */
    double tol;
    int hf;             /* family is a tools/hf_tiny.py case (today's families) */
} Case;
/* Case.derived: every ffn_down zeroed; the file through tools/quantize.py's
 * mxfp4_moe (llama-quantize's MXFP4_MOE: experts mxfp4, the other matrices
 * q8_0, the router f32). */
enum { FFN_OFF = 1, MXFP4_MOE };

static const Case CASES[] = {
    {"stories260K", NULL, 0, LOGP_TOL, 0},
    {"qwen2", "qwen2", 0, LOGP_TOL, 0},
    {"mistral", "mistral", 0, LOGP_TOL, 0}, /* posenc's window off */
    {"gptneox", "gpt_neox", 0, GELU_TOL, 0},
    {"bloom", "bloom", 0, GELU_TOL, 0},
    {"starcoder", "gpt_bigcode", 0, GELU_TOL, 0},
    {"phi2", "phi", 0, GELU_TOL, 0},
    {"mpt", "mpt", 0, GELU_TOL, 0},
    {"gemma", "gemma", 0, GELU_TOL, 0},
    {"gptneox-noffn", "gpt_neox", FFN_OFF, LOGP_TOL, 0},
    {"bloom-noffn", "bloom", FFN_OFF, LOGP_TOL, 0},
    {"starcoder-noffn", "gpt_bigcode", FFN_OFF, LOGP_TOL, 0},
    {"phi2-noffn", "phi", FFN_OFF, LOGP_TOL, 0},
    {"mpt-noffn", "mpt", FFN_OFF, LOGP_TOL, 0},
    {"gemma-noffn", "gemma", FFN_OFF, LOGP_TOL, 0},
    /* today's families and position machinery (tests/model/test_layers.c
     * checks them against transformers); not llama_dynamic (llama.cpp has no
     * dynamic NTK: its loader asserts on the type) nor llama_yarn_untruncated
     * (llama.cpp always rounds YaRN's correction range) */
    {"llama3", "llama3", 0, LOGP_TOL, 1},
    {"llama_yarn", "llama_yarn", 0, LOGP_TOL, 1},
    {"smollm3", "smollm3", 0, LOGP_TOL, 1},
    {"phi3", "phi3", 0, LOGP_TOL, 1}, /* posenc's window off */
    {"qwen3", "qwen3", 0, LOGP_TOL, 1},
    {"gemma2", "gemma2", 0, GELU_TOL, 1}, /* posenc's score scale 1/sqrt(head size) */
    {"gemma3", "gemma3", 0, GELU_TOL, 1},
    {"olmo2", "olmo2", 0, LOGP_TOL, 1},
    {"granite", "granite", 0, LOGP_TOL, 1},
    {"stablelm", "stablelm", 0, LOGP_TOL, 1},
    {"stablelm_parallel", "stablelm_parallel", 0, LOGP_TOL, 1},
    {"cohere2", "cohere2", 0, LOGP_TOL, 1},
    {"exaone4", "exaone4", 0, LOGP_TOL, 1},
    {"gemma2-noffn", "gemma2", FFN_OFF, LOGP_TOL, 1},
    {"gemma3-noffn", "gemma3", FFN_OFF, LOGP_TOL, 1},
    {"gpt_oss", "gpt_oss", 0, LOGP_TOL, 1}, /* posenc's YaRN range rounded */
    {"gpt_oss-mxfp4", "gpt_oss", MXFP4_MOE, INT8_TOL, 1}, /* an MXFP4 file of posenc's tools */
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

/* The families' prompt: byte tokens (their vocabulary is the 256 bytes),
 * 48 of them, within their 64-position context; stories260K's: BOS and 35
 * tokens of tok512. */
static const char BYTES_TEXT[] = "Once upon a time, a little fox ran to the river.";
static const char STORY_TEXT[] = "Once upon a time, there was a little girl named Lily. She loved "
                                 "to play outside in the park with her dog.";

typedef struct {
    double logp; /* of ids[t + 1] */
    int top_id[TOP];
    double top_logp[TOP];
} RefRow;

typedef struct {
    char gguf[256];
    int base;              /* the case a derived case's file comes from */
    int ids[MAX_IDS], n;
    int ctrl_ids[MAX_IDS]; /* ids with the first one changed */
    RefRow ref[MAX_IDS];   /* llama.cpp on ids */
    double ctrl[MAX_IDS];  /* llama.cpp on ctrl_ids: log p of ctrl_ids[t + 1] */
} Data;

static Data data[N_CASES];
static int ready = 0;

static void ids_arg(char *out, size_t cap, const int *ids, int n) {
    out[0] = 0;
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%d", i ? "," : "", ids[i]);
}

/* One "# path" block of the reference's output, from *s: n - 1 lines of
 * "logp id:logp ..." into rows, or only their first number into only. */
static void parse_block(const char **s, const char *gguf, int n, RefRow *rows, double *only) {
    const char *p = *s;
    size_t hl = strlen(gguf);
    ck_assert_msg(strncmp(p, "# ", 2) == 0 && strncmp(p + 2, gguf, hl) == 0 && p[2 + hl] == '\n',
                  "llamacpp_reference: expected the block of %s at: %.80s", gguf, p);
    p += 3 + hl;
    for (int t = 0; t < n - 1; t++) {
        char *end;
        double v = strtod(p, &end);
        ck_assert_msg(end != p, "%s: reference line %d: %.80s", gguf, t, p);
        p = end;
        if (only) {
            only[t] = v;
            p += strcspn(p, "\n");
        } else {
            rows[t].logp = v;
            for (int k = 0; k < TOP; k++) {
                rows[t].top_id[k] = (int)strtol(p, &end, 10);
                ck_assert_msg(end != p && *end == ':', "%s: line %d: top %d", gguf, t, k);
                p = end + 1;
                rows[t].top_logp[k] = strtod(p, &end);
                ck_assert_msg(end != p, "%s: line %d: top %d", gguf, t, k);
                p = end;
            }
        }
        ck_assert_msg(*p == '\n', "%s: line %d does not end: %.80s", gguf, t, p);
        p++;
    }
    *s = p;
}

/* A temporary copy of `gguf` with every blk.N.ffn_down.weight zeroed. */
static const char *without_ffn(const char *gguf) {
    GgufFile g;
    PosencError err;
    ck_assert_msg(gguf_open(&g, gguf, &err) == 0, "%s", err.msg);
    uint8_t *b = malloc(g.map.size);
    ck_assert_ptr_nonnull(b);
    memcpy(b, g.map.data, g.map.size);
    int zeroed = 0;
    for (size_t i = 0; i < g.n_tensors; i++) {
        const char *nm = g.tensors[i].name, *suffix = ".ffn_down.weight";
        size_t l = strlen(nm), ls = strlen(suffix);
        if (strncmp(nm, "blk.", 4) == 0 && l > ls && strcmp(nm + l - ls, suffix) == 0) {
            memset(b + ((const uint8_t *)g.tensors[i].data - g.map.data), 0, g.tensors[i].nbytes);
            zeroed++;
        }
    }
    const char *arch;
    uint32_t layers = 0;
    char key[128];
    ck_assert_msg(gguf_get_str(&g, "general.architecture", &arch, &err) == 0, "%s", err.msg);
    snprintf(key, sizeof key, "%s.block_count", arch);
    ck_assert_msg(gguf_get_u32(&g, key, &layers, &err) == 0, "%s", err.msg);
    ck_assert_msg(zeroed == (int)layers, "%s: %d ffn_down tensors, not one per layer", gguf,
                  zeroed);
    const char *p = tests_write_temp(b, g.map.size, ".gguf");
    free(b);
    gguf_close(&g);
    return p;
}

static void setup(void) {
    if (!tests_python_available("the llama.cpp comparison")) return;
    const char *models = tests_models_dir("the llama.cpp comparison");
    if (!models) return;
    const char *modules = tests_npm_modules("the llama.cpp comparison");
    if (!modules) return;

    for (int c = 0; c < N_CASES; c++) {
        Data *d = &data[c];
        if (CASES[c].derived) {
            int base = 0;
            while (base < c && !(CASES[base].family && !CASES[base].derived &&
                                 strcmp(CASES[base].family, CASES[c].family) == 0))
                base++;
            ck_assert_msg(base < c, "%s: no case of its family before it", CASES[c].name);
            d->base = base;
            if (CASES[c].derived == FFN_OFF) {
                snprintf(d->gguf, sizeof d->gguf, "%s", without_ffn(data[base].gguf));
            } else {
                snprintf(d->gguf, sizeof d->gguf, "%s", tests_write_temp("", 0, ".gguf"));
                const char *q[] = {"tools/quantize.py", data[base].gguf, d->gguf, "mxfp4_moe",
                                   NULL};
                TestsRun r = tests_run_python_ok(q);
                tests_run_free(&r);
            }
        } else if (CASES[c].hf) {
            snprintf(d->gguf, sizeof d->gguf, "%s", tests_make_hf_case(CASES[c].family));
        } else if (CASES[c].family) {
            char name[64];
            snprintf(name, sizeof name, "llamacpp-%s", CASES[c].name);
            snprintf(d->gguf, sizeof d->gguf, "%s", tests_make_family(CASES[c].family, 0, name));
        } else {
            const char *tok = tests_model_path(models, "stories260K/tok512.bin");
            const char *extra[] = {"--tokenizer", tok, NULL};
            const char *gguf = tests_convert(models, "stories260K/stories260K.bin", extra);
            ck_assert_msg(gguf != NULL, "could not convert stories260K");
            snprintf(d->gguf, sizeof d->gguf, "%s", gguf);
            Tokenizer t;
            tests_load_tokenizer(&t, tok, 512);
            int *ids, n;
            PosencError err;
            ck_assert_msg(tokenizer_encode_alloc(&t, STORY_TEXT, strlen(STORY_TEXT), 1, 0, &ids,
                                                 &n, &err) == 0, "%s", err.msg);
            ck_assert_int_le(n, MAX_IDS);
            memcpy(d->ids, ids, sizeof(int) * (size_t)n);
            d->n = n;
            free(ids);
            tokenizer_free(&t);
        }
        if (CASES[c].family) {
            d->n = (int)strlen(BYTES_TEXT);
            for (int t = 0; t < d->n; t++) d->ids[t] = (unsigned char)BYTES_TEXT[t];
        }
        memcpy(d->ctrl_ids, d->ids, sizeof d->ids);
        d->ctrl_ids[0] = d->ids[0] == 32 ? 33 : 32; /* another token */
    }

    /* node tools/llamacpp_reference.mjs --top TOP (GGUF IDS){2 N_CASES}: one
     * start of node and of llama.cpp for every model and control */
    static char idbuf[2 * N_CASES][MAX_IDS * 4];
    const char *args[4 + 4 * N_CASES + 1];
    char top[8];
    snprintf(top, sizeof top, "%d", TOP);
    int a = 0;
    args[a++] = "tools/llamacpp_reference.mjs";
    args[a++] = "--top";
    args[a++] = top;
    for (int c = 0; c < N_CASES; c++) {
        ids_arg(idbuf[2 * c], sizeof idbuf[0], data[c].ids, data[c].n);
        ids_arg(idbuf[2 * c + 1], sizeof idbuf[0], data[c].ctrl_ids, data[c].n);
        args[a++] = data[c].gguf;
        args[a++] = idbuf[2 * c];
        args[a++] = data[c].gguf;
        args[a++] = idbuf[2 * c + 1];
    }
    args[a] = NULL;
    setenv("POSENC_NODE_MODULES", modules, 1);
    TestsRun r = tests_run_program("node", args, NULL);
    ck_assert_msg(r.status == 0, "tools/llamacpp_reference.mjs failed (status %d): %s", r.status,
                  r.err);
    printf("%s", r.err); /* the llama.cpp release */
    const char *s = r.out;
    for (int c = 0; c < N_CASES; c++) {
        parse_block(&s, data[c].gguf, data[c].n, data[c].ref, NULL);
        parse_block(&s, data[c].gguf, data[c].n, NULL, data[c].ctrl);
    }
    ck_assert_msg(*s == 0, "tools/llamacpp_reference.mjs printed more: %.80s", s);
    tests_run_free(&r);
    ready = 1;
}

static void teardown(void) {}

/* posenc's log-probabilities, (n, vocab) in double, of the whole prompt in
 * one chunk from position 0. */
static double *posenc_logp(const Model *m, const int *ids, int n) {
    Context ctx;
    tests_build_context(&ctx, m, &m->pe, n);
    const float *lg = context_forward(&ctx, ids, n, 0, 1);
    int V = m->config.vocab_size;
    double *out = malloc(sizeof(double) * (size_t)n * (size_t)V);
    ck_assert_ptr_nonnull(out);
    for (int t = 0; t < n; t++) {
        const float *row = lg + (size_t)t * V;
        double mx = row[0], z = 0;
        for (int v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
        for (int v = 0; v < V; v++) z += exp(row[v] - mx);
        double lse = mx + log(z);
        for (int v = 0; v < V; v++) out[(size_t)t * V + v] = row[v] - lse;
    }
    context_free(&ctx);
    return out;
}

static double worse(double worst, double e) { return e > worst || e != e ? e : worst; }

/* |posenc's NLL of the prompt - llama.cpp's|: the mean over its next tokens. */
static double nll_diff(const double *lp, int V, const Data *d) {
    double sum = 0;
    for (int t = 0; t < d->n - 1; t++) sum += lp[(size_t)t * V + d->ids[t + 1]] - d->ref[t].logp;
    return fabs(sum / (d->n - 1));
}

/* max |posenc - llama.cpp| over the prompt's next tokens, and in *top_d
 * over llama.cpp's TOP most probable ids at every position; NaN stays NaN. */
static double compare(const double *lp, int V, const Data *d, double *top_d) {
    double worst = 0, worst_top = 0;
    for (int t = 0; t < d->n - 1; t++) {
        worst = worse(worst, fabs(lp[(size_t)t * V + d->ids[t + 1]] - d->ref[t].logp));
        for (int k = 0; k < TOP; k++) {
            int id = d->ref[t].top_id[k];
            ck_assert_msg(id >= 0 && id < V, "llama.cpp's top id %d outside the vocabulary", id);
            worst_top = worse(worst_top, fabs(lp[(size_t)t * V + id] - d->ref[t].top_logp[k]));
        }
    }
    *top_d = worst_top;
    return worst;
}

static int is_family(const Case *c, const char *family) {
    return c->family && !strcmp(c->family, family);
}

/* m as llama.cpp computes the case's family (above). */
static void as_llamacpp(Model *m, const Case *c) {
    int exaone4 = is_family(c, "exaone4"), gemma2 = is_family(c, "gemma2");
    int gpt_oss = is_family(c, "gpt_oss");
    int no_window = is_family(c, "mistral") || is_family(c, "phi3") || exaone4;
    for (int l = 0; l < m->config.n_layers; l++) {
        if (no_window) m->layers[l].window = 0;
        if (exaone4) m->layers[l].pe = m->pe;
        if (gemma2) m->layers[l].score_div = sqrtf((float)model_head_size(&m->config));
        if (gpt_oss) m->layers[l].pe.yarn_no_truncate = 0;
    }
    if (gpt_oss) m->pe.yarn_no_truncate = 0;
}

START_TEST(matches_llamacpp) {
    if (!ready) return;
    const Case *c = &CASES[_i];
    const Data *d = &data[_i];
    Model m;
    tests_load_model(&m, d->gguf);
    int V = m.config.vocab_size;
    double top_d;
    int exaone4 = is_family(c, "exaone4");
    int no_window = is_family(c, "mistral") || is_family(c, "phi3") || exaone4;
    int gpt_oss = is_family(c, "gpt_oss");
    if (no_window || is_family(c, "gemma2") || gpt_oss) { /* what llama.cpp computes otherwise */
        int window = m.layers[0].window;
        if (no_window) {
            ck_assert_int_gt(window, 0);
            ck_assert_int_lt(window, d->n - 1);
        }
        double *lw = posenc_logp(&m, d->ids, d->n);
        double as_file = compare(lw, V, d, &top_d);
        printf("%-16s posenc as the file says (%s): max |log p - llama.cpp| = %.3g\n", c->name,
               exaone4 ? "sliding RoPE, global NoPE" : no_window ? "its sliding window"
               : gpt_oss ? "YaRN's range unrounded" : "query_pre_attn_scalar", as_file);
        ck_assert_msg(as_file > CONTROL_MIN, "%s: the difference changes nothing (%g)", c->name,
                      as_file);
        free(lw);
        as_llamacpp(&m, c);
    }
    double *lp = posenc_logp(&m, d->ids, d->n);
    if (c->derived == MXFP4_MOE) { /* the NLL, and its control (above) */
        double nll = nll_diff(lp, V, d);
        Model f;
        tests_load_model(&f, data[d->base].gguf);
        as_llamacpp(&f, c);
        double *lf = posenc_logp(&f, d->ids, d->n);
        double unquantized = nll_diff(lf, V, d);
        printf("%-16s NLL: |posenc - llama.cpp| = %.3g, bound %g; control (posenc on the file "
               "before mxfp4_moe): %.3g\n", c->name, nll, LOGP_TOL, unquantized);
        ck_assert_msg(nll <= LOGP_TOL, "%s: NLL differs from llama.cpp's by %g", c->name, nll);
        ck_assert_msg(unquantized > LOGP_TOL, "%s: quantizing leaves the NLL within %g", c->name,
                      unquantized);
        free(lf);
        model_free(&f);
    }
    double diff = compare(lp, V, d, &top_d);
    printf("%-16s %2d tokens: max |log p - llama.cpp| = %.3g (next token), %.3g (top %d); "
           "bound %g\n", c->name, d->n, diff, top_d, TOP, c->tol);
    ck_assert_msg(diff <= c->tol, "%s: next-token log p differs from llama.cpp's by %g",
                  c->name, diff);
    ck_assert_msg(top_d <= c->tol, "%s: top-%d log p differs from llama.cpp's by %g", c->name,
                  TOP, top_d);

    /* the control: llama.cpp's log p of the changed prompt's next tokens
     * (the same ids after the first) against posenc's on the prompt */
    double ctrl = 0;
    for (int t = 0; t < d->n - 1; t++)
        ctrl = worse(ctrl, fabs(lp[(size_t)t * V + d->ids[t + 1]] - d->ctrl[t]));
    printf("%-16s control (first token %d -> %d): max |log p - llama.cpp| = %.3g\n", c->name,
           d->ids[0], d->ctrl_ids[0], ctrl);
    ck_assert_msg(ctrl > CONTROL_MIN, "%s: changing the first token leaves llama.cpp within %g",
                  c->name, ctrl);
    free(lp);
    model_free(&m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("llamacpp");
    TCase *tc = tcase_create("llamacpp");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, matches_llamacpp, 0, N_CASES);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
