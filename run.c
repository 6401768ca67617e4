/* posenc — the command line.  Parses flags, loads the model and tokenizer,
 * picks the positional scheme and runs one mode.  The engine lives in
 * model/, positional/ and tokenizer/. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "modes/attention_view.h"
#include "modes/bench.h"
#include "modes/cache_dump.h"
#include "modes/chat.h"
#include "model/context.h"
#include "modes/generate.h"
#include "modes/html_report.h"
#include "modes/inspect.h"
#include "base/json.h"
#include "modes/logprobs.h"
#include "modes/pe_view.h"
#include "model/model.h"
#include "modes/perplexity.h"
#include "modes/plot_svg.h"
#include "modes/ppl_study.h"
#include "model/sampler.h"
#include "positional/pe.h"
#include "tokenizer/tokenizer.h"

#define MAX_VARIANTS 16
#define MAX_STOPS 16
#define MAX_MODELS 16
#define MAX_WINDOWS 16

typedef struct {
    const char *model_paths[MAX_MODELS]; /* ppl compares several; other modes take one */
    int n_models;
    const char *model_path, *tokenizer_path, *mode, *prompt, *text_file;
    float temperature, topp, min_p;
    int topk, steps, threads;
    SamplerPenalties penalties;
    /* chat */
    const char *system_prompt, *chat_template;
    const char *stops[MAX_STOPS];
    int n_stops;
    unsigned long long seed;
    /* positions */
    const char *pe_list;        /* --pe: one scheme, or a comma list in ppl mode */
    float rope_theta;           /* 0: the checkpoint's */
    float alibi_max_bias;       /* 0: the checkpoint's */
    const char *rope_scaling;   /* NULL: the checkpoint's */
    float rope_factor;
    int rope_orig_ctx;
    const char *longrope_rule;  /* NULL: sequence (Hugging Face's) */
    const char *pe_layers;      /* per-layer schemes: LAYERS=SCHEME[/...] */
    const char *window;         /* per-layer windows: W or LAYERS=W[/...] */
    const char *chunk;          /* per-layer chunks: C or LAYERS=C[/...] */
    const char *pe_overflow;
    int ctx, pos_offset, keep;
    int windows[MAX_WINDOWS];   /* --ctx as a list (ppl): the study's windows; ctx is the first */
    int n_windows;
    int no_shift, shift_no_rerotate, trace, dump_cache;
    /* ppl */
    int chunks, stride, stream, bos, json;
    int pieces;                 /* tokenize: print pieces instead of ids */
    int special;                /* control pieces written in the text become their ids */
    const char *kv_type;        /* f32 | f16 */
    /* bench */
    const char *pp_list, *tg_list, *depth_list;
    int reps;
    const char *csv_path, *svg_path, *html_path;
    int layer, head;            /* attention: the selection; -1: all */
    const char *baseline;       /* ppl: the variant the others are compared with */
    const char *logits_out;     /* ppl, generate: JSON lines of log-probabilities */
    int logits_top;             /* ids per line in --logits-out; -1: not given */
    const char *given[64];      /* every flag on the command line, for check_flags_apply */
    int n_given;
} Options;

/* "none|sinusoidal|...": every scheme in positional/'s registry, so a new
 * one appears in -h and in errors without an edit here. */
static const char *scheme_names(void) {
    static char names[256];
    if (!names[0]) pe_kind_names(names, sizeof names, "|");
    return names;
}

/* "none|linear|...": every rope scaling of positional/. */
static const char *scaling_names(void) {
    static char names[256];
    if (!names[0]) pe_rope_scaling_names(names, sizeof names, "|");
    return names;
}

/* "chatml|llama2|...": the built-in chat formats. */
static const char *template_names(void) {
    static char names[256];
    if (!names[0])
        for (int k = 0, at = 0; chat_template_builtin_name(k); k++)
            at += snprintf(names + at, sizeof names - (size_t)at, "%s%s", k ? "|" : "",
                           chat_template_builtin_name(k));
    return names;
}

static void usage(FILE *f) {
    fprintf(f,
        "usage: run MODEL [options]\n"
        "       run MODEL [MODEL...] -m ppl -f FILE --ctx N[,N...] [options]\n"
        "       run [MODEL] -m tokenize [-z TOKENIZER] (-i TEXT | -f FILE) [--pieces] [--special]\n"
        "\n"
        "MODEL is a GGUF file (weights, vocabulary and positional configuration in one)\n"
        "or a llama2.c .bin checkpoint.\n"
        "\n"
        "  -m MODE              generate (default) | chat | ppl | bench | tokenize | inspect |\n"
        "                       pe | attention\n"
        "  -z PATH              tokenizer: tokenizer.bin, SentencePiece .model, or a\n"
        "                       vocab.json+merges.txt directory (default: the GGUF's own\n"
        "                       vocabulary, or tokenizer.bin beside a .bin model)\n"
        "  -i TEXT              prompt (default: empty)\n"
        "  -f FILE              generate: read the prompt from FILE (one trailing newline\n"
        "                       dropped); ppl: the text to score; tokenize: text to encode\n"
        "  -n N                 total tokens including the prompt (default 256; 0 = context)\n"
        "  -t F                 temperature (default 1.0; 0 = greedy)\n"
        "  -p F                 top-p (default 0.9; 0 or 1 disables)\n"
        "  -k N                 top-k (default 0 = off)\n"
        "  --min-p F            keep tokens at least F x the most probable (default 0 = off)\n"
        "  --repeat-penalty F   divide (multiply, when negative) the logits of recent tokens\n"
        "                       by F (default 1 = off)\n"
        "  --repeat-last-n N    tokens the penalties look back on (default 64)\n"
        "  --presence-penalty F subtract F from the logit of every recent token (default 0)\n"
        "  --frequency-penalty F subtract F x its count from each recent token (default 0)\n"
        "  -s N                 random seed (default: time)\n"
        "  --json               generate: one JSON object per token, then a summary\n"
        "                       (stdout is JSON only)\n"
        "  --logits-out FILE    generate, ppl: one JSON line per generated or scored token:\n"
        "                       its log-probability and the top ids (see README)\n"
        "  --logits-top K       ids per line in --logits-out (default 10; at most the vocabulary)\n"
        "  --threads N          OpenMP threads (default: all cores)\n"
        "  --kv-type T          KV cache element type: f32 (default) | f16\n"
        "positions:\n"
        "  --pe NAME            %s (default: the checkpoint's);\n"
        "                       in ppl mode a comma list of NAME[:SCALING:FACTOR] variants\n"
        "  --rope-theta F       RoPE base (default: checkpoint's, 10000)\n"
        "  --rope-scaling S     %s\n"
        "                       (default: the checkpoint's)\n"
        "  --rope-factor F      context extension factor for --rope-scaling (default 1)\n"
        "  --rope-orig-ctx N    the context before scaling (default: the model's)\n"
        "  --longrope-rule R    sequence (Hugging Face: long factors for a pass past the\n"
        "                       original context) | context (llama.cpp: for a --ctx past it)\n"
        "  --pe-layers SPEC     per-layer schemes, LAYERS=SCHEME[/LAYERS=SCHEME...]; LAYERS is\n"
        "                       all, everyN (the N-th, 2N-th, ...), I or I-J joined by , or +;\n"
        "                       SCHEME none|rope|alibi|t5.  A --pe variant may end in @SPEC\n"
        "  --window SPEC        sliding windows: W for every layer, or LAYERS=W[/...]; 0 = full\n"
        "  --chunk SPEC         chunked attention (a query sees its own chunk of C positions):\n"
        "                       C for every layer, or LAYERS=C[/...]; 0 = none\n"
        "  --alibi-max-bias F   ALiBi max bias (default 8)\n"
        "  --pe-overflow P      learned positions past the table: error|clamp (default error)\n"
        "  --ctx N              KV cache cells / ppl window (default: trained context);\n"
        "                       ppl: a list 64,128,... runs every window (the study)\n"
        "  --pos-offset N       position of the first token (default 0)\n"
        "  --keep N             cells a context shift never discards (default 0)\n"
        "  --no-shift           stop at the end of the context instead of shifting\n"
        "  --shift-no-rerotate  demonstrate the classic bug: shift without fixing keys\n"
        "  --trace-positions    print query and cache positions for every step (stderr)\n"
        "  --dump-cache         print the cache as a table (cell, position, token, RoPE key\n"
        "                       angle) before and after every shift and at the end (stderr)\n"
        "ppl:\n"
        "  --chunks N           score at most N windows (default: all)\n"
        "  --stride S           sliding windows advancing by S\n"
        "  --stream             one cache with context shifts instead of windows\n"
        "                       (--keep, --no-shift, --shift-no-rerotate apply here)\n"
        "  --bos                prepend BOS to the text\n"
        "  --baseline NAME      the --pe variant the others are compared with (default: the\n"
        "                       checkpoint's scheme, run too if not listed)\n"
        "  --json               one JSON object per variant\n"
        "  --csv PATH           mean NLL, count and standard error by position in the window\n"
        "                       (the study: by model, variant and window)\n"
        "  --svg PATH           NLL-vs-position chart of all variants; with several models\n"
        "                       or windows: NLL-vs-window chart of every model and variant\n"
        "bench (--pe and the positional flags choose the scheme it runs with):\n"
        "  --pp LIST            prefill sizes, e.g. 128,512 (default 512)\n"
        "  --tg LIST            decode lengths, e.g. 128 (default 128)\n"
        "  --depth LIST         cached tokens before each test, e.g. 0,1024,4096 (default 0)\n"
        "  -r R                 repetitions (default 5)\n"
        "  --json               one JSON object per test\n"
        "chat (turns from stdin, one per line; -i: the first turn; -n: tokens per reply):\n"
        "  -y TEXT              system prompt\n"
        "  --chat-template T    a Jinja file or a built-in format:\n"
        "                       %s\n"
        "                       (default: the GGUF's tokenizer.chat_template)\n"
        "  --stop STR           end a reply at STR (repeatable, up to %d)\n"
        "pe (the positional scheme as data; --pe may list variants):\n"
        "  --ctx N              positions shown (default 64, or the trained context)\n"
        "  -i TEXT, -f FILE     a text whose cached keys the RoPE view reads\n"
        "  --json               every value; --svg PREFIX: charts PREFIX-*.svg\n"
        "  --html FILE          pe, attention, the ppl study: one self-contained page, charts and data\n"
        "attention (where each head attends; --pe may list variants):\n"
        "  -i TEXT, -f FILE     the text (at most 1024 tokens)\n"
        "  --layer L, --head H  the heads whose weights are written (default: all)\n"
        "  --json, --csv PATH   every value / weight; --svg PREFIX: charts PREFIX-*.svg\n"
        "tokenize / inspect:\n"
        "  --pieces             tokenize: print pieces instead of ids\n"
        "  --special            generate, ppl, tokenize: special tokens written in the text\n"
        "                       (<|eot_id|>, <|im_start|>) become their ids (byte-level BPE)\n"
        "  --json               inspect: one JSON object\n"
        "  -h, --help           this text\n"
        "inspect shows the configuration after --pe, --rope-*, --alibi-max-bias.\n"
        "A flag the mode does not use is an error.\n", scheme_names(), scaling_names(),
        template_names(), MAX_STOPS);
}

