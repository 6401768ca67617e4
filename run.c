/* posenc — the command line.  Parses flags, loads the model and tokenizer,
 * picks the positional scheme and runs one mode.  The engine lives in
 * model/, positional/ and tokenizer/. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model/bench.h"
#include "model/context.h"
#include "model/generate.h"
#include "model/inspect.h"
#include "model/model.h"
#include "model/perplexity.h"
#include "model/plot_svg.h"
#include "model/sampler.h"
#include "positional/pe.h"
#include "tokenizer/tokenizer.h"

#define MAX_VARIANTS 16

typedef struct {
    const char *model_path, *tokenizer_path, *mode, *prompt, *text_file;
    float temperature, topp;
    int topk, steps, threads;
    unsigned long long seed;
    /* positions */
    const char *pe_list;        /* --pe: one scheme, or a comma list in ppl mode */
    float rope_theta;           /* 0: the checkpoint's */
    float alibi_max_bias;       /* 0: the checkpoint's */
    const char *rope_scaling;   /* NULL: the checkpoint's */
    float rope_factor;
    int rope_orig_ctx;
    const char *pe_overflow;
    int ctx, pos_offset, keep;
    int no_shift, shift_no_rerotate, trace;
    /* ppl */
    int chunks, stride, stream, bos, json;
    int pieces;                 /* tokenize: print pieces instead of ids */
    const char *kv_type;        /* f32 | f16 */
    /* bench */
    const char *pp_list, *tg_list;
    int reps;
    const char *csv_path, *svg_path;
} Options;

static void usage(FILE *f) {
    fprintf(f,
        "usage: run MODEL [options]\n"
        "       run [MODEL] -m tokenize [-z TOKENIZER] (-i TEXT | -f FILE) [--pieces]\n"
        "\n"
        "MODEL is a GGUF file (weights, vocabulary and positional configuration in one)\n"
        "or a llama2.c .bin checkpoint.\n"
        "\n"
        "  -m MODE              generate (default) | ppl | bench | tokenize | inspect\n"
        "  -z PATH              tokenizer: tokenizer.bin, SentencePiece .model, or a\n"
        "                       vocab.json+merges.txt directory (default: the GGUF's own\n"
        "                       vocabulary, or tokenizer.bin beside a .bin model)\n"
        "  -i TEXT              prompt (default: empty)\n"
        "  -n N                 total tokens including the prompt (default 256; 0 = context)\n"
        "  -t F                 temperature (default 1.0; 0 = greedy)\n"
        "  -p F                 top-p (default 0.9; 0 or 1 disables)\n"
        "  -k N                 top-k (default 0 = off)\n"
        "  -s N                 random seed (default: time)\n"
        "  --threads N          OpenMP threads (default: all cores)\n"
        "  --kv-type T          KV cache element type: f32 (default) | f16\n"
        "positions:\n"
        "  --pe NAME            sinusoidal|learned|rope|alibi|none (default: the checkpoint's);\n"
        "                       in ppl mode a comma list of NAME[:SCALING:FACTOR] variants\n"
        "  --rope-theta F       RoPE base (default: checkpoint's, 10000)\n"
        "  --rope-scaling S     none|linear|ntk|yarn (default none)\n"
        "  --rope-factor F      context extension factor for --rope-scaling (default 1)\n"
        "  --rope-orig-ctx N    trained context for yarn (default: the model's)\n"
        "  --alibi-max-bias F   ALiBi max bias (default 8)\n"
        "  --pe-overflow P      learned positions past the table: error|clamp (default error)\n"
        "  --ctx N              KV cache cells / ppl window (default: trained context)\n"
        "  --pos-offset N       position of the first token (default 0)\n"
        "  --keep N             cells a context shift never discards (default 0)\n"
        "  --no-shift           stop at the end of the context instead of shifting\n"
        "  --shift-no-rerotate  demonstrate the classic bug: shift without fixing keys\n"
        "  --trace-positions    print query and cache positions for every step (stderr)\n"
        "ppl:\n"
        "  -f FILE              text to score\n"
        "  --chunks N           score at most N windows\n"
        "  --stride S           sliding windows advancing by S\n"
        "  --stream             one cache with context shifts instead of windows\n"
        "  --bos                prepend BOS to the text\n"
        "  --json               one JSON object per variant\n"
        "  --csv PATH           mean NLL by position within the window\n"
        "  --svg PATH           NLL-vs-position chart of all variants\n"
        "bench:\n"
        "  --pp LIST            prefill sizes, e.g. 128,512 (default 512)\n"
        "  --tg LIST            decode lengths, e.g. 128 (default 128)\n"
        "  -r R                 repetitions (default 5)\n"
        "  --json               one JSON object per test\n"
        "tokenize / inspect:\n"
        "  --pieces             tokenize: print pieces instead of ids\n"
        "  --json               inspect: one JSON object\n"
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
    if (errno || end == s || *end || v < lo || v > hi)
        die("%s expects an integer in %ld..%ld, got '%s'", flag, lo, hi, s);
    return v;
}

static float parse_float(const char *flag, const char *s, float lo, float hi) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        die("%s expects a number in %g..%g, got '%s'", flag, (double)lo, (double)hi, s);
    return v;
}

