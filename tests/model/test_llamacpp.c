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
 *    architecture (src/models/llama.cpp), so the mistral case, a llama
 *    with a window of 5, is compared with posenc's window off; with it on,
 *    they must differ.
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
/* llama.cpp's most probable next ids whose log-probabilities are compared
 * too (the whole distribution, not only the prompt's next token). */
#define TOP 5
#define MAX_IDS 64

typedef struct {
    const char *name;
    const char *family; /* arch_reference.py's family; NULL: stories260K */
    int ffn_off;        /* every ffn_down zeroed; after the family's own case */
    double tol;
} Case;

static const Case CASES[] = {
    {"stories260K", NULL, 0, LOGP_TOL},
    {"qwen2", "qwen2", 0, LOGP_TOL},
    {"mistral", "mistral", 0, LOGP_TOL}, /* posenc's window off */
    {"gptneox", "gpt_neox", 0, GELU_TOL},
    {"bloom", "bloom", 0, GELU_TOL},
    {"starcoder", "gpt_bigcode", 0, GELU_TOL},
    {"phi2", "phi", 0, GELU_TOL},
    {"mpt", "mpt", 0, GELU_TOL},
    {"gemma", "gemma", 0, GELU_TOL},
    {"gptneox-noffn", "gpt_neox", 1, LOGP_TOL},
    {"bloom-noffn", "bloom", 1, LOGP_TOL},
    {"starcoder-noffn", "gpt_bigcode", 1, LOGP_TOL},
    {"phi2-noffn", "phi", 1, LOGP_TOL},
    {"mpt-noffn", "mpt", 1, LOGP_TOL},
    {"gemma-noffn", "gemma", 1, LOGP_TOL},
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
    ck_assert_msg(zeroed == 2, "%s: %d ffn_down tensors, not one per layer", gguf, zeroed);
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
        if (CASES[c].ffn_off) {
            int base = 0;
            while (base < c && !(CASES[base].family && !CASES[base].ffn_off &&
                                 strcmp(CASES[base].family, CASES[c].family) == 0))
                base++;
            ck_assert_msg(base < c, "%s: no case of its family before it", CASES[c].name);
            snprintf(d->gguf, sizeof d->gguf, "%s", without_ffn(data[base].gguf));
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

START_TEST(matches_llamacpp) {
    if (!ready) return;
    const Case *c = &CASES[_i];
    const Data *d = &data[_i];
    Model m;
    tests_load_model(&m, d->gguf);
    int V = m.config.vocab_size;
    double top_d;
    if (c->family && strcmp(c->family, "mistral") == 0) {
        ck_assert_int_gt(m.config.sliding_window, 0);
        ck_assert_int_lt(m.config.sliding_window, d->n - 1);
        double *lw = posenc_logp(&m, d->ids, d->n);
        double with_window = compare(lw, V, d, &top_d);
        printf("%-16s posenc with its window of %d: max |log p - llama.cpp| = %.3g "
               "(llama.cpp has none for llama)\n", c->name, m.config.sliding_window, with_window);
        ck_assert_msg(with_window > CONTROL_MIN, "%s: the window changes nothing (%g)", c->name,
                      with_window);
        free(lw);
        m.config.sliding_window = 0;
    }
    double *lp = posenc_logp(&m, d->ids, d->n);
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