/* Every CLI failure is one line on stderr and exit status 1.  Flag values
 * and paths come from the user: a control character in one is written as
 * \xNN, so it can neither split the line nor reach the terminal. */
__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fputs("error: ", stderr);
    for (const unsigned char *c = (const unsigned char *)msg; *c; c++) {
        if (*c < 0x20 || *c == 0x7f) fprintf(stderr, "\\x%02x", *c);
        else fputc(*c, stderr);
    }
    fputc('\n', stderr);
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

/* --ctx N, or in ppl a list of increasing windows N,N,... */
static void parse_windows(Options *o, const char *flag, const char *v) {
    char buf[256];
    if (strlen(v) >= sizeof buf) die("%s: list too long", flag);
    if (v[0] == ',' || (v[0] && v[strlen(v) - 1] == ',') || strstr(v, ",,"))
        die("%s: an empty window in '%s'", flag, v);
    snprintf(buf, sizeof buf, "%s", v);
    o->n_windows = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->n_windows == MAX_WINDOWS) die("%s: at most %d windows", flag, MAX_WINDOWS);
        int w = (int)parse_long(flag, t, 1, 1 << 22);
        if (o->n_windows && w <= o->windows[o->n_windows - 1])
            die("%s: the windows must increase, got %d after %d", flag, w,
                o->windows[o->n_windows - 1]);
        o->windows[o->n_windows++] = w;
    }
    if (o->n_windows == 0) die("%s expects an integer or a list, got '%s'", flag, v);
    o->ctx = o->windows[0];
}

/* Flags without a value. */
static int parse_switch(Options *o, const char *f) {
    int *target = !strcmp(f, "--no-shift")          ? &o->no_shift
                : !strcmp(f, "--shift-no-rerotate") ? &o->shift_no_rerotate
                : !strcmp(f, "--trace-positions")   ? &o->trace
                : !strcmp(f, "--dump-cache")        ? &o->dump_cache
                : !strcmp(f, "--stream")            ? &o->stream
                : !strcmp(f, "--bos")               ? &o->bos
                : !strcmp(f, "--json")              ? &o->json
                : !strcmp(f, "--pieces")            ? &o->pieces
                : !strcmp(f, "--special")           ? &o->special
                                                    : NULL;
    if (target) *target = 1;
    return target != NULL;
}

static int parse_value(Options *o, const char *f, const char *v) {
    if (!strcmp(f, "-t")) o->temperature = parse_float(f, v, 0.0f, 100.0f);
    else if (!strcmp(f, "-p")) o->topp = parse_float(f, v, 0.0f, 1.0f);
    else if (!strcmp(f, "-k")) o->topk = (int)parse_long(f, v, 0, INT_MAX);
    else if (!strcmp(f, "--min-p")) o->min_p = parse_float(f, v, 0.0f, 1.0f);
    else if (!strcmp(f, "--repeat-penalty")) o->penalties.repeat = parse_float(f, v, 0.01f, 100.0f);
    else if (!strcmp(f, "--repeat-last-n")) o->penalties.last_n = (int)parse_long(f, v, 0, 1 << 20);
    else if (!strcmp(f, "--presence-penalty")) o->penalties.presence = parse_float(f, v, -100.0f, 100.0f);
    else if (!strcmp(f, "--frequency-penalty")) o->penalties.frequency = parse_float(f, v, -100.0f, 100.0f);
    else if (!strcmp(f, "-y")) o->system_prompt = v;
    else if (!strcmp(f, "--chat-template")) o->chat_template = v;
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
    else if (!strcmp(f, "--longrope-rule")) o->longrope_rule = v;
    else if (!strcmp(f, "--pe-layers")) o->pe_layers = v;
    else if (!strcmp(f, "--window")) o->window = v;
    else if (!strcmp(f, "--chunk")) o->chunk = v;
    else if (!strcmp(f, "--alibi-max-bias")) o->alibi_max_bias = parse_float(f, v, 1e-6f, 1e6f);
    else if (!strcmp(f, "--pe-overflow")) o->pe_overflow = v;
    else if (!strcmp(f, "--ctx")) parse_windows(o, f, v);
    else if (!strcmp(f, "--pos-offset")) o->pos_offset = (int)parse_long(f, v, 0, 1 << 30);
    else if (!strcmp(f, "--keep")) o->keep = (int)parse_long(f, v, 0, 1 << 22);
    else if (!strcmp(f, "--chunks")) o->chunks = (int)parse_long(f, v, 1, INT_MAX);
    else if (!strcmp(f, "--stride")) o->stride = (int)parse_long(f, v, 1, 1 << 22);
    else if (!strcmp(f, "--csv")) o->csv_path = v;
    else if (!strcmp(f, "--svg")) o->svg_path = v;
    else if (!strcmp(f, "--html")) o->html_path = v;
    else if (!strcmp(f, "--baseline")) o->baseline = v;
    else if (!strcmp(f, "--logits-out")) o->logits_out = v;
    else if (!strcmp(f, "--logits-top")) o->logits_top = (int)parse_long(f, v, 0, INT_MAX);
    else if (!strcmp(f, "--kv-type")) o->kv_type = v;
    else if (!strcmp(f, "--pp")) o->pp_list = v;
    else if (!strcmp(f, "--tg")) o->tg_list = v;
    else if (!strcmp(f, "--depth")) o->depth_list = v;
    else if (!strcmp(f, "-r")) o->reps = (int)parse_long(f, v, 1, 1000);
    else if (!strcmp(f, "--layer")) o->layer = (int)parse_long(f, v, 0, 1 << 20);
    else if (!strcmp(f, "--head")) o->head = (int)parse_long(f, v, 0, 1 << 20);
    else return 0;
    return 1;
}

/* Which modes use each flag: a flag given to a mode that does not use it is
 * an error, never silently ignored. */
enum { M_GENERATE = 1, M_PPL = 2, M_BENCH = 4, M_TOKENIZE = 8, M_INSPECT = 16, M_CHAT = 32,
       M_PE = 64, M_ATTENTION = 128 };
#define M_TEXT (M_GENERATE | M_CHAT)                  /* modes that sample text */
#define M_VIEWS (M_PE | M_ATTENTION)                  /* modes that show positions at work */
#define M_RUNS (M_GENERATE | M_PPL | M_BENCH | M_CHAT | M_ATTENTION) /* run the forward pass */
#define M_SCHEME (M_RUNS | M_INSPECT | M_PE) /* modes that build a positional scheme */
static const struct {
    const char *flag;
    int modes;
} flag_modes[] = {
    {"-m", ~0}, {"-z", M_TEXT | M_PPL | M_TOKENIZE | M_VIEWS},
    {"-i", M_TEXT | M_TOKENIZE | M_VIEWS}, {"-f", M_GENERATE | M_PPL | M_TOKENIZE | M_VIEWS}, {"-n", M_TEXT}, {"-t", M_TEXT},
    {"-p", M_TEXT}, {"-k", M_TEXT}, {"-s", M_TEXT}, {"--min-p", M_TEXT}, {"--repeat-penalty", M_TEXT},
    {"--repeat-last-n", M_TEXT}, {"--presence-penalty", M_TEXT}, {"--frequency-penalty", M_TEXT},
    {"-y", M_CHAT}, {"--chat-template", M_CHAT}, {"--stop", M_CHAT}, {"--threads", M_RUNS | M_INSPECT | M_PE},
    {"--kv-type", M_GENERATE | M_PPL | M_BENCH | M_CHAT | M_INSPECT}, {"--pe", M_SCHEME}, {"--rope-theta", M_SCHEME},
    {"--rope-scaling", M_SCHEME}, {"--rope-factor", M_SCHEME}, {"--rope-orig-ctx", M_SCHEME},
    {"--longrope-rule", M_SCHEME}, {"--pe-layers", M_SCHEME & ~M_BENCH},
    {"--window", M_SCHEME & ~M_BENCH}, {"--chunk", M_SCHEME & ~M_BENCH},
    {"--alibi-max-bias", M_SCHEME}, {"--pe-overflow", M_SCHEME}, {"--ctx", M_TEXT | M_PPL | M_INSPECT | M_PE},
    {"--pos-offset", M_GENERATE | M_PPL}, {"--keep", M_TEXT | M_PPL},
    {"--no-shift", M_TEXT | M_PPL}, {"--shift-no-rerotate", M_TEXT | M_PPL},
    {"--trace-positions", M_TEXT}, {"--dump-cache", M_TEXT}, {"--chunks", M_PPL}, {"--stride", M_PPL},
    {"--stream", M_PPL}, {"--bos", M_PPL}, {"--json", M_GENERATE | M_PPL | M_BENCH | M_INSPECT | M_VIEWS},
    {"--baseline", M_PPL},
    {"--logits-out", M_GENERATE | M_PPL}, {"--logits-top", M_GENERATE | M_PPL},
    {"--csv", M_PPL | M_ATTENTION}, {"--svg", M_PPL | M_VIEWS}, {"--html", M_PPL | M_VIEWS}, {"--layer", M_ATTENTION},
    {"--head", M_ATTENTION}, {"--pp", M_BENCH}, {"--tg", M_BENCH}, {"--depth", M_BENCH}, {"-r", M_BENCH},
    {"--pieces", M_TOKENIZE}, {"--special", M_GENERATE | M_PPL | M_TOKENIZE},
};
static const char *const mode_names[] = {"generate", "ppl", "bench", "tokenize", "inspect", "chat",
                                         "pe", "attention"};