/* Flags without a value. */
static int parse_switch(Options *o, const char *f) {
    int *target = !strcmp(f, "--no-shift")          ? &o->no_shift
                : !strcmp(f, "--shift-no-rerotate") ? &o->shift_no_rerotate
                : !strcmp(f, "--trace-positions")   ? &o->trace
                : !strcmp(f, "--stream")            ? &o->stream
                : !strcmp(f, "--bos")               ? &o->bos
                : !strcmp(f, "--json")              ? &o->json
                : !strcmp(f, "--pieces")            ? &o->pieces
                                                    : NULL;
    if (target) *target = 1;
    return target != NULL;
}

static int parse_value(Options *o, const char *f, const char *v) {
    if (!strcmp(f, "-t")) o->temperature = parse_float(f, v, 0.0f, 100.0f);
    else if (!strcmp(f, "-p")) o->topp = parse_float(f, v, 0.0f, 1.0f);
    else if (!strcmp(f, "-k")) o->topk = (int)parse_long(f, v, 0, INT_MAX);
    else if (!strcmp(f, "-s")) o->seed = (unsigned long long)parse_long(f, v, 0, LONG_MAX);
    else if (!strcmp(f, "-n")) o->steps = (int)parse_long(f, v, 0, INT_MAX);
    else if (!strcmp(f, "-i")) o->prompt = v;
    else if (!strcmp(f, "-f")) o->text_file = v;
    else if (!strcmp(f, "-z")) o->tokenizer_path = v;
    else if (!strcmp(f, "-m")) o->mode = v;
    else if (!strcmp(f, "--threads")) o->threads = (int)parse_long(f, v, 1, 1024);
    else if (!strcmp(f, "--pe")) o->pe_list = v;
    else if (!strcmp(f, "--rope-theta")) o->rope_theta = parse_float(f, v, 1.0001f, 1e12f);
    else if (!strcmp(f, "--rope-scaling")) o->rope_scaling = v;
    else if (!strcmp(f, "--rope-factor")) o->rope_factor = parse_float(f, v, 1.0f, 1e6f);
    else if (!strcmp(f, "--rope-orig-ctx")) o->rope_orig_ctx = (int)parse_long(f, v, 1, 1 << 24);
    else if (!strcmp(f, "--alibi-max-bias")) o->alibi_max_bias = parse_float(f, v, 1e-6f, 1e6f);
    else if (!strcmp(f, "--pe-overflow")) o->pe_overflow = v;
    else if (!strcmp(f, "--ctx")) o->ctx = (int)parse_long(f, v, 1, 1 << 22);
    else if (!strcmp(f, "--pos-offset")) o->pos_offset = (int)parse_long(f, v, 0, 1 << 30);
    else if (!strcmp(f, "--keep")) o->keep = (int)parse_long(f, v, 0, 1 << 22);
    else if (!strcmp(f, "--chunks")) o->chunks = (int)parse_long(f, v, 1, INT_MAX);
    else if (!strcmp(f, "--stride")) o->stride = (int)parse_long(f, v, 1, 1 << 22);
    else if (!strcmp(f, "--csv")) o->csv_path = v;
    else if (!strcmp(f, "--svg")) o->svg_path = v;
    else if (!strcmp(f, "--kv-type")) o->kv_type = v;
    else if (!strcmp(f, "--pp")) o->pp_list = v;
    else if (!strcmp(f, "--tg")) o->tg_list = v;
    else if (!strcmp(f, "-r")) o->reps = (int)parse_long(f, v, 1, 1000);
    else return 0;
    return 1;
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
        if (parse_switch(&o, f)) continue;
        if (i + 1 >= argc) {
            Options probe = o;
            if (parse_value(&probe, f, "0")) die("flag %s needs a value", f);
            die("unknown flag '%s' (see %s -h)", f, argv[0]);
        }
        if (!parse_value(&o, f, argv[i + 1])) die("unknown flag '%s' (see %s -h)", f, argv[0]);
        i++;
    }
    const char *modes[] = {"generate", "ppl", "bench", "tokenize", "inspect"};
    int known = 0;
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) known |= !strcmp(o.mode, modes[m]);
    if (!known) die("-m: unknown mode '%s' (generate|ppl|bench|tokenize|inspect)", o.mode);
    if (o.kv_type && strcmp(o.kv_type, "f32") && strcmp(o.kv_type, "f16"))
        die("--kv-type: unknown type '%s' (f32|f16)", o.kv_type);
    if (o.no_shift && o.shift_no_rerotate) die("--no-shift and --shift-no-rerotate exclude each other");
    return o;
}

