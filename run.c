/* posenc — the command line.  Parses flags, loads the model and tokenizer,
 * picks the positional scheme and runs one mode.  The engine lives in
 * model/, positional/ and tokenizer/. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/context.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/sampler.h"
#include "positional/pe.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char *model_path;
    const char *tokenizer_path;
    const char *mode;
    const char *prompt;
    float temperature, topp;
    int topk, steps, threads;
    unsigned long long seed;
    const char *pe_name;     /* NULL: the checkpoint's own scheme */
    float rope_theta;        /* 0: the checkpoint's */
    float alibi_max_bias;    /* 0: the checkpoint's (default 8) */
} Options;

static void usage(FILE *f) {
    fprintf(f,
        "usage: run MODEL [options]\n"
        "       run -m tokenize -z TOKENIZER -i TEXT\n"
        "\n"
        "MODEL is a llama2.c .bin checkpoint.\n"
        "\n"
        "  -m MODE              generate (default) | tokenize\n"
        "  -z PATH              tokenizer (default: tokenizer.bin beside the model)\n"
        "  -i TEXT              prompt (default: empty)\n"
        "  -n N                 total tokens including the prompt (default 256; 0 = context)\n"
        "  -t F                 temperature (default 1.0; 0 = greedy)\n"
        "  -p F                 top-p (default 0.9; 0 or 1 disables)\n"
        "  -k N                 top-k (default 0 = off)\n"
        "  -s N                 random seed (default: time)\n"
        "  --threads N          OpenMP threads (default: all cores)\n"
        "  --pe NAME            positional scheme: sinusoidal|learned|rope|alibi|none\n"
        "                       (default: the one the checkpoint was trained with)\n"
        "  --rope-theta F       RoPE base (default: checkpoint's, 10000)\n"
        "  --alibi-max-bias F   ALiBi max bias for the slopes (default 8)\n"
        "  -h, --help           this text\n");
}

/* Every CLI failure is one line on stderr and exit status 1. */
__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(EXIT_FAILURE);
}

static long parse_long(const char *flag, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        char range[64];
        snprintf(range, sizeof range, "an integer in %ld..%ld", lo, hi);
        fprintf(stderr, "error: %s expects %s, got '%s'\n", flag, range, s);
        exit(EXIT_FAILURE);
    }
    return v;
}

static float parse_float(const char *flag, const char *s, float lo, float hi) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "error: %s expects a number in %g..%g, got '%s'\n", flag, (double)lo,
                (double)hi, s);
        exit(EXIT_FAILURE);
    }
    return v;
}

static Options parse_args(int argc, char **argv) {
    Options o = {0};
    o.mode = "generate";
    o.temperature = 1.0f;
    o.topp = 0.9f;
    o.steps = 256;
    int i = 1;
    if (i < argc && argv[i][0] != '-') o.model_path = argv[i++];
    for (; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            exit(EXIT_SUCCESS);
        }
        if (f[0] != '-') die("unexpected argument '%s' (the model path goes first)", f);
        if (i + 1 >= argc) die("flag %s needs a value", f);
        const char *v = argv[++i];
        if (!strcmp(f, "-t")) o.temperature = parse_float(f, v, 0.0f, 100.0f);
        else if (!strcmp(f, "-p")) o.topp = parse_float(f, v, 0.0f, 1.0f);
        else if (!strcmp(f, "-k")) o.topk = (int)parse_long(f, v, 0, INT_MAX);
        else if (!strcmp(f, "-s")) o.seed = (unsigned long long)parse_long(f, v, 0, LONG_MAX);
        else if (!strcmp(f, "-n")) o.steps = (int)parse_long(f, v, 0, INT_MAX);
        else if (!strcmp(f, "-i")) o.prompt = v;
        else if (!strcmp(f, "-z")) o.tokenizer_path = v;
        else if (!strcmp(f, "-m")) o.mode = v;
        else if (!strcmp(f, "--threads")) o.threads = (int)parse_long(f, v, 1, 1024);
        else if (!strcmp(f, "--pe")) o.pe_name = v;
        else if (!strcmp(f, "--rope-theta")) o.rope_theta = parse_float(f, v, 1.0001f, 1e12f);
        else if (!strcmp(f, "--alibi-max-bias")) o.alibi_max_bias = parse_float(f, v, 1e-6f, 1e6f);
        else die("unknown flag '%s' (see %s -h)", f, argv[0]);
    }
    if (strcmp(o.mode, "generate") && strcmp(o.mode, "tokenize"))
        die("-m: unknown mode '%s' (generate|tokenize)", o.mode);
    return o;
}