static int mode_bit(const char *mode) {
    for (size_t m = 0; m < sizeof mode_names / sizeof *mode_names; m++)
        if (!strcmp(mode, mode_names[m])) return 1 << m;
    die("-m: unknown mode '%s' (generate|chat|ppl|bench|tokenize|inspect|pe|attention)", mode);
}

static int given(const Options *o, const char *flag) {
    for (int i = 0; i < o->n_given; i++)
        if (!strcmp(o->given[i], flag)) return 1;
    return 0;
}

static void check_flags_apply(const Options *o) {
    int mode = mode_bit(o->mode);
    for (int i = 0; i < o->n_given; i++) {
        size_t f = 0;
        while (strcmp(flag_modes[f].flag, o->given[i])) f++; /* every parsed flag is listed */
        if (!(flag_modes[f].modes & mode)) die("%s is not used by -m %s", o->given[i], o->mode);
    }
    if (mode == M_PPL) {
        const char *window_only[] = {"--chunks", "--stride"};
        const char *stream_only[] = {"--keep", "--no-shift", "--shift-no-rerotate"};
        for (int i = 0; i < 2; i++)
            if (o->stream && given(o, window_only[i]))
                die("%s is not used by -m ppl --stream (it scores the whole text through one "
                    "cache)", window_only[i]);
        for (int i = 0; i < 3; i++)
            if (!o->stream && given(o, stream_only[i]))
                die("%s applies to context shifts: use it with -m ppl --stream", stream_only[i]);
    }
    if (given(o, "-i") && given(o, "-f")) die("-i and -f both give the input text: use one");
}

static Options parse_args(int argc, char **argv) {
    Options o = {0};
    o.mode = "generate";
    o.temperature = 1.0f;
    o.topp = 0.9f;
    o.steps = 256;
    o.layer = o.head = -1;
    o.logits_top = -1;
    o.penalties = (SamplerPenalties){.repeat = 1.0f, .last_n = 64};
    int i = 1;
    for (; i < argc && argv[i][0] != '-'; i++) {
        if (o.n_models == MAX_MODELS) die("at most %d models", MAX_MODELS);
        for (int m = 0; m < o.n_models; m++)
            if (!strcmp(o.model_paths[m], argv[i])) die("the model '%s' is given twice", argv[i]);
        o.model_paths[o.n_models++] = argv[i];
    }
    o.model_path = o.model_paths[0];
    for (; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            exit(EXIT_SUCCESS);
        }
        if (f[0] != '-') die("unexpected argument '%s' (the model path goes first)", f);
        if (!strcmp(f, "--stop")) {   /* the one flag that repeats */
            if (i + 1 >= argc) die("flag --stop needs a value");
            if (o.n_stops == MAX_STOPS) die("--stop: at most %d stop strings", MAX_STOPS);
            if (!argv[i + 1][0]) die("--stop: an empty stop string would end every reply at once");
            o.stops[o.n_stops++] = argv[++i];
            if (!given(&o, f)) o.given[o.n_given++] = f;
            continue;
        }
        if (given(&o, f)) die("%s is given twice", f);
        if (o.n_given == (int)(sizeof o.given / sizeof *o.given)) die("too many flags");
        if (parse_switch(&o, f)) {
            o.given[o.n_given++] = f;
            continue;
        }
        if (i + 1 >= argc) {
            Options probe = o;
            if (parse_value(&probe, f, "0")) die("flag %s needs a value", f);
            die("unknown flag '%s' (see %s -h)", f, argv[0]);
        }
        if (!parse_value(&o, f, argv[i + 1])) die("unknown flag '%s' (see %s -h)", f, argv[0]);
        o.given[o.n_given++] = f;
        i++;
    }
    check_flags_apply(&o);
    if (o.n_models > 1 && strcmp(o.mode, "ppl") != 0)
        die("unexpected argument '%s' (one model: only -m ppl compares several models)",
            o.model_paths[1]);
    if (o.n_windows > 1 && strcmp(o.mode, "ppl") != 0)
        die("--ctx: a list of windows needs -m ppl");
    if ((o.n_models > 1 || o.n_windows > 1) && o.logits_out)
        die("--logits-out writes one run's tokens: give one model and one --ctx window");
    TensorType kv;
    if (o.kv_type && kv_cache_type_from_name(o.kv_type, &kv))
        die("--kv-type: unknown type '%s' (f32|f16)", o.kv_type);
    if (o.no_shift && o.shift_no_rerotate) die("--no-shift and --shift-no-rerotate exclude each other");
    if (o.logits_top >= 0 && !o.logits_out)
        die("--logits-top sets what --logits-out writes: give --logits-out FILE");
    return o;
}

/* Marks in sel[n_layers] the layers of LAYERS (spec[0, len)): "all",
 * "everyN" (the N-th, 2N-th, ...: layers N-1, 2N-1, ...), "I" or "I-J",
 * joined by '+' (or ','). */
static void select_layers(const char *flag, const char *spec, size_t len, int n_layers,
                          unsigned char *sel) {
    char buf[256];
    if (len == 0 || len >= sizeof buf) die("%s: empty or too long layer list in '%s'", flag, spec);
    memcpy(buf, spec, len);
    buf[len] = '\0';
    for (char *save = NULL, *t = strtok_r(buf, "+,", &save); t; t = strtok_r(NULL, "+,", &save)) {
        char *end;
        if (!strcmp(t, "all")) {
            memset(sel, 1, (size_t)n_layers);
        } else if (!strncmp(t, "every", 5)) {
            long step = strtol(t + 5, &end, 10);
            if (end == t + 5 || *end || step < 1 || step > n_layers)
                die("%s: '%s': everyN needs N in 1..%d (the model's layers)", flag, t, n_layers);
            for (long l = step - 1; l < n_layers; l += step) sel[l] = 1;
        } else {
            long a = strtol(t, &end, 10), b = a;
            if (end != t && *end == '-') b = strtol(end + 1, &end, 10);
            if (end == t || *end || a < 0 || b < a || b >= n_layers)
                die("%s: '%s' is not a layer or range of the model's layers 0..%d", flag, t,
                    n_layers - 1);
            for (long l = a; l <= b; l++) sel[l] = 1;
        }
    }
}

/* What a layer spec sets: a scheme, or a size (a bare number meaning every
 * layer) that is a window or a chunk. */
typedef enum { SPEC_SCHEME, SPEC_WINDOW, SPEC_CHUNK } LayerSpec;

/* Applies LAYERS=VALUE[/LAYERS=VALUE...] to `table` (the variant's,
 * model_layers_for); a size wider than n_ctx (when given) is refused. */
static void apply_layer_spec(const char *flag, const char *spec, const Model *m,
                             const PeParams *variant, LayerAttention *table, LayerSpec what,
                             int n_ctx) {
    int windows = what != SPEC_SCHEME;
    int n_layers = m->config.n_layers;
    unsigned char *sel = mallocCheck((size_t)n_layers, "the layer selection");
    char buf[512];
    if (strlen(spec) >= sizeof buf) die("%s: '%s' is too long", flag, spec);
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *a = strtok_r(buf, "/", &save); a; a = strtok_r(NULL, "/", &save)) {
        char *eq = strchr(a, '=');
        const char *value = eq ? eq + 1 : a;
        memset(sel, !eq, (size_t)n_layers);
        if (!eq && !windows) die("%s: '%s' needs the form LAYERS=SCHEME", flag, a);
        if (eq) select_layers(flag, a, (size_t)(eq - a), n_layers, sel);
        int scheme = -1, window = -1;
        if (windows) {
            window = (int)parse_long(flag, value, 0, INT_MAX);
            if (n_ctx && window > n_ctx)
                die("%s: a %s of %d is wider than the context of %d (--ctx)", flag,
                    what == SPEC_CHUNK ? "chunk" : "window", window, n_ctx);
        } else {
            PeKind k;
            if (pe_kind_from_name(value, &k))
                die("%s: unknown scheme '%s' (%s)", flag, value, scheme_names());
            scheme = (int)k;
        }
        for (int l = 0; l < n_layers; l++) {
            PosencError err;
            int failed = !sel[l] ? 0
                         : what == SPEC_CHUNK
                             ? model_layer_chunk(m, table, l, window, &err)
                             : model_layer_override(m, variant, table, l, scheme, window, &err);
            if (failed) die("%s: layer %d: %s", flag, l, err.msg);
        }
    }
    free(sel);
}

/* The variant's per-layer table with the overrides: --window, then
 * --pe-layers, then the variant's own @ part (`label` as the user spelled
 * it); malloc'd. */
static LayerAttention *variant_layers(const Options *o, const Model *m, const PeParams *p,
                                      const char *label, int n_ctx) {
    LayerAttention *table = model_layers_for(m, p);
    if (o->window) apply_layer_spec("--window", o->window, m, p, table, SPEC_WINDOW, n_ctx);
    if (o->chunk) apply_layer_spec("--chunk", o->chunk, m, p, table, SPEC_CHUNK, n_ctx);
    if (o->pe_layers) apply_layer_spec("--pe-layers", o->pe_layers, m, p, table, SPEC_SCHEME, n_ctx);
    const char *at = label ? strchr(label, '@') : NULL;
    if (at) apply_layer_spec("--pe", at + 1, m, p, table, SPEC_SCHEME, n_ctx);
    return table;
}

/* One variant "NAME[:SCALING[:FACTOR]][@LAYERS=SCHEME...]" on top of the
 * checkpoint's scheme and the global flags. */