/* One variant "NAME[:SCALING[:FACTOR]]" on top of the checkpoint's scheme
 * and the global flags. */
static PeParams variant_params(const Model *m, const Options *o, const char *spec) {
    PeParams p = m->pe;
    if (o->rope_theta > 0.0f) p.rope_theta = o->rope_theta;
    if (o->alibi_max_bias > 0.0f) p.alibi_max_bias = o->alibi_max_bias;
    if (o->rope_factor > 0.0f) p.rope_factor = o->rope_factor;
    if (o->rope_orig_ctx > 0) p.rope_orig_ctx = o->rope_orig_ctx;
    if (o->rope_scaling && pe_rope_scaling_from_name(o->rope_scaling, &p.rope_scaling))
        die("--rope-scaling: unknown mode '%s' (none|linear|ntk|yarn)", o->rope_scaling);
    if (o->pe_overflow) {
        if (!strcmp(o->pe_overflow, "error")) p.learned_overflow = PE_OVERFLOW_ERROR;
        else if (!strcmp(o->pe_overflow, "clamp")) p.learned_overflow = PE_OVERFLOW_CLAMP;
        else die("--pe-overflow: unknown policy '%s' (error|clamp)", o->pe_overflow);
    }
    if (!spec) return p;
    char name[64], scaling[64] = "";
    float factor = 0.0f;
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len >= sizeof name) die("--pe: scheme name too long in '%s'", spec);
    memcpy(name, spec, len);
    name[len] = '\0';
    if (pe_kind_from_name(name, &p.kind))
        die("--pe: unknown scheme '%s' (sinusoidal|learned|rope|alibi|none)", name);
    if (colon) {
        char tail[64];
        snprintf(tail, sizeof tail, "%s", colon + 1);
        char *c2 = strchr(tail, ':');
        if (c2) {
            *c2 = '\0';
            factor = parse_float("--pe factor", c2 + 1, 1.0f, 1e6f);
        }
        snprintf(scaling, sizeof scaling, "%s", tail);
        if (p.kind != PE_ROPE) die("--pe: '%s': only rope takes a scaling mode", spec);
        if (pe_rope_scaling_from_name(scaling, &p.rope_scaling))
            die("--pe: '%s': unknown scaling '%s' (none|linear|ntk|yarn)", spec, scaling);
        if (factor > 0.0f) p.rope_factor = factor;
    }
    return p;
}

/* Splits --pe into variants (a comma list only where the mode compares). */
static int split_variants(const Options *o, char *buf, size_t n, const char **out) {
    if (!o->pe_list) {
        out[0] = NULL;
        return 1;
    }
    snprintf(buf, n, "%s", o->pe_list);
    int count = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (count == MAX_VARIANTS) die("--pe: at most %d variants", MAX_VARIANTS);
        out[count++] = t;
    }
    if (count == 0) die("--pe: empty list");
    if (count > 1 && strcmp(o->mode, "ppl") != 0)
        die("--pe: a comma list compares variants and needs -m ppl");
    return count;
}

