/* The command line as data: one table of options and one of modes.  Parsing,
 * the checks of ranges and of which flags a mode takes, `-h` (whole and per
 * mode) and docs/cli.md are all made from these two tables, so a new flag is
 * one row here plus its Options field, and a new mode one row plus its file. */
#ifndef POSENC_CLI_OPTIONS_H
#define POSENC_CLI_OPTIONS_H

#include <stdio.h>

#include "model/sampler.h"

#define MAX_VARIANTS 16
#define MAX_STOPS 16
#define MAX_MODELS 16
#define MAX_WINDOWS 16
#define MAX_THREAD_COUNTS 8
#define MAX_GIVEN 64
#define POSENC_VERSION "0.12"

/* What one command line asks for; zero (or NULL) in a field means "not
 * given", where the help text names what is used instead. */
typedef struct {
    const char *model_paths[MAX_MODELS]; /* ppl compares several; other modes take one */
    int n_models;
    const char *model_path, *tokenizer_path, *mode, *prompt, *text_file;
    float temperature, topp, min_p;
    int topk, steps, threads;   /* threads: the largest of --threads' counts, 0 for all cores */
    int thread_counts[MAX_THREAD_COUNTS], n_thread_counts; /* --threads as given (bench: a list) */
    SamplerPenalties penalties;
    /* chat */
    const char *system_prompt, *chat_template, *chat_template_kwargs;
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
    const char *self_extend;    /* Self-Extend on the rotating layers: G,W */
    const char *self_extend_llamacpp; /* llama.cpp's group attention: G,W */
    const char *attn_temperature; /* B,L[,llama4] */
    const char *sinks;          /* "off": the learned sinks left out */
    const char *pe_overflow;
    int ctx, pos_offset, keep;
    int windows[MAX_WINDOWS];   /* --ctx as a list (ppl): the study's windows; ctx is the first */
    int n_windows;
    int no_shift, shift_no_rerotate, trace_positions, dump_cache;
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
    /* passkey */
    const char *haystacks, *lengths, *depths, *intro, *needle, *question;
    int trials, key_digits;
    int chat;                   /* passkey: through the chat template */
    const char *host;           /* serve: the address to listen on */
    int port;
    int slots;                  /* serve: contexts, one request each at a time */
    int queue;                  /* serve: requests that may wait for a slot */
    const char *baseline;       /* ppl: the variant the others are compared with */
    const char *logits_out;     /* ppl, generate: JSON lines of log-probabilities */
    int logits_top;             /* ids per line in --logits-out */
    const char *given[MAX_GIVEN]; /* every flag on the command line, once */
    int n_given;
} Options;

/* The modes, one bit each, in the order of the mode table. */
enum {
    MODE_GENERATE = 1 << 0, MODE_CHAT = 1 << 1, MODE_PPL = 1 << 2, MODE_BENCH = 1 << 3,
    MODE_TOKENIZE = 1 << 4, MODE_INSPECT = 1 << 5, MODE_PE = 1 << 6, MODE_ATTENTION = 1 << 7,
    MODE_PASSKEY = 1 << 8, MODE_SERVE = 1 << 9,
};

typedef struct {
    const char *name;
    int (*run)(const Options *o);
    const char *synopsis; /* the usage line, after "run " */
    const char *help;     /* what the mode does, for -h and docs/cli.md */
} ModeSpec;

/* OPT_OUTPUT: a path written at the end of the run, checked when parsed. */
typedef enum { OPT_SWITCH, OPT_INT, OPT_FLOAT, OPT_SEED, OPT_TEXT, OPT_OUTPUT, OPT_CUSTOM } OptionKind;

/* One row of the option table.  A row with only `section` set starts a
 * group of the help text. */
typedef struct OptionSpec {
    const char *name;        /* "-t", "--min-p" */
    OptionKind kind;
    double lo, hi;           /* OPT_INT, OPT_FLOAT: the accepted range */
    unsigned modes;          /* MODE_* bits of the modes that use it */
    size_t field;            /* offsetof(Options, ...) of what it sets */
    const char *metavar;     /* the value in the help text ("N", "PATH"); NULL for a switch */
    const char *fallback;    /* what is used when it is not given, for the help text */
    const char *help;        /* {schemes}, {scalings}, {templates} name the registries */
    void (*parse)(Options *o, const struct OptionSpec *spec, const char *value); /* OPT_CUSTOM */
    const char *section;
} OptionSpec;

/* A spelling of llama.cpp's: same_as names the row it is another name of;
 * else `instead` says what to write here. */
typedef struct {
    const char *spelling, *same_as, *instead;
} LlamacppSpelling;

const OptionSpec *cli_options(int *n);
const LlamacppSpelling *cli_llamacpp_spellings(int *n);
const ModeSpec *cli_modes(int *n);
const ModeSpec *cli_mode_named(const char *name); /* NULL: no such mode */
unsigned cli_mode_bit(const char *name);          /* MODE_*; an unknown name exits */

/* The command line, parsed and checked (an error exits with one line). */
Options cli_parse(int argc, char **argv);
int cli_given(const Options *o, const char *flag);

/* -h for every mode (mode NULL) or for one; docs/cli.md. */
void cli_write_help(FILE *f, const ModeSpec *mode);
void cli_write_reference(FILE *f);

/* The registries' names joined by '|', as the help text and errors list them. */
const char *cli_scheme_names(void);
const char *cli_scaling_names(void);
const char *cli_template_names(void);

#endif