static PeParams variant_params(const Model *m, const Options *o, const char *spec) {
    PeParams p = m->pe;
    if (o->rope_theta > 0.0f) p.rope_theta = o->rope_theta;
    if (o->alibi_max_bias > 0.0f) p.alibi_max_bias = o->alibi_max_bias;
    if (o->rope_factor > 0.0f) p.rope_factor = o->rope_factor;
    if (o->rope_orig_ctx > 0) p.rope_orig_ctx = o->rope_orig_ctx;
    if (o->rope_scaling && pe_rope_scaling_from_name(o->rope_scaling, &p.rope_scaling))
        die("--rope-scaling: unknown mode '%s' (%s)", o->rope_scaling, scaling_names());
    if (o->longrope_rule) {
        if (!strcmp(o->longrope_rule, "sequence")) p.longrope_rule = PE_LONGROPE_BY_SEQUENCE;
        else if (!strcmp(o->longrope_rule, "context")) p.longrope_rule = PE_LONGROPE_BY_CONTEXT;
        else die("--longrope-rule: unknown rule '%s' (sequence|context)", o->longrope_rule);
    }
    if (o->pe_overflow) {
        if (!strcmp(o->pe_overflow, "error")) p.learned_overflow = PE_OVERFLOW_ERROR;
        else if (!strcmp(o->pe_overflow, "clamp")) p.learned_overflow = PE_OVERFLOW_CLAMP;
        else die("--pe-overflow: unknown policy '%s' (error|clamp)", o->pe_overflow);
    }
    if (!spec) return p;
    char name[64], scaling[64] = "", head[128];
    float factor = 0.0f;
    const char *at = strchr(spec, '@');
    size_t head_len = at ? (size_t)(at - spec) : strlen(spec);
    if (head_len >= sizeof head) die("--pe: variant too long in '%s'", spec);
    memcpy(head, spec, head_len);
    head[head_len] = '\0';
    if (at) { /* its syntax and schemes, checked now */
        LayerAttention *table = model_layers_for(m, &p);
        apply_layer_spec("--pe", at + 1, m, &p, table, SPEC_SCHEME, 0);
        free(table);
    }
    spec = head;
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len >= sizeof name) die("--pe: scheme name too long in '%s'", spec);
    memcpy(name, spec, len);
    name[len] = '\0';
    if (pe_kind_from_name(name, &p.kind))
        die("--pe: unknown scheme '%s' (%s)", name, scheme_names());
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
            die("--pe: '%s': unknown scaling '%s' (%s)", spec, scaling, scaling_names());
        if (factor > 0.0f) p.rope_factor = factor;
    }
    return p;
}

/* A scheme the model cannot carry (e.g. `learned` without a position table)
 * is refused before any work. */
static void check_scheme(const Model *m, const PeParams *p, const char *label) {
    PosencError err;
    if (model_check_scheme(m, p, &err)) die("--pe %s: %s", label, err.msg);
}

/* The schemes a mode runs: --pe split into variants (a comma list only where
 * the mode compares), each on top of the checkpoint and the global flags,
 * labelled as the user spelled it (else the checkpoint's scheme name), and
 * each checked against the model.  A scheme parameter no variant uses is an
 * error, not silently ignored. */
typedef struct {
    int n;
    PeParams params[MAX_VARIANTS];
    const char *labels[MAX_VARIANTS]; /* point into buf or at static names */
    char buf[1024];
} Variants;