/* Positions past what the scheme was trained on: a warning where the scheme
 * can extrapolate, an error where it cannot. */
static void check_positions(const Model *m, const PeParams *p, int last_pos) {
    if (p->kind == PE_LEARNED) {
        int table = m->weights.n_positions;
        if (table == 0) return; /* no table at all: context_build refuses with the reason */
        if (last_pos >= table && p->learned_overflow == PE_OVERFLOW_ERROR)
            die("--pe learned: position %d is past the table of %d positions "
                "(lower --ctx/--pos-offset, or --pe-overflow clamp)", last_pos, table);
        if (last_pos >= table)
            fprintf(stderr, "warning: positions past %d reuse the last learned position "
                            "(--pe-overflow clamp)\n", table - 1);
        return;
    }
    if (last_pos >= m->config.seq_len)
        fprintf(stderr, "warning: positions up to %d exceed the trained context %d; %s "
                        "extrapolates\n", last_pos, m->config.seq_len, pe_kind_name(p->kind));
}

static TensorType kv_type(const Options *o) {
    return o->kv_type && !strcmp(o->kv_type, "f16") ? TENSOR_F16 : TENSOR_F32;
}

static void build_context(Context *ctx, const Model *m, const PeParams *p, ContextSize size) {
    PosencError err;
    if (context_build_sized(ctx, m, p, &size, &err)) die("%s", err.msg);
}

/* tokenizer.bin beside the model, as llama2.c users lay files out. */
static const char *default_tokenizer(const char *model_path, char *buf, size_t n) {
    const char *slash = strrchr(model_path, '/');
    int dir_len = slash ? (int)(slash - model_path + 1) : 0;
    snprintf(buf, n, "%.*stokenizer.bin", dir_len, model_path);
    if (access(buf, R_OK) != 0) die("no tokenizer: pass -z PATH (looked for '%s')", buf);
    return buf;
}

static void load_model(const Options *o, Model *model) {
    if (!o->model_path) die("no model given (usage: run MODEL [options])");
    PosencError err;
    if (model_load(model, o->model_path, &err)) die("%s", err.msg);
}

/* -z wins; then the GGUF's own vocabulary; then tokenizer.bin beside a .bin. */
static void load_tokenizer(const Options *o, const Model *model, Tokenizer *tok) {
    PosencError err;
    int vocab = model ? model->config.vocab_size : 0;
    if (o->tokenizer_path) {
        if (tokenizer_load(tok, o->tokenizer_path, vocab, &err)) die("-z: %s", err.msg);
    } else if (model && model->gguf) {
        if (tokenizer_load_gguf(tok, model->gguf, &err)) die("%s", err.msg);
        if (tok->vocab_size != vocab)
            die("%s: the vocabulary has %d tokens but the model %d", o->model_path, tok->vocab_size,
                vocab);
    } else if (model) {
        char buf[1024];
        if (tokenizer_load(tok, default_tokenizer(o->model_path, buf, sizeof buf), vocab, &err))
            die("%s", err.msg);
    } else {
        die("-m tokenize needs -z TOKENIZER or a GGUF file");
    }
}

static void load_model_and_tokenizer(const Options *o, Model *model, Tokenizer *tok) {
    load_model(o, model);
    load_tokenizer(o, model, tok);
}

/* -f: a file, or a pipe such as /dev/stdin (read to its end, as cat
 * would); a directory is refused here, before reading it fails. */
static FILE *open_text_file(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) die("-f: '%s' is a directory", path);
    FILE *f = fopen(path, "rb");
    if (!f) die("-f: cannot open '%s': %s", path, strerror(errno));
    return f;
}

static char *read_text_file(const char *path, size_t *len) {
    FILE *f = open_text_file(path);
    size_t cap = 1 << 16, n = 0;
    char *buf = mallocCheck(cap, "the text of -f");
    for (size_t got; (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            cap *= 2;
            char *grown = realloc(buf, cap);
            if (!grown) posenc_out_of_memory(1, cap, "the text of -f");
            buf = grown;
        }
    }
    if (ferror(f)) die("-f: error reading '%s'", path);
    fclose(f);
    *len = n;
    return buf;
}