/* The checkpoint's scheme, overridden by the flags. */
static PeParams choose_pe(const Model *m, const Options *o) {
    PeParams p = m->pe;
    if (o->pe_name) {
        PeKind kind;
        if (pe_kind_from_name(o->pe_name, &kind))
            die("--pe: unknown scheme '%s' (sinusoidal|learned|rope|alibi|none)", o->pe_name);
        p.kind = kind;
    }
    if (o->rope_theta > 0.0f) p.rope_theta = o->rope_theta;
    if (o->alibi_max_bias > 0.0f) p.alibi_max_bias = o->alibi_max_bias;
    return p;
}

/* tokenizer.bin beside the model, as llama2.c users lay files out. */
static const char *default_tokenizer(const char *model_path, char *buf, size_t n) {
    const char *slash = strrchr(model_path, '/');
    int dir_len = slash ? (int)(slash - model_path + 1) : 0;
    snprintf(buf, n, "%.*stokenizer.bin", dir_len, model_path);
    if (access(buf, R_OK) != 0)
        die("no tokenizer: pass -z PATH (looked for '%s')", buf);
    return buf;
}

static void load_tokenizer(Tokenizer *tok, const char *path, int vocab) {
    PosencError err;
    if (tokenizer_load(tok, path, vocab, &err)) die("%s", err.msg);
}

static int run_tokenize(const Options *o) {
    if (!o->tokenizer_path) die("-m tokenize needs -z TOKENIZER");
    Tokenizer tok;
    load_tokenizer(&tok, o->tokenizer_path, 0);
    const char *text = o->prompt ? o->prompt : "";
    size_t len = strlen(text);
    int *ids = mallocCheck((len + 3) * sizeof(int)), n = 0;
    PosencError err;
    if (tokenizer_encode(&tok, text, len, 0, 0, ids, &n, &err)) die("%s", err.msg);
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    free(ids);
    tokenizer_free(&tok);
    return EXIT_SUCCESS;
}

static int run_generate(const Options *o) {
    if (!o->model_path) die("no model given (usage: run MODEL [options])");
    PosencError err;
    Model model;
    if (model_load(&model, o->model_path, &err)) die("%s", err.msg);
    char tok_buf[1024];
    const char *tok_path = o->tokenizer_path
                               ? o->tokenizer_path
                               : default_tokenizer(o->model_path, tok_buf, sizeof tok_buf);
    Tokenizer tok;
    load_tokenizer(&tok, tok_path, model.config.vocab_size);

    PeParams pe = choose_pe(&model, o);
    Context ctx;
    if (context_build(&ctx, &model, &pe, model.config.seq_len, model.config.seq_len, &err))
        die("%s", err.msg);
    Sampler sampler;
    unsigned long long seed = o->seed ? o->seed : (unsigned long long)time(NULL);
    sampler_build(&sampler, model.config.vocab_size, o->temperature, o->topp, o->topk, seed);

    GenerateOptions g = {o->prompt, o->steps, 0, 1};
    int rc = generate_text(&ctx, &tok, &sampler, &g, stdout, &err);
    if (rc) fprintf(stderr, "error: %s\n", err.msg);

    sampler_free(&sampler);
    context_free(&ctx);
    tokenizer_free(&tok);
    model_free(&model);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}

int main(int argc, char **argv) {
    Options o = parse_args(argc, argv);
    if (o.threads > 0) omp_set_num_threads(o.threads);
    if (!strcmp(o.mode, "tokenize")) return run_tokenize(&o);
    return run_generate(&o);
}