static void resolve_variants(const Options *o, const Model *m, Variants *v) {
    const char *specs[MAX_VARIANTS] = {NULL};
    v->n = 1;
    if (o->pe_list) {
        if (strlen(o->pe_list) >= sizeof v->buf) die("--pe: list too long");
        snprintf(v->buf, sizeof v->buf, "%s", o->pe_list);
        v->n = 0;
        for (char *save = NULL, *t = strtok_r(v->buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (v->n == MAX_VARIANTS) die("--pe: at most %d variants", MAX_VARIANTS);
            specs[v->n++] = t;
        }
        if (v->n == 0) die("--pe: empty list");
        if (v->n > 1 && !(mode_bit(o->mode) & (M_PPL | M_VIEWS)))
            die("--pe: a comma list compares variants and needs -m ppl, pe or attention");
    }
    unsigned kinds = 0;
    for (int i = 0; i < v->n; i++) {
        v->params[i] = variant_params(m, o, specs[i]);
        v->labels[i] = specs[i] ? specs[i] : pe_kind_name(v->params[i].kind);
        check_scheme(m, &v->params[i], v->labels[i]);
        /* the per-layer overrides too, before any work (a ppl list of windows
         * is checked against its first) */
        free(variant_layers(o, m, &v->params[i], v->labels[i], o->ctx ? o->ctx : m->config.seq_len));
        kinds |= 1u << v->params[i].kind;
    }
    const struct { const char *flag; PeKind kind; } scheme_flags[] = {
        {"--rope-theta", PE_ROPE}, {"--rope-scaling", PE_ROPE}, {"--rope-factor", PE_ROPE},
        {"--rope-orig-ctx", PE_ROPE}, {"--longrope-rule", PE_ROPE},
        {"--alibi-max-bias", PE_ALIBI}, {"--pe-overflow", PE_LEARNED},
    };
    for (size_t f = 0; f < sizeof scheme_flags / sizeof *scheme_flags; f++)
        if (given(o, scheme_flags[f].flag) && !(kinds & (1u << scheme_flags[f].kind)))
            die("%s applies to %s and no scheme that runs is %s (see --pe)", scheme_flags[f].flag,
                pe_kind_name(scheme_flags[f].kind), pe_kind_name(scheme_flags[f].kind));
}

/* Positions past what the variant covers: a warning where the scheme can
 * go on, an error where it cannot (positional/ decides and states the
 * fact; here the flags that change it are added). */
static void check_positions(const Model *m, const PeParams *p, const char *label, int last_pos) {
    PeRange r = pe_position_range(p, m->config.seq_len, m->weights.positional.n_positions, last_pos);
    switch (r.verdict) {
    case PE_RANGE_TRAINED: break;
    case PE_RANGE_EXTRAPOLATES: fprintf(stderr, "warning: %s: %s\n", label, r.fact); break;
    case PE_RANGE_CLAMPED:
        fprintf(stderr, "warning: %s: %s (--pe-overflow clamp)\n", label, r.fact);
        break;
    case PE_RANGE_REFUSED:
        die("--pe %s: %s (lower --ctx/--pos-offset, or --pe-overflow clamp)", label, r.fact);
    }
}

static TensorType kv_type(const Options *o) {
    TensorType t = TENSOR_F32;
    if (o->kv_type) kv_cache_type_from_name(o->kv_type, &t); /* a known name: parse_args checked */
    return t;
}

/* The variant's context, with its per-layer table (variant_layers). */
static void build_context(Context *ctx, const Options *o, const Model *m, const PeParams *p,
                          const char *label, ContextSize size) {
    PosencError err;
    if (context_build_sized(ctx, m, p, &size, &err)) die("%s", err.msg);
    LayerAttention *table = variant_layers(o, m, p, label, size.n_ctx);
    int rc = context_use_layers(ctx, table, &err);
    free(table);
    if (rc) die("%s%s: %s", label ? "--pe " : "", label ? label : "", err.msg);
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

/* --special needs a vocabulary whose control pieces can come from text. */
static void apply_special(const Options *o, Tokenizer *tok) {
    if (o->special && tokenizer_set_parse_special(tok, 1))
        die("--special: %s is not a byte-level BPE vocabulary; its control pieces never come "
            "from text", tok->source[0] ? tok->source : o->model_path);
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
    apply_special(o, tok);
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

/* The whole file, NUL-terminated (len excludes the NUL). */
static char *read_text_file(const char *path, size_t *len) {
    FILE *f = open_text_file(path);
    PosencError err;
    char *text = posenc_read_stream(f, len, path, &err);
    if (!text) die("-f: %s", err.msg);
    fclose(f);
    return text;
}

/* generate -f: the prompt is the file's text, as llama.cpp's -f; one
 * trailing newline (an editor's) is dropped. */
static char *read_prompt_file(const char *path) {
    size_t len;
    char *text = read_text_file(path, &len);
    if (len > 0 && text[len - 1] == '\n') len--;
    if (memchr(text, '\0', len)) die("-f: '%s' contains a NUL byte; a prompt is text", path);
    text[len] = '\0';
    return text;
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
        apply_special(o, &tok);
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
    BenchOptions b = bench_options_default(&model);
    Variants v;
    resolve_variants(o, &model, &v);
    b.pe = v.params[0];
    b.pe_label = v.labels[0];
    if (strchr(b.pe_label, '@'))
        die("--pe: bench runs the model's own per-layer table; '%s' is for generate, chat, ppl "
            "and the views", b.pe_label);
    PosencError err;
    if (o->pp_list && bench_parse_sizes(b.pp, &b.n_pp, o->pp_list, &err)) die("--pp: %s", err.msg);
    if (o->tg_list && bench_parse_sizes(b.tg, &b.n_tg, o->tg_list, &err)) die("--tg: %s", err.msg);
    if (o->depth_list && bench_parse_depths(b.depth, &b.n_depth, o->depth_list, &err))
        die("--depth: %s", err.msg);
    if (o->reps) b.reps = o->reps;
    b.kv_type = kv_type(o);
    b.json = o->json;
    if (bench_run(&model, &b, stdout, &err)) die("%s", err.msg);
    model_free(&model);
    return EXIT_SUCCESS;
}

/* What would run: the checkpoint after --pe and the positional flags; a
 * GGUF without tensors is shown as the vocabulary it is. */
static int run_inspect(const Options *o) {
    if (!o->model_path) die("no model given (usage: run MODEL -m inspect)");
    PosencError err;
    int is_gguf = gguf_file_has_magic(o->model_path, &err);
    if (is_gguf < 0) die("%s", err.msg);
    if (is_gguf) {
        GgufFile g;
        if (gguf_open(&g, o->model_path, &err)) die("%s", err.msg);
        int vocab_only = g.n_tensors == 0;
        if (vocab_only) {
            if (o->pe_list || o->n_given > 1 + o->json)
                die("%s holds no tensors (a vocabulary): only --json applies", o->model_path);
            gguf_inspect_vocab(&g, stdout, o->json);
        }
        gguf_close(&g);
        if (vocab_only) return EXIT_SUCCESS;
    }
    Model model;
    load_model(o, &model);
    Variants v;
    resolve_variants(o, &model, &v);
    int n_ctx = o->ctx ? o->ctx : model.config.seq_len;
    LayerAttention *layers = variant_layers(o, &model, &v.params[0], v.labels[0], n_ctx);
    model_inspect(&model, &v.params[0], layers, stdout, o->json, n_ctx, kv_type(o));
    free(layers);
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

/* Both streams reach the same file or terminal (e.g. `2>&1`, or a shell
 * on a tty). */
static int same_destination(FILE *a, FILE *b) {
    struct stat sa, sb;
    return fstat(fileno(a), &sa) == 0 && fstat(fileno(b), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Rates in tok/s beside the token counts they come from: a 5-token prompt's
 * rate is mostly fixed cost, and says so by its count. */
static void print_generate_summary(const GenerateStats *st, double load_s) {
    fprintf(stderr, "load %.0f ms; prompt %d tokens in %.1f ms (%.0f tok/s); first token after "
                    "%.1f ms; %d tokens generated in %.1f ms (%.1f tok/s)\n",
            1e3 * load_s, st->n_prompt, 1e3 * st->prefill_s, st->n_prompt / st->prefill_s,
            1e3 * st->first_token_s, st->n_generated, 1e3 * st->decode_s,
            st->n_generated / st->decode_s);
}

/* --logits-out: the file and its writer, or out == NULL when not asked for. */
static void open_logits_out(const Options *o, int vocab, LogprobWriter *w) {
    w->out = NULL;
    if (!o->logits_out) return;
    FILE *f = fopen(o->logits_out, "w");
    if (!f) die("--logits-out: cannot write '%s': %s", o->logits_out, strerror(errno));
    int top = o->logits_top < 0 ? 10 : o->logits_top < vocab ? o->logits_top : vocab;
    logprob_writer_init(w, f, vocab, top);
}

static void close_logits_out(const Options *o, LogprobWriter *w) {
    if (!w->out) return;
    int failed = ferror(w->out);
    if (fclose(w->out) != 0 || failed) die("--logits-out: error writing '%s'", o->logits_out);
    logprob_writer_free(w);
}

/* What generate reports per token besides the text: --json objects on
 * stdout and --logits-out lines. */
typedef struct {
    int json, vocab;
    LogprobWriter *logprobs;  /* out NULL: none */
    const char *label;        /* the positional scheme, as --logits-out names variants */
    int n_steps;
    double logprob_sum;
} StepReport;

static void report_generate_step(const GenerateStep *s, void *user) {
    StepReport *r = user;
    double logprob = -ppl_token_nll(s->logits, r->vocab, s->token);
    r->n_steps++;
    r->logprob_sum += logprob;
    if (r->json) {
        printf("{\"type\":\"token\",\"step\":%d,\"token\":%d,\"piece\":", s->step, s->token);
        json_write_string(stdout, s->piece, s->piece_len);
        printf(",\"pos\":%d,\"logprob\":%.9g}\n", s->pos, logprob);
        fflush(stdout);
    }
    if (r->logprobs->out)
        logprob_writer_row(r->logprobs, r->label, s->step, s->pos, s->logits, s->token);
}

/* --json's last object: the whole text (without the newline generate
 * ends it with) and the mean log-probability of the generated tokens. */
static void print_json_summary(const StepReport *r, const char *text, size_t len) {
    if (len > 0 && text[len - 1] == '\n') len--;
    printf("{\"type\":\"summary\",\"generated\":%d,\"mean_logprob\":", r->n_steps);
    if (r->n_steps) printf("%.9g", r->logprob_sum / r->n_steps);
    else fputs("null", stdout);
    fputs(",\"text\":", stdout);
    json_write_string(stdout, text, len);
    fputs("}\n", stdout);
}

/* The prompt's problems name its flag (-i or -f): generate_text would find
 * them too, but not which flag to change. */
static void check_prompt(const char *prompt, const char *flag, const Tokenizer *tok) {
    int *ids, n_ids;
    PosencError err;
    if (generate_encode_prompt(tok, prompt, &ids, &n_ids, &err)) die("%s: %s", flag, err.msg);
    free(ids);
}

static void build_sampler(const Options *o, int vocab, Sampler *s) {
    unsigned long long seed = o->seed ? o->seed : (unsigned long long)time(NULL);
    sampler_build(s, vocab, o->temperature, o->topp, o->topk, seed);
    sampler_set_min_p(s, o->min_p);
    sampler_set_penalties(s, o->penalties);
}

static int run_generate(const Options *o) {
    Model model;
    Tokenizer tok;
    double t_load = time_now_s();
    load_model_and_tokenizer(o, &model, &tok);
    double load_s = time_now_s() - t_load;
    Variants v;
    resolve_variants(o, &model, &v);
    const PeParams pe = v.params[0];
    const char *label = v.labels[0];
    int n_ctx = o->ctx ? o->ctx : model.config.seq_len;
    check_keep(o, n_ctx);
    ContextShiftMode shift = shift_mode(o);
    int span = o->steps > 0 && o->steps < n_ctx ? o->steps : n_ctx;
    check_positions(&model, &pe, label, o->pos_offset + span - 1);
    char *prompt_file = o->text_file ? read_prompt_file(o->text_file) : NULL;
    check_prompt(prompt_file ? prompt_file : o->prompt, prompt_file ? "-f" : "-i", &tok);
    Context ctx;
    build_context(&ctx, o, &model, &pe, label, context_size_generate(n_ctx, kv_type(o)));
    Sampler sampler;
    build_sampler(o, model.config.vocab_size, &sampler);

    LogprobWriter logprobs;
    open_logits_out(o, model.config.vocab_size, &logprobs);
    StepReport report = {o->json, model.config.vocab_size, &logprobs, label, 0, 0.0};
    /* With --json the text goes into the summary: stdout carries JSON only. */
    char *text = NULL;
    size_t text_len = 0;
    FILE *text_out = o->json ? open_memstream(&text, &text_len) : stdout;
    if (!text_out) posenc_out_of_memory(1, 1, "the generated text");

    GenerateOptions g = {.prompt = prompt_file ? prompt_file : o->prompt, .steps = o->steps,
                         .pos_offset = o->pos_offset, .keep = o->keep, .shift = shift,
                         .trace = o->trace ? stderr : NULL,
                         .trace_shares_out = !o->json && same_destination(stdout, stderr),
                         .on_step = o->json || logprobs.out ? report_generate_step : NULL,
                         .step_user = &report, .dump_cache = o->dump_cache ? stderr : NULL};
    PosencError err;
    GenerateStats st;
    int rc = generate_text(&ctx, &tok, &sampler, &g, text_out, &st, &err);
    if (rc) fprintf(stderr, "error: %s\n", err.msg);
    if (!rc && st.stopped_full)
        fprintf(stderr, "note: context full (%d tokens); stopping (--no-shift)\n", n_ctx);
    if (!rc && st.n_generated > 0) print_generate_summary(&st, load_s);
    if (o->json) {
        fclose(text_out);
        if (!rc) print_json_summary(&report, text, text_len);
        free(text);
    }
    close_logits_out(o, &logprobs);

    free(prompt_file);
    sampler_free(&sampler);
    context_free(&ctx);
    tokenizer_free(&tok);
    model_free(&model);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* What run_ppl's hooks need. */
typedef struct {
    const char *progress_label;
    const char *const *labels; /* per variant */
    LogprobWriter *logprobs;   /* out NULL: no --logits-out */
} PplReport;

static void progress_bar(double fraction, void *user) {
    const char *label = ((const PplReport *)user)->progress_label;
    int filled = (int)(fraction * 30);
    fprintf(stderr, "\r%-24.24s [%.*s%*s] %3d%%", label, filled, "==============================",
            30 - filled, "", (int)(fraction * 100));
    if (fraction >= 1.0) fputc('\n', stderr);
}

static void log_prediction(const PplPrediction *p, void *user) {
    const PplReport *r = user;
    logprob_writer_row(r->logprobs, r->labels[p->variant], p->index, p->pos, p->logits, p->target);
}

/* Mean NLL by position, smoothed by a centred moving average over
 * 2*half+1 positions (each position weighted by how often it was scored). */
static double *nll_curve(const PplResult *r, int half) {
    double *y = mallocCheck((size_t)r->n_pos * sizeof(double), "the NLL curve");
    for (int i = 0; i < r->n_pos; i++) {
        double sum = 0.0;
        long count = 0;
        for (int j = i - half; j <= i + half; j++)
            if (j >= 0 && j < r->n_pos) {
                sum += r->nll_by_pos[j];
                count += r->count_by_pos[j];
            }
        y[i] = count ? sum / count : NAN;
    }
    return y;
}

/* se: the standard error of the position's mean, empty below 2 tokens. */
static void write_csv(const char *path, const char **labels, const PplResult *res, int n) {
    FILE *f = fopen(path, "w");
    if (!f) die("--csv: cannot write '%s': %s", path, strerror(errno));
    fprintf(f, "variant,position,mean_nll,count,se\n");
    for (int v = 0; v < n; v++)
        for (int i = 0; i < res[v].n_pos; i++) {
            long count = res[v].count_by_pos[i];
            if (!count) continue;
            double mean, se;
            ppl_mean_se(res[v].nll_by_pos[i], res[v].nll_sq_by_pos[i], count, &mean, &se);
            fprintf(f, "%s,%d,%.6f,%ld,", labels[v], i, mean, count);
            if (count > 1) fprintf(f, "%.6f", se);
            fputc('\n', f);
        }
    if (fclose(f) != 0) die("--csv: error writing '%s'", path);
}

/* A position scored fewer times than this share of the most-scored one
 * (the early positions of a --stride run, the positions a --stream only
 * passes once) is drawn faint: its mean rests on few tokens. */
#define FAINT_BELOW_PERCENT 10

static void write_svg(const Options *o, const Model *m, const char **labels, const PplResult *res,
                      int n) {
    /* Every variant scores the same predictions: the counts are common. */
    int n_pos = res[0].n_pos, half = n_pos > 256 ? n_pos / 256 : 0;
    long most = 0;
    for (int i = 0; i < n_pos; i++)
        if (res[0].count_by_pos[i] > most) most = res[0].count_by_pos[i];
    long too_few = (most * FAINT_BELOW_PERCENT + 99) / 100;
    unsigned char *faint = mallocCheck((size_t)n_pos, "the sparse-position marks");
    int n_faint = 0;
    for (int i = 0; i < n_pos; i++) n_faint += faint[i] = res[0].count_by_pos[i] < too_few;

    SvgSeries series[MAX_VARIANTS + 1];
    char notes[MAX_VARIANTS + 1][128];
    for (int v = 0; v < n; v++) {
        double nll, se;
        ppl_mean_se(res[v].nll_sum, res[v].nll_sq_sum, res[v].n_scored, &nll, &se);
        snprintf(notes[v], sizeof notes[v], "mean NLL %.4f \u00b1 %.4f, ctx %d, %ld %s", nll, se,
                 n_pos, res[v].n_chunks, o->stream ? "chunks" : "windows");
        series[v] = (SvgSeries){.label = labels[v], .note = notes[v],
                                .y = nll_curve(&res[v], half), .faint = faint, .n = n_pos};
    }
    char title[512], subtitle[128], footnote[160], marker[64];
    snprintf(title, sizeof title, "NLL by position: %s, %s", o->model_path, o->text_file);
    if (half)
        snprintf(subtitle, sizeof subtitle, "each curve: centred moving average over %d positions",
                 2 * half + 1);
    else
        snprintf(subtitle, sizeof subtitle, "each curve: mean NLL at every position (no "
                 "smoothing)");
    snprintf(footnote, sizeof footnote, "faint, dashed, cut at the frame: positions scored fewer "
             "than %ld times (%d%% of the most-scored position's %ld)", too_few,
             FAINT_BELOW_PERCENT, most);
    snprintf(marker, sizeof marker, "trained context %d", m->config.seq_len);
    SvgChart chart = {.title = title, .subtitle = subtitle,
                      .x_label = "position within the window", .y_label = "mean NLL (nats/token)",
                      .footnote = n_faint ? footnote : NULL, .marker_x = m->config.seq_len,
                      .marker_label = marker};
    PosencError err;
    int rc = svg_write_curves(o->svg_path, &chart, series, n, &err);
    for (int v = 0; v < n; v++) free((void *)series[v].y);
    free(faint);
    if (rc) die("--svg: %s", err.msg);
}

/* One line of the ppl table (or one JSON object); `model` is the study's
 * model column (`model_width` wide), NULL in a run of one model and one window. */
static void print_ppl_row(const Options *o, const char *model, int model_width, const char *label,
                          int C,
                          const PplResult *r, const char *baseline, int is_baseline,
                          int baseline_added) {
    double nll, se, diff, diff_se, n = (double)r->n_scored;
    ppl_mean_se(r->nll_sum, r->nll_sq_sum, r->n_scored, &nll, &se);
    ppl_mean_se(r->diff_sum, r->diff_sq_sum, r->n_scored, &diff, &diff_se);
    double kl = n > 0 ? r->kl_sum / n : 0.0, top1 = n > 0 ? r->top1_agree / n : 0.0;
    double tok_s = n / r->seconds;
    if (o->json) {
        fputs("{", stdout);
        if (model) {
            fputs("\"model\":", stdout);
            json_write_string(stdout, model, strlen(model));
            fputs(",", stdout);
        }
        fputs("\"pe\":", stdout);
        json_write_string(stdout, label, strlen(label));
        printf(",\"ctx\":%d,\"tokens\":%ld,\"chunks\":%ld,\"nll\":%.9g,\"nll_se\":%.9g,"
               "\"ppl\":%.9g,\"baseline\":", C, r->n_scored, r->n_chunks, nll, se, exp(nll));
        json_write_string(stdout, baseline, strlen(baseline));
        printf(",\"baseline_added\":%s,\"nll_diff\":%.9g,\"nll_diff_se\":%.9g,\"kl\":%.9g,"
               "\"top1_agree\":%.9g,\"seconds\":%.3f,\"tok_s\":%.1f,\"stream\":%s}\n",
               baseline_added ? "true" : "false", diff, diff_se, kl, top1, r->seconds, tok_s,
               o->stream ? "true" : "false");
        return;
    }
    if (model) printf("%-*s ", model_width, model);
    if (is_baseline)
        printf("%-22s %6d %9ld %9.4f %8.4f %10.3f %9s %8s %9s %7s %8.2f %9.0f\n", label, C,
               r->n_scored, nll, se, exp(nll), "baseline", "", "", "", r->seconds, tok_s);
    else
        printf("%-22s %6d %9ld %9.4f %8.4f %10.3f %+9.4f %8.4f %9.4f %7.4f %8.2f %9.0f\n", label,
               C, r->n_scored, nll, se, exp(nll), diff, diff_se, kl, top1, r->seconds, tok_s);
}

static void print_ppl_columns(int model_width) {
    if (model_width) printf("%-*s ", model_width, "model");
    printf("%-22s %6s %9s %9s %8s %10s %9s %8s %9s %7s %8s %9s\n", "variant", "ctx", "tokens",
           "nll", "se", "ppl", "dnll", "se", "kl", "top1", "seconds", "tok/s");
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

/* The variants -m ppl runs on one model and the baseline among them. */
typedef struct {
    Variants listed;
    /* Slot 0 is the checkpoint's own scheme, used only when it is the
     * default baseline and --pe does not list it; the listed variants follow. */
    const char *all_labels[MAX_VARIANTS + 1];
    PeParams all_params[MAX_VARIANTS + 1];
    const char **labels;  /* (n) into all_labels */
    PeParams *params;     /* (n) into all_params */
    int n, baseline, added;
} PplVariants;

static void resolve_ppl_variants(const Options *o, const Model *model, PplVariants *pv) {
    resolve_variants(o, model, &pv->listed); /* every variant is checked before any work */
    pv->all_params[0] = variant_params(model, o, NULL);
    pv->all_labels[0] = o->baseline ? o->baseline : pe_kind_name(pv->all_params[0].kind);
    int baseline = -1;
    for (int v = 1; v <= pv->listed.n; v++) {
        pv->all_params[v] = pv->listed.params[v - 1];
        pv->all_labels[v] = pv->listed.labels[v - 1];
        for (int u = 1; u < v; u++)
            if (!strcmp(pv->all_labels[u], pv->all_labels[v]))
                die("--pe: '%s' is listed twice", pv->all_labels[v]);
        if (baseline < 0 && !strcmp(pv->all_labels[v], pv->all_labels[0])) baseline = v;
    }
    if (baseline < 0 && o->baseline)
        die("--baseline: '%s' is not one of the --pe variants (%s)", o->baseline,
            o->pe_list ? o->pe_list : pv->all_labels[1]);
    pv->added = baseline < 0;
    pv->n = pv->listed.n + pv->added;
    pv->labels = pv->all_labels + !pv->added;
    pv->params = pv->all_params + !pv->added;
    pv->baseline = pv->added ? 0 : baseline - 1;
}

/* -f's text as the model's tokens. */
static int *encode_ppl_text(const Options *o, const Tokenizer *tok, int *n_ids) {
    size_t len;
    char *text = read_text_file(o->text_file, &len);
    int *ids = NULL;
    PosencError err;
    int failed = tokenizer_encode_alloc(tok, text, len, o->bos, 0, &ids, n_ids, &err);
    free(text); /* before a die: LeakSanitizer sees no pointer to it left */
    if (failed) die("-f %s: %s", o->text_file, err.msg);
    return ids;
}

/* Scores ids under n variants in windows (or a stream) of C: one context
 * per variant, built, run in lockstep and freed here. */
static void score_variants(const Options *o, const Model *model, const char *const *labels,
                           const PeParams *params, int n, int baseline, const int *ids,
                           int n_ids, int C, const char *progress_label, LogprobWriter *logprobs,
                           PplResult *res) {
    PplOptions popt = {.window = C, .stride = o->stride, .max_chunks = o->chunks,
                       .stream = o->stream, .keep = o->keep, .shift = shift_mode(o),
                       .pos_offset = o->pos_offset};
    Context ctxs[MAX_VARIANTS + 1];
    for (int v = 0; v < n; v++)
        build_context(&ctxs[v], o, model, &params[v], labels[v], context_size_ppl(C, kv_type(o)));
    PplReport report = {progress_label, labels, logprobs};
    PplHooks hooks = {isatty(STDERR_FILENO) ? progress_bar : NULL,
                      logprobs && logprobs->out ? log_prediction : NULL, &report};
    PosencError err;
    if (ppl_evaluate_variants(ctxs, n, baseline, ids, n_ids, &popt, res, &hooks, &err))
        die("%s", err.msg);
    for (int v = 0; v < n; v++) context_free(&ctxs[v]);
}

/* A view's (or the study's) --html page: its charts inline and its --json data. */
typedef struct {
    void (*json)(FILE *out, const void *arg);
    int (*charts)(const SvgSink *sink, const void *arg, PosencError *err);
    const void *arg;
} ViewReport;

static void write_html(const Options *o, const char *title, const ViewReport *r) {
    PosencError err;
    FILE *f = html_report_open(o->html_path, title, &err);
    if (!f) die("--html: %s", err.msg);
    SvgSink sink = {.html = f};
    if (r->charts(&sink, r->arg, &err)) {
        fclose(f);
        remove(o->html_path);
        die("--html: %s", err.msg);
    }
    html_report_data(f, r->json, r->arg);
    if (html_report_close(f, o->html_path, &err)) die("--html: %s", err.msg);
    fprintf(stderr, "wrote %s\n", o->html_path);
}

static int run_ppl_study(const Options *o);

static int run_ppl(const Options *o) {
    if (!o->text_file) die("-m ppl needs -f FILE");
    if (o->n_models > 1 || o->n_windows > 1) return run_ppl_study(o);
    if (o->html_path) die("--html: -m ppl writes a page for the extrapolation study: give --ctx a list of windows or several models");
    Model model;
    Tokenizer tok;
    load_model_and_tokenizer(o, &model, &tok);
    PplVariants pv;
    resolve_ppl_variants(o, &model, &pv);
    int C = o->ctx ? o->ctx : model.config.seq_len;
    if (o->stride > C) die("--stride %d must be in 1..%d (the window, --ctx)", o->stride, C);
    if (o->stream) check_keep(o, C);
    for (int v = 0; v < pv.n; v++)
        check_positions(&model, &pv.params[v], pv.labels[v], o->pos_offset + C - 1);
    int n_ids;
    int *ids = encode_ppl_text(o, &tok, &n_ids);
    check_text_length(o, n_ids, C);
    LogprobWriter logprobs;
    open_logits_out(o, model.config.vocab_size, &logprobs);

    if (!o->json) {
        printf("# %s on %s: %d tokens, %s of %d%s; baseline %s (%s)\n"
               "# se: standard error over the scored tokens; vs the baseline on the same tokens: "
               "dnll = NLL(variant) - NLL(baseline), kl = KL(baseline || variant) in nats, "
               "top1 = argmax agreement\n",
               o->model_path, o->text_file, n_ids, o->stream ? "stream through a cache" : "windows",
               C, o->stride ? " (sliding)" : "", pv.labels[pv.baseline],
               pv.added ? "the checkpoint's scheme, not in --pe, so run too"
               : o->baseline ? "--baseline" : "the checkpoint's scheme");
        print_ppl_columns(0);
    }
    fflush(stdout);
    char progress_label[32];
    if (pv.n == 1) snprintf(progress_label, sizeof progress_label, "%s", pv.labels[0]);
    else snprintf(progress_label, sizeof progress_label, "%d variants", pv.n);
    PplResult res[MAX_VARIANTS + 1];
    score_variants(o, &model, pv.labels, pv.params, pv.n, pv.baseline, ids, n_ids, C,
                   progress_label, &logprobs, res);
    close_logits_out(o, &logprobs);
    for (int v = 0; v < pv.n; v++)
        print_ppl_row(o, NULL, 0, pv.labels[v], C, &res[v], pv.labels[pv.baseline],
                      v == pv.baseline, pv.added);
    if (o->csv_path) write_csv(o->csv_path, pv.labels, res, pv.n);
    if (o->svg_path) write_svg(o, &model, pv.labels, res, pv.n);
    for (int v = 0; v < pv.n; v++) ppl_result_free(&res[v]);
    free(ids);
    tokenizer_free(&tok);
    model_free(&model);
    return EXIT_SUCCESS;
}

/* One model of the extrapolation study, loaded and checked before any work. */
typedef struct {
    Options o;               /* the command line with this model's path */
    Model model;
    PplVariants pv;
    int *ids, n_ids;
    int first_series;        /* its variants' series in the study */
} StudyModel;

/* Whether variant v can run at window C; a refusal is noted, not an error:
 * the study shows the scheme's curve where it exists (learned positions end
 * at their table). */
static int study_variant_runs(const StudyModel *sm, int v, int C, int note) {
    const Model *m = &sm->model;
    PeRange r = pe_position_range(&sm->pv.params[v], m->config.seq_len,
                                  m->weights.positional.n_positions, sm->o.pos_offset + C - 1);
    if (r.verdict != PE_RANGE_REFUSED) return 1;
    if (note)
        fprintf(stderr, "note: %s: %s at --ctx %d: %s; not scored (--pe-overflow clamp "
                "would reuse the last position)\n", sm->o.model_path, sm->pv.labels[v], C, r.fact);
    return 0;
}

/* Loads every model, resolves its variants and tokens, and checks every
 * window against the text, the positions and --stride/--keep. */
static StudyModel *load_study(const Options *o, const int *windows, int n_windows) {
    StudyModel *sm = callocCheck((size_t)o->n_models, sizeof *sm, "the study's models");
    for (int m = 0; m < o->n_models; m++) {
        StudyModel *s = &sm[m];
        s->o = *o;
        s->o.model_path = o->model_paths[m];
        Tokenizer tok;
        load_model_and_tokenizer(&s->o, &s->model, &tok);
        resolve_ppl_variants(&s->o, &s->model, &s->pv);
        s->ids = encode_ppl_text(&s->o, &tok, &s->n_ids);
        tokenizer_free(&tok);
        for (int w = 0; w < n_windows; w++) {
            int C = windows[w];
            check_text_length(&s->o, s->n_ids, C);
            if (o->stride > C)
                die("--stride %d must be in 1..%d (the smallest --ctx)", o->stride, C);
            if (o->stream) check_keep(o, C);
            for (int v = 0; v < s->pv.n; v++)
                study_variant_runs(s, v, C, 1);
        }
        /* Extrapolation warnings once per variant, at the largest window it runs. */
        for (int v = 0; v < s->pv.n; v++)
            for (int w = n_windows - 1; w >= 0; w--)
                if (study_variant_runs(s, v, windows[w], 0)) {
                    char label[256];
                    snprintf(label, sizeof label, "%s: %s", s->o.model_path, s->pv.labels[v]);
                    check_positions(&s->model, &s->pv.params[v], label,
                                    o->pos_offset + windows[w] - 1);
                    break;
                }
    }
    return sm;
}

/* One window of one model: the variants that can run there, compared with
 * the baseline (none run when the baseline cannot). */
static void study_window(const Options *o, StudyModel *s, int w, int model_width,
                         PplStudy *study) {
    int C = study->windows[w], n = 0, baseline = -1;
    const char *labels[MAX_VARIANTS + 1];
    PeParams params[MAX_VARIANTS + 1];
    int series[MAX_VARIANTS + 1];
    if (!study_variant_runs(s, s->pv.baseline, C, 0)) return;
    for (int v = 0; v < s->pv.n; v++) {
        if (!study_variant_runs(s, v, C, 0)) continue;
        if (v == s->pv.baseline) baseline = n;
        labels[n] = s->pv.labels[v];
        params[n] = s->pv.params[v];
        series[n++] = s->first_series + v;
    }
    char progress_label[64];
    snprintf(progress_label, sizeof progress_label, "%s ctx %d", s->o.model_path, C);
    PplResult res[MAX_VARIANTS + 1];
    score_variants(&s->o, &s->model, labels, params, n, baseline, s->ids, s->n_ids, C,
                   progress_label, NULL, res);
    for (int v = 0; v < n; v++) {
        print_ppl_row(o, s->o.model_path, model_width, labels[v], C, &res[v], labels[baseline],
                      v == baseline, s->pv.added);
        PplStudySeries *r = &study->series[series[v]];
        ppl_mean_se(res[v].nll_sum, res[v].nll_sq_sum, res[v].n_scored, &r->nll[w], &r->se[w]);
        r->tokens[w] = res[v].n_scored;
        ppl_result_free(&res[v]);
    }
    fflush(stdout);
}

/* The extrapolation study: every model (each with its --pe variants) at
 * every window of --ctx; the usual rows with a model column, then the
 * table of mean NLL by window, and --svg/--csv of that table. */
/* The study's page: its chart and its data. */
typedef struct {
    const PplStudy *study;
    char title[512], subtitle[128];
} StudyReport;

static void study_report_json(FILE *out, const void *arg) {
    ppl_study_write_json(out, ((const StudyReport *)arg)->study);
}

static int study_report_charts(const SvgSink *sink, const void *arg, PosencError *err) {
    const StudyReport *r = arg;
    return ppl_study_sink_svg(sink, r->title, r->subtitle, r->study, err);
}

static int run_ppl_study(const Options *o) {
    if (o->n_windows == 0) die("several models need --ctx: one window or a list of them");
    const int *windows = o->windows;
    int n_windows = o->n_windows;
    StudyModel *sm = load_study(o, windows, n_windows);
    int n_series = 0, trained = sm[0].model.config.seq_len, model_width = 5;
    for (int m = 0; m < o->n_models; m++) {
        int len = (int)strlen(o->model_paths[m]);
        if (len > model_width) model_width = len;
        sm[m].first_series = n_series;
        n_series += sm[m].pv.n;
        if (sm[m].model.config.seq_len != trained) trained = 0;
    }
    PplStudy study;
    ppl_study_build(&study, windows, n_windows, n_series);
    study.trained_ctx = trained;
    for (int m = 0; m < o->n_models; m++)
        for (int v = 0; v < sm[m].pv.n; v++) {
            PplStudySeries *r = &study.series[sm[m].first_series + v];
            if (o->n_models == 1) snprintf(r->label, sizeof r->label, "%s", sm[m].pv.labels[v]);
            else if (sm[m].pv.n == 1) snprintf(r->label, sizeof r->label, "%s", o->model_paths[m]);
            else
                snprintf(r->label, sizeof r->label, "%s %s", o->model_paths[m], sm[m].pv.labels[v]);
            snprintf(r->note, sizeof r->note, "%s, trained context %d",
                     pe_kind_name(sm[m].pv.params[v].kind), sm[m].model.config.seq_len);
        }
    if (!o->json) {
        printf("# study on %s: %d model%s, %s of", o->text_file, o->n_models,
               o->n_models > 1 ? "s" : "", o->stream ? "streams through a cache" : "windows");
        for (int w = 0; w < n_windows; w++) printf("%s%d", w ? "," : " ", windows[w]);
        printf("%s; each model's variants against its baseline (dnll, kl, top1 as in one run)\n",
               o->stride ? " (sliding)" : "");
        print_ppl_columns(model_width);
    }
    for (int m = 0; m < o->n_models; m++)
        for (int w = 0; w < n_windows; w++) study_window(o, &sm[m], w, model_width, &study);
    if (!o->json) ppl_study_print_table(stdout, &study);
    PosencError err;
    if (o->csv_path && ppl_study_write_csv(o->csv_path, &study, &err)) die("--csv: %s", err.msg);
    StudyReport report = {.study = &study};
    snprintf(report.title, sizeof report.title, "Mean NLL by window: %s", o->text_file);
    if (o->chunks)
        snprintf(report.subtitle, sizeof report.subtitle, "each point: the first %d windows of that "
                 "size (fewer where the text ends)", o->chunks);
    else
        snprintf(report.subtitle, sizeof report.subtitle, "each point: every window of that size in "
                 "the text");
    if (o->stream)
        snprintf(report.subtitle, sizeof report.subtitle, "each point: the whole text streamed "
                 "through a cache of that size");
    if (o->svg_path && ppl_study_write_svg(o->svg_path, report.title, report.subtitle, &study, &err))
        die("--svg: %s", err.msg);
    if (o->html_path)
        write_html(o, report.title, &(ViewReport){study_report_json, study_report_charts, &report});
    ppl_study_free(&study);
    for (int m = 0; m < o->n_models; m++) {
        free(sm[m].ids);
        model_free(&sm[m].model);
    }
    free(sm);
    return EXIT_SUCCESS;
}

/* --chat-template NAME|FILE, else the GGUF's tokenizer.chat_template:
 * parsed, or one line naming where the template came from. */
static JinjaTemplate *load_chat_template(const Options *o, const Model *model) {
    PosencError err;
    const char *text = NULL, *source = NULL;
    char *file_text = NULL;
    size_t len = 0;
    if (o->chat_template) {
        text = chat_template_builtin(o->chat_template);
        source = "--chat-template";
        if (!text) {
            if (access(o->chat_template, R_OK) != 0)
                die("--chat-template: '%s' is neither a built-in format (%s) nor a readable file",
                    o->chat_template, template_names());
            FILE *f = open_text_file(o->chat_template);
            file_text = posenc_read_stream(f, &len, o->chat_template, &err);
            fclose(f);
            if (!file_text) die("--chat-template: %s", err.msg);
            text = file_text;
        } else {
            len = strlen(text);
        }
    } else if (model->gguf && gguf_find_kv(model->gguf, "tokenizer.chat_template")) {
        if (gguf_get_str(model->gguf, "tokenizer.chat_template", &text, &err)) die("%s: %s", o->model_path, err.msg);
        len = strlen(text);
        source = "tokenizer.chat_template";
    } else {
        die("%s has no chat template: name one with --chat-template (%s, or a Jinja file)", o->model_path,
            template_names());
    }
    JinjaTemplate *t = jinja_parse(text, len, &err);
    free(file_text);
    if (!t) {
        if (o->chat_template) die("--chat-template %s: %s", o->chat_template, err.msg);
        die("%s: %s: %s (override it with --chat-template)", o->model_path, source, err.msg);
    }
    return t;
}

static volatile sig_atomic_t chat_interrupted;
static void on_sigint(int sig) {
    (void)sig;
    chat_interrupted = 1;
}

/* Ctrl-C ends the reply; at the prompt it ends the chat (getline sees
 * EINTR: the handler is installed without SA_RESTART). */
static void catch_interrupts(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

static int run_chat(const Options *o) {
    Model model;
    Tokenizer tok;
    load_model_and_tokenizer(o, &model, &tok);
    Variants v;
    resolve_variants(o, &model, &v);
    int n_ctx = o->ctx ? o->ctx : model.config.seq_len;
    if (given(o, "--keep")) check_keep(o, n_ctx);
    check_positions(&model, &v.params[0], v.labels[0], n_ctx - 1);
    JinjaTemplate *template = load_chat_template(o, &model);
    Context ctx;
    build_context(&ctx, o, &model, &v.params[0], v.labels[0],
                  context_size_generate(n_ctx, kv_type(o)));
    Sampler sampler;
    build_sampler(o, model.config.vocab_size, &sampler);
    ChatOptions copt = {.template = template, .system_prompt = o->system_prompt, .stops = o->stops,
                        .n_stops = o->n_stops, .max_reply = o->steps,
                        .keep = given(o, "--keep") ? o->keep : -1, .shift = shift_mode(o),
                        .trace = o->trace ? stderr : NULL, .dump_cache = o->dump_cache ? stderr : NULL,
                        .interrupted = &chat_interrupted};
    ChatSession session;
    PosencError err;
    if (chat_session_init(&session, &ctx, &tok, &sampler, &copt, &err)) die("%s", err.msg);
    catch_interrupts();
    int rc = o->prompt ? chat_turn(&session, o->prompt, stdout, &err) : 0;
    if (!rc) rc = chat_loop(&session, stdin, stdout, isatty(STDIN_FILENO), &err);
    if (rc) fprintf(stderr, "error: %s\n", err.msg);
    if (!rc && o->dump_cache) cache_dump(stderr, &ctx, &tok, "at the end");
    chat_session_free(&session);
    sampler_free(&sampler);
    context_free(&ctx);
    jinja_free(template);
    tokenizer_free(&tok);
    model_free(&model);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* -i TEXT or -f FILE as the model's tokens, BOS first as generate encodes
 * a prompt; the tokenizer is freed. */
static int *encode_view_text(const Options *o, Tokenizer *tok, int *n_ids) {
    char *prompt_file = o->text_file ? read_prompt_file(o->text_file) : NULL;
    int *ids;
    PosencError err;
    if (generate_encode_prompt(tok, prompt_file ? prompt_file : o->prompt, &ids, n_ids, &err))
        die("%s: %s", prompt_file ? "-f" : "-i", err.msg);
    free(prompt_file);
    tokenizer_free(tok);
    return ids;
}

typedef struct {
    const char *model;
    const PeView *views;
    int n;
} PeReport;

static void pe_report_json(FILE *out, const void *arg) {
    const PeReport *r = arg;
    pe_view_write_json(out, r->model, r->views, r->n);
}

static int pe_report_charts(const SvgSink *sink, const void *arg, PosencError *err) {
    const PeReport *r = arg;
    return pe_view_write_charts(sink, r->views, r->n, err);
}

typedef struct {
    const char *model;
    const int *ids;
    const AttentionView *views;
    int n;
    AttentionSelection sel;
} AttentionReport;

static void attention_report_json(FILE *out, const void *arg) {
    const AttentionReport *r = arg;
    attention_view_write_json(out, r->model, r->ids, r->views, r->n, r->sel);
}

static int attention_report_charts(const SvgSink *sink, const void *arg, PosencError *err) {
    const AttentionReport *r = arg;
    return attention_view_write_charts(sink, r->views, r->n, r->sel, err);
}

/* -m pe with -i/-f: the text run through a context of the variant, whose
 * cached keys the RoPE view reads; NULL for a scheme without rotation. */
static Context *pe_keys_context(const Options *o, const Model *m, const PeParams *p,
                                const char *label, const int *ids, int n_ids) {
    if (!ids || !pe_kind_ops(p->kind)->rotate) return NULL;
    check_positions(m, p, label, n_ids - 1);
    Context *ctx = mallocCheck(sizeof *ctx, "a context");
    build_context(ctx, o, m, p, label, context_size_generate(n_ids, TENSOR_F32));
    PosencError err;
    if (context_check_tokens(ctx, ids, n_ids, 0, &err))
        die("%s: %s", o->text_file ? "-f" : "-i", err.msg);
    context_prefill(ctx, ids, n_ids, 0);
    return ctx;
}

/* The positional scheme of each --pe variant as data: --json, a summary,
 * --svg PREFIX charts. */
static int run_pe(const Options *o) {
    Model model;
    Tokenizer tok;
    int have_text = o->prompt || o->text_file;
    if (o->tokenizer_path && !have_text)
        die("-z encodes the text of -i or -f, which -m pe reads only for the RoPE view's keys");
    if (have_text) load_model_and_tokenizer(o, &model, &tok);
    else load_model(o, &model);
    Variants v;
    resolve_variants(o, &model, &v);
    int rotates = 0;
    for (int i = 0; i < v.n; i++) rotates |= pe_kind_ops(v.params[i].kind)->rotate != NULL;
    if (have_text && !rotates)
        die("%s: the text gives the RoPE view its keys, and no --pe variant rotates (%s)",
            o->text_file ? "-f" : "-i", o->pe_list ? o->pe_list : v.labels[0]);
    int n_pos = o->ctx ? o->ctx : model.config.seq_len < 64 ? model.config.seq_len : 64;
    if (n_pos > 4096) die("--ctx %d: -m pe shows at most 4096 positions", n_pos);
    for (int i = 0; i < v.n; i++) check_positions(&model, &v.params[i], v.labels[i], n_pos - 1);
    int n_ids = 0;
    int *ids = have_text ? encode_view_text(o, &tok, &n_ids) : NULL;
    PeView views[MAX_VARIANTS];
    for (int i = 0; i < v.n; i++) {
        Context *keys = pe_keys_context(o, &model, &v.params[i], v.labels[i], ids, n_ids);
        PosencError err;
        LayerAttention *layers = variant_layers(o, &model, &v.params[i], v.labels[i], n_pos);
        int failed = pe_view_build(&views[i], &model, &v.params[i], layers, v.labels[i], n_pos,
                                   keys, &err);
        free(layers);
        if (failed)
            die("--pe %s: %s", v.labels[i], err.msg);
        if (keys) context_free(keys);
        free(keys);
    }
    if (o->json) pe_view_write_json(stdout, o->model_path, views, v.n);
    else pe_view_print(stdout, o->model_path, views, v.n);
    PosencError err;
    SvgSink charts = {.prefix = o->svg_path, .written = stderr};
    if (o->svg_path && pe_view_write_charts(&charts, views, v.n, &err)) die("--svg: %s", err.msg);
    if (o->html_path) {
        char title[1100];
        snprintf(title, sizeof title, "posenc -m pe: %s", o->model_path);
        PeReport pr = {o->model_path, views, v.n};
        write_html(o, title, &(ViewReport){pe_report_json, pe_report_charts, &pr});
    }
    for (int i = 0; i < v.n; i++) pe_view_free(&views[i]);
    free(ids);
    model_free(&model);
    return EXIT_SUCCESS;
}

/* Where each head attends for the text, under each --pe variant. */
#define ATTENTION_MAX_TOKENS 1024
static int run_attention(const Options *o) {
    if (!o->prompt && !o->text_file) die("-m attention needs a text: -i TEXT or -f FILE");
    Model model;
    Tokenizer tok;
    load_model_and_tokenizer(o, &model, &tok);
    Variants v;
    resolve_variants(o, &model, &v);
    const ModelConfig *c = &model.config;
    if (o->layer >= c->n_layers)
        die("--layer %d: the model has %d layers (0..%d)", o->layer, c->n_layers, c->n_layers - 1);
    if (o->head >= c->n_heads)
        die("--head %d: the model has %d heads (0..%d)", o->head, c->n_heads, c->n_heads - 1);
    int n_ids;
    int *ids = encode_view_text(o, &tok, &n_ids);
    if (n_ids > ATTENTION_MAX_TOKENS)
        die("%s: the text has %d tokens; -m attention shows at most %d", o->text_file ? "-f" : "-i",
            n_ids, ATTENTION_MAX_TOKENS);
    for (int i = 0; i < v.n; i++) check_positions(&model, &v.params[i], v.labels[i], n_ids - 1);
    AttentionView views[MAX_VARIANTS];
    for (int i = 0; i < v.n; i++) {
        Context ctx;
        build_context(&ctx, o, &model, &v.params[i], v.labels[i],
                      context_size_generate(n_ids, TENSOR_F32));
        PosencError err;
        if (attention_view_build(&views[i], &ctx, ids, n_ids, v.labels[i], &err))
            die("%s", err.msg);
        context_free(&ctx);
    }
    AttentionSelection sel = {o->layer, o->head};
    if (o->json) attention_view_write_json(stdout, o->model_path, ids, views, v.n, sel);
    else attention_view_print(stdout, o->model_path, views, v.n, sel);
    PosencError err;
    if (o->csv_path && attention_view_write_csv(o->csv_path, views, v.n, sel, &err))
        die("--csv: %s", err.msg);
    SvgSink charts = {.prefix = o->svg_path, .written = stderr};
    if (o->svg_path && attention_view_write_charts(&charts, views, v.n, sel, &err))
        die("--svg: %s", err.msg);
    if (o->html_path) {
        char title[1100];
        snprintf(title, sizeof title, "posenc -m attention: %s", o->model_path);
        AttentionReport ar = {o->model_path, ids, views, v.n, sel};
        write_html(o, title, &(ViewReport){attention_report_json, attention_report_charts, &ar});
    }
    for (int i = 0; i < v.n; i++) attention_view_free(&views[i]);
    free(ids);
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
    if (!strcmp(o.mode, "chat")) return run_chat(&o);
    if (!strcmp(o.mode, "pe")) return run_pe(&o);
    if (!strcmp(o.mode, "attention")) return run_attention(&o);
    return run_generate(&o);
}