/* Tokenizing needs no weights: -z, else the model file's own vocabulary
 * (a GGUF, read without its weights, or tokenizer.bin beside a .bin). */
static int run_tokenize(const Options *o) {
    Tokenizer tok;
    PosencError err;
    char buf[1024];
    if (o->tokenizer_path || !o->model_path) {
        load_tokenizer(o, NULL, &tok);
    } else {
        int is_gguf = gguf_file_has_magic(o->model_path, &err);
        if (is_gguf < 0) die("%s", err.msg);
        const char *path = is_gguf ? o->model_path : default_tokenizer(o->model_path, buf, sizeof buf);
        if (tokenizer_load(&tok, path, 0, &err)) die("%s", err.msg);
    }
    int rc;
    if (o->text_file) {
        FILE *in = open_text_file(o->text_file);
        rc = tokenize_stream(&tok, in, stdout, o->pieces, &err);
        fclose(in);
    } else {
        const char *text = o->prompt ? o->prompt : "";
        rc = tokenize_text(&tok, text, strlen(text), stdout, o->pieces, &err);
    }
    if (rc && ferror(stdout)) die("%s", err.msg); /* writing the ids failed, not the text */
    if (rc && o->text_file) die("-f %s: %s", o->text_file, err.msg);
    if (rc) die("-i: %s", err.msg);
    tokenizer_free(&tok);
    return EXIT_SUCCESS;
}

static int run_bench(const Options *o) {
    Model model;
    load_model(o, &model);
    BenchOptions b = bench_options_default();
    PosencError err;
    if (o->pp_list && bench_parse_sizes(b.pp, &b.n_pp, o->pp_list, &err)) die("--pp: %s", err.msg);
    if (o->tg_list && bench_parse_sizes(b.tg, &b.n_tg, o->tg_list, &err)) die("--tg: %s", err.msg);
    if (o->reps) b.reps = o->reps;
    b.threads = o->threads;
    b.kv_type = kv_type(o);
    b.json = o->json;
    if (bench_run(&model, &b, stdout, &err)) die("%s", err.msg);
    model_free(&model);
    return EXIT_SUCCESS;
}

static int run_inspect(const Options *o) {
    Model model;
    load_model(o, &model);
    int n_ctx = o->ctx ? o->ctx : model.config.seq_len;
    model_inspect(&model, stdout, o->json, n_ctx, kv_type(o));
    model_free(&model);
    return EXIT_SUCCESS;
}

/* Named here, before any work; the engine checks again for other callers. */
static void check_keep(const Options *o, int n_ctx) {
    PosencError err;
    if (!o->no_shift && context_shift_check_keep(n_ctx, o->keep, &err))
        die("--keep %d: %s: keep at most --ctx - 2, or pass --no-shift", o->keep, err.msg);
}

static ContextShiftMode shift_mode(const Options *o) {
    if (o->no_shift) return CONTEXT_SHIFT_OFF;
    if (o->shift_no_rerotate) {
        fprintf(stderr, "warning: --shift-no-rerotate keeps stale keys after a context shift: "
                        "this demonstrates a bug, the output will degrade\n");
        return CONTEXT_SHIFT_NO_REROTATE;
    }
    return CONTEXT_SHIFT_ON;
}

/* The prompt's problems name -i: generate_text would find them too, but
 * not which flag to change. */
static void check_prompt(const Options *o, const Tokenizer *tok) {
    int *ids, n_ids;
    PosencError err;
    if (generate_encode_prompt(tok, o->prompt, &ids, &n_ids, &err)) die("-i: %s", err.msg);
    free(ids);
}

