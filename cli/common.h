/* What the mode drivers share: one-line errors, loading the model and the
 * tokenizer, the --pe variants and per-layer overrides, contexts, the input
 * text and the output files.  Every failure here names the flag or file
 * the user can change and exits with status 1. */
#ifndef POSENC_CLI_COMMON_H
#define POSENC_CLI_COMMON_H

#include <signal.h>
#include <stdio.h>

#include "base/json_parse.h"
#include "chat/jinja.h"
#include "cli/options.h"
#include "model/context.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/shift.h"
#include "modes/logprobs.h"
#include "modes/plot_svg.h"
#include "positional/pe.h"
#include "tokenizer/tokenizer.h"

__attribute__((format(printf, 1, 2), noreturn)) void cli_die(const char *fmt, ...);
long cli_parse_long(const char *flag, const char *s, long lo, long hi);
float cli_parse_float(const char *flag, const char *s, float lo, float hi);

/* ---- the model, its tokenizer and the input text ---- */
void load_model(const Options *o, Model *model);
void load_tokenizer(const Options *o, const Model *model, Tokenizer *tok); /* model NULL: -z only */
const char *default_tokenizer(const char *model_path, char *buf, size_t n);
void apply_special(const Options *o, Tokenizer *tok);
FILE *open_text_file(const char *flag, const char *path);
char *read_text_file(const char *flag, const char *path, size_t *len);
char *read_prompt_file(const char *path);

/* ---- positional schemes: the --pe variants ---- */

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

void resolve_variants(const Options *o, const Model *m, Variants *v);
/* "G,W" of --self-extend and --self-extend-llamacpp, or the flag's error. */
void parse_group_window(const char *flag, const char *value, int *group, int *window);
PeParams variant_params(const Model *m, const Options *o, const char *spec);
LayerAttention *variant_layers(const Options *o, const Model *m, const PeParams *p,
                               const char *label, int n_ctx);
void check_positions(const Model *m, const PeParams *p, const char *label, int last_pos);

/* One setting of attention sinks a --sinks list compares (-m ppl): the
 * learned sinks kept or left out, and StreamingLLM's kept cells. */
typedef struct {
    char label[32];       /* as the user spelled it: learned, off, keep:N, learned+keep:N */
    int learned;          /* the checkpoint's learned sinks stay in the softmax */
    int keep;             /* cells a context shift never discards */
} SinkSetting;

/* --sinks as a list (anything but a lone "off"), or 0 when it is none. */
int sinks_is_list(const Options *o);
/* The settings of a --sinks list, checked against the model; returns their count. */
int parse_sink_settings(const Options *o, const Model *m, SinkSetting *out);

/* ---- the start the drivers share ---- */

/* The model, its tokenizer when the mode reads text, and the --pe variants
 * checked against the model, in that order (so the first error a user sees
 * is the same whichever mode runs); the prompt is read when asked for. */
typedef struct {
    Model model;
    Tokenizer tok;         /* with SETUP_TOKENIZER */
    int has_tokenizer;
    Variants v;            /* with SETUP_VARIANTS */
    int n_ctx;             /* --ctx, else the model's trained context */
    char *prompt_file;     /* -f's text once setup_prompt read it */
    double load_s;         /* loading the model and the tokenizer */
} Setup;
enum { SETUP_TOKENIZER = 1, SETUP_VARIANTS = 2 };
void setup_open(Setup *s, const Options *o, int needs);
void setup_close(Setup *s);
/* -f's text (one trailing newline dropped) or -i's. */
const char *setup_prompt(Setup *s, const Options *o);
/* The prompt as the model's tokens, BOS first as generate encodes it. */
int *setup_prompt_ids(Setup *s, const Options *o, int *n_ids);
/* The flag that gave the input text, for errors about it. */
const char *text_flag(const Options *o);

/* --chat-template NAME|FILE (a built-in format, a Jinja file, or a
 * tokenizer_config.json holding one), else the GGUF's
 * tokenizer.chat_template: parsed, or one error naming where it came from. */
JinjaTemplate *load_chat_template(const Options *o, const Model *model);
/* --chat-template-kwargs: a JSON object of more template variables (doc
 * filled, its root returned), or NULL when not given. */
const JsonValue *load_template_kwargs(const Options *o, JsonDoc *doc);

/* ---- contexts and sampling ---- */
TensorType kv_type(const Options *o);
void build_context(Context *ctx, const Options *o, const Model *m, const PeParams *p,
                   const char *label, ContextSize size);
void check_keep(const Options *o, int n_ctx);
ContextShiftMode shift_mode(const Options *o);
unsigned long long build_sampler(const Options *o, int vocab, Sampler *s); /* the seed */

/* ---- output files ---- */
void open_logits_out(const Options *o, int vocab, LogprobWriter *w); /* w->out NULL: not asked */
void close_logits_out(const Options *o, LogprobWriter *w);

/* Ctrl-C sets cli_interrupted instead of ending the process, for the modes
 * that stop cleanly (chat's reply, ppl's scoring); without SA_RESTART, so a
 * read waiting at chat's prompt ends too (EINTR). */
extern volatile sig_atomic_t cli_interrupted;
void catch_interrupts(void);

/* A long run's progress on stderr: one line redrawn in place on a terminal,
 * else a line at most every PROGRESS_EVERY_S seconds (and the last), so a
 * log file stays short. */
#define PROGRESS_EVERY_S 5.0
typedef struct {
    int terminal;            /* stderr is a terminal */
    double start_s, shown_s; /* when the work began; when a line was last written */
} ProgressLine;
void progress_begin(ProgressLine *p);
/* Whether a line is due now (always for the last); marks it written. */
int progress_due(ProgressLine *p, int last);
void progress_write(const ProgressLine *p, const char *line, int last);

/* A view's (or a ppl run's) --html page: its tables and charts inline and its data. */
typedef struct {
    const char *how_to_read;  /* the page's line on what its charts answer to */
    void (*json)(FILE *out, const void *arg);
    int (*charts)(const SvgSink *sink, const void *arg, PosencError *err);
    const void *arg;
    void (*tables)(FILE *html, const void *arg); /* HTML tables before the charts, or NULL */
} ViewReport;
void write_html(const Options *o, const char *title, const ViewReport *r);

#endif