static int run_generate(const Options *o) {
    Model model;
    Tokenizer tok;
    load_model_and_tokenizer(o, &model, &tok);
    check_prompt(o, &tok);
    char buf[1024];
    const char *spec[MAX_VARIANTS];
    split_variants(o, buf, sizeof buf, spec);
    PeParams pe = variant_params(&model, o, spec[0]);
    int n_ctx = o->ctx ? o->ctx : model.config.seq_len;
    check_keep(o, n_ctx);
    ContextShiftMode shift = shift_mode(o);
    int span = o->steps > 0 && o->steps < n_ctx ? o->steps : n_ctx;
    check_positions(&model, &pe, o->pos_offset + span - 1);
    Context ctx;
    build_context(&ctx, &model, &pe, context_size_generate(n_ctx, kv_type(o)));
    Sampler sampler;
    unsigned long long seed = o->seed ? o->seed : (unsigned long long)time(NULL);
    sampler_build(&sampler, model.config.vocab_size, o->temperature, o->topp, o->topk, seed);

    GenerateOptions g = {.prompt = o->prompt, .steps = o->steps, .pos_offset = o->pos_offset,
                         .keep = o->keep, .shift = shift, .trace = o->trace, .verbose_stats = 1};
    PosencError err;
    int rc = generate_text(&ctx, &tok, &sampler, &g, stdout, &err);
    if (rc) fprintf(stderr, "error: %s\n", err.msg);

    sampler_free(&sampler);
    context_free(&ctx);
    tokenizer_free(&tok);
    model_free(&model);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}

static void progress_bar(double fraction, void *user) {
    const char *label = user;
    int filled = (int)(fraction * 30);
    fprintf(stderr, "\r%-24.24s [%.*s%*s] %3d%%", label, filled, "==============================",
            30 - filled, "", (int)(fraction * 100));
    if (fraction >= 1.0) fputc('\n', stderr);
}

/* Mean NLL by position, smoothed by a centred moving average of `width`. */
static double *nll_curve(const PplResult *r, int width) {
    double *y = mallocCheck((size_t)r->n_pos * sizeof(double), "the NLL curve");
    for (int i = 0; i < r->n_pos; i++) {
        double sum = 0.0;
        long count = 0;
        for (int j = i - width / 2; j <= i + width / 2; j++)
            if (j >= 0 && j < r->n_pos) {
                sum += r->nll_by_pos[j];
                count += r->count_by_pos[j];
            }
        y[i] = count ? sum / count : NAN;
    }
    return y;
}

static void write_csv(const char *path, const char **labels, const PplResult *res, int n) {
    FILE *f = fopen(path, "w");
    if (!f) die("--csv: cannot write '%s': %s", path, strerror(errno));
    fprintf(f, "variant,position,mean_nll,count\n");
    for (int v = 0; v < n; v++)
        for (int i = 0; i < res[v].n_pos; i++)
            if (res[v].count_by_pos[i])
                fprintf(f, "%s,%d,%.6f,%ld\n", labels[v], i,
                        res[v].nll_by_pos[i] / res[v].count_by_pos[i], res[v].count_by_pos[i]);
    if (fclose(f) != 0) die("--csv: error writing '%s'", path);
}

static void write_svg(const Options *o, const Model *m, const char **labels, const PplResult *res,
                      int n) {
    int n_pos = res[0].n_pos, width = n_pos > 256 ? n_pos / 128 : 1;
    SvgSeries series[MAX_VARIANTS];
    for (int v = 0; v < n; v++) series[v] = (SvgSeries){labels[v], nll_curve(&res[v], width), n_pos};
    char title[256], marker[64];
    snprintf(title, sizeof title, "NLL by position: %s, %s%s", o->model_path, o->text_file,
             width > 1 ? " (moving average)" : "");
    snprintf(marker, sizeof marker, "trained context %d", m->config.seq_len);
    PosencError err;
    int rc = svg_write_curves(o->svg_path, title, "position within the window",
                              "mean NLL (nats/token)", series, n, m->config.seq_len, marker, &err);
    for (int v = 0; v < n; v++) free((void *)series[v].y);
    if (rc) die("%s", err.msg);
}

/* Before any context is built: a window defaults to the model's context
 * length, which a header may set to millions of tokens, and its logits
 * would be allocated before the text is found too short to fill it. */
static void check_text_length(const Options *o, int n_ids, int C) {
    if (o->stream && n_ids < 2)
        die("-f %s: the text has %d tokens, too few to score (at least 2)", o->text_file, n_ids);
    if (!o->stream && n_ids - 1 < C)
        die("-f %s: the text has %d tokens, too few for one window of %d (lower --ctx)",
            o->text_file, n_ids, C);
}

static int run_ppl(const Options *o) {
    if (!o->text_file) die("-m ppl needs -f FILE");
    Model model;
    Tokenizer tok;
    load_model_and_tokenizer(o, &model, &tok);
    size_t len;
    char *text = read_text_file(o->text_file, &len);
    int *ids = NULL, n_ids = 0;
    PosencError err;
    if (tokenizer_encode_alloc(&tok, text, len, o->bos, 0, &ids, &n_ids, &err))
        die("-f %s: %s", o->text_file, err.msg);
    free(text);

    char buf[1024];
    const char *specs[MAX_VARIANTS];
    int n_var = split_variants(o, buf, sizeof buf, specs);
    int C = o->ctx ? o->ctx : model.config.seq_len;
    if (o->stream) check_keep(o, C);
    check_text_length(o, n_ids, C);
    PplOptions popt = {.window = C, .stride = o->stride, .max_chunks = o->chunks,
                       .stream = o->stream, .keep = o->keep, .shift = shift_mode(o),
                       .pos_offset = o->pos_offset};
    if (o->stride > C) die("--stride %d must be in 1..%d (the window, --ctx)", o->stride, C);
    PplResult res[MAX_VARIANTS];
    const char *labels[MAX_VARIANTS];
    PeParams params[MAX_VARIANTS];
    for (int v = 0; v < n_var; v++) { /* every variant is checked before any work */
        params[v] = variant_params(&model, o, specs[v]);
        labels[v] = specs[v] ? specs[v] : pe_kind_name(params[v].kind);
        check_positions(&model, &params[v], o->pos_offset + C - 1);
    }
    if (!o->json)
        printf("# %s on %s: %d tokens, %s of %d%s\n%-22s %6s %9s %9s %10s %8s %9s\n",
               o->model_path, o->text_file, n_ids, o->stream ? "stream through a cache" : "windows",
               C, o->stride ? " (sliding)" : "", "variant", "ctx", "tokens", "nll", "ppl", "seconds",
               "tok/s");
    for (int v = 0; v < n_var; v++) {
        Context ctx;
        build_context(&ctx, &model, &params[v], context_size_ppl(C, kv_type(o)));
        int bar = isatty(STDERR_FILENO);
        if (ppl_evaluate(&ctx, ids, n_ids, &popt, &res[v], bar ? progress_bar : NULL,
                         (void *)labels[v], &err))
            die("%s", err.msg);
        context_free(&ctx);
        double nll = res[v].nll_sum / res[v].n_scored;
        double tok_s = res[v].n_scored / res[v].seconds;
        if (o->json)
            printf("{\"pe\": \"%s\", \"ctx\": %d, \"tokens\": %ld, \"nll\": %.6f, \"ppl\": %.4f, "
                   "\"seconds\": %.3f, \"tok_s\": %.1f, \"stream\": %s}\n",
                   labels[v], C, res[v].n_scored, nll, exp(nll), res[v].seconds, tok_s,
                   o->stream ? "true" : "false");
        else
            printf("%-22s %6d %9ld %9.4f %10.3f %8.2f %9.0f\n", labels[v], C, res[v].n_scored, nll,
                   exp(nll), res[v].seconds, tok_s);
        fflush(stdout);
    }
    if (o->csv_path) write_csv(o->csv_path, labels, res, n_var);
    if (o->svg_path) write_svg(o, &model, labels, res, n_var);
    for (int v = 0; v < n_var; v++) ppl_result_free(&res[v]);
    free(ids);
    tokenizer_free(&tok);
    model_free(&model);
    return EXIT_SUCCESS;
}

int main(int argc, char **argv) {
    Options o = parse_args(argc, argv);
    if (o.threads > 0) omp_set_num_threads(o.threads);
    if (!strcmp(o.mode, "tokenize")) return run_tokenize(&o);
    if (!strcmp(o.mode, "ppl")) return run_ppl(&o);
    if (!strcmp(o.mode, "inspect")) return run_inspect(&o);
    if (!strcmp(o.mode, "bench")) return run_bench(&o);
    return run_generate(&o);
}
