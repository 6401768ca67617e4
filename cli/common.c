/* What the mode drivers share (cli/common.h). */
#include "cli/common.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/file_kind.h"
#include "base/gguf.h"
#include "base/json_parse.h"
#include "chat/chat_template.h"
#include "modes/generate.h"
#include "modes/html_report.h"

/* Every CLI failure is one line on stderr and exit status 1.  Flag values
 * and paths come from the user: a control character in one is written as
 * \xNN, so it can neither split the line nor reach the terminal. */
void cli_die(const char *fmt, ...) {
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

TensorType kv_type(const Options *o) {
    TensorType t = TENSOR_F32;
    if (o->kv_type) kv_cache_type_from_name(o->kv_type, &t); /* a known name: parse_args checked */
    return t;
}

/* The variant's context, with its per-layer table (variant_layers). */
void build_context(Context *ctx, const Options *o, const Model *m, const PeParams *p,
                          const char *label, ContextSize size) {
    PosencError err;
    if (context_build_sized(ctx, m, p, &size, &err)) cli_die("%s", err.msg);
    LayerAttention *table = variant_layers(o, m, p, label, size.n_ctx);
    int rc = context_use_layers(ctx, table, &err);
    free(table);
    if (rc) cli_die("%s%s: %s", label ? "--pe " : "", label ? label : "", err.msg);
}

/* tokenizer.bin beside the model, as llama2.c users lay files out. */
const char *default_tokenizer(const char *model_path, char *buf, size_t n) {
    const char *slash = strrchr(model_path, '/');
    int dir_len = slash ? (int)(slash - model_path + 1) : 0;
    snprintf(buf, n, "%.*stokenizer.bin", dir_len, model_path);
    if (access(buf, R_OK) != 0) cli_die("no tokenizer: pass -z PATH (looked for '%s')", buf);
    return buf;
}

/* `dir` holds a file `name`. */
static int dir_has(const char *dir, const char *name) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, R_OK) == 0;
}

/* A file of another kind passed as the model is named for what it is, with
 * what to pass instead, before the loader reads its bytes as a header. */
static void check_model_kind(const char *path) {
    const char *what;
    switch (file_kind(path, &what)) {
    case FILE_KIND_DIRECTORY:
        if (dir_has(path, "config.json"))
            cli_die("%s is a directory, a Hugging Face checkpoint: convert it to GGUF first "
                    "(python3 tools/convert.py %s model.gguf)", path, path);
        cli_die("%s is a directory; MODEL is a GGUF file or a llama2.c .bin checkpoint", path);
    case FILE_KIND_SAFETENSORS:
        cli_die("%s is a safetensors file, weights without their configuration: convert the "
                "directory that holds it and config.json (python3 tools/convert.py DIR "
                "model.gguf)", path);
    case FILE_KIND_SENTENCEPIECE:
        cli_die("%s is %s, not a model: pass it as -z", path, what);
    case FILE_KIND_JSON:
        cli_die("%s is a JSON file, not a model (a tokenizer.json goes to -z; a Hugging Face "
                "directory to tools/convert.py)", path);
    case FILE_KIND_IMAGE: cli_die("%s is %s, not a model", path, what);
    case FILE_KIND_TEXT:
        cli_die("%s is a text file, not a model: MODEL is a GGUF file or a llama2.c .bin "
                "checkpoint (a text to score goes to -f)", path);
    case FILE_KIND_GGUF: {
        GgufFile g;
        PosencError err;
        if (gguf_open(&g, path, &err)) return; /* the loader says what is wrong */
        int vocabulary_only = g.n_tensors == 0;
        gguf_close(&g);
        if (vocabulary_only)
            cli_die("%s holds a vocabulary and no weights: pass it as -z with a model (-m inspect "
                    "shows it)", path);
        return;
    }
    default: return;
    }
}

/* -z: a directory holding only a SentencePiece or llama2.c tokenizer means
 * that file; a file of another kind is named for what it is. */
static const char *tokenizer_path(const char *path, char *buf, size_t n) {
    const char *what;
    FileKind kind = file_kind(path, &what);
    if (kind == FILE_KIND_DIRECTORY && !dir_has(path, "tokenizer.json") &&
        !dir_has(path, "vocab.json")) {
        const char *names[] = {"tokenizer.model", "tokenizer.bin"};
        for (int i = 0; i < 2; i++)
            if (dir_has(path, names[i])) {
                snprintf(buf, n, "%s/%s", path, names[i]);
                return buf;
            }
        cli_die("-z: %s holds no tokenizer (tokenizer.json, vocab.json + merges.txt, "
                "tokenizer.model or tokenizer.bin)", path);
    }
    if (kind == FILE_KIND_TEXT) {
        const char *slash = strrchr(path, '/');
        int merges = !strcmp(slash ? slash + 1 : path, "merges.txt");
        cli_die("-z: %s is a text file, not a tokenizer%s", path,
                merges ? ": pass the directory that holds it and vocab.json" : "");
    }
    if (kind == FILE_KIND_IMAGE || kind == FILE_KIND_SAFETENSORS)
        cli_die("-z: %s is %s, not a tokenizer", path, what);
    return path;
}

void load_model(const Options *o, Model *model) {
    if (!o->model_path) cli_die("no model given (usage: run MODEL [options])");
    check_model_kind(o->model_path);
    PosencError err;
    if (model_load(model, o->model_path, &err)) cli_die("%s", err.msg);
}

/* --special needs a vocabulary whose control pieces can come from text. */
void apply_special(const Options *o, Tokenizer *tok) {
    if (o->special && tokenizer_set_parse_special(tok, 1))
        cli_die("--special: %s is not a byte-level BPE vocabulary; its control pieces never come "
                "from text", tok->source[0] ? tok->source : o->model_path);
}

/* -z wins; then the GGUF's own vocabulary; then tokenizer.bin beside a .bin. */
void load_tokenizer(const Options *o, const Model *model, Tokenizer *tok) {
    PosencError err;
    int vocab = model ? model->config.vocab_size : 0;
    if (o->tokenizer_path) {
        char buf[1100];
        const char *path = tokenizer_path(o->tokenizer_path, buf, sizeof buf);
        if (tokenizer_load(tok, path, vocab, &err)) cli_die("-z: %s", err.msg);
    } else if (model && model->gguf) {
        if (tokenizer_load_gguf(tok, model->gguf, &err)) cli_die("%s", err.msg);
        if (tok->vocab_size != vocab)
            cli_die("%s: the vocabulary has %d tokens but the model %d", o->model_path, tok->vocab_size,
                    vocab);
    } else if (model) {
        char buf[1024];
        if (tokenizer_load(tok, default_tokenizer(o->model_path, buf, sizeof buf), vocab, &err))
            cli_die("%s", err.msg);
    } else {
        cli_die("-m tokenize needs -z TOKENIZER or a GGUF file");
    }
    apply_special(o, tok);
}


/* A text file of `flag`: a file, or a pipe such as /dev/stdin (read to its
 * end, as cat would); a directory is refused here, before reading it fails. */
FILE *open_text_file(const char *flag, const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) cli_die("%s: '%s' is a directory", flag, path);
    FILE *f = fopen(path, "rb");
    if (!f) cli_die("%s: cannot open '%s': %s", flag, path, strerror(errno));
    return f;
}

/* The whole file, NUL-terminated (len excludes the NUL). */
char *read_text_file(const char *flag, const char *path, size_t *len) {
    FILE *f = open_text_file(flag, path);
    PosencError err;
    char *text = posenc_read_stream(f, len, path, &err);
    if (!text) cli_die("%s: %s", flag, err.msg);
    fclose(f);
    return text;
}

/* generate -f: the prompt is the file's text, as llama.cpp's -f; one
 * trailing newline (an editor's) is dropped. */
char *read_prompt_file(const char *path) {
    size_t len;
    char *text = read_text_file("-f", path, &len);
    if (len > 0 && text[len - 1] == '\n') len--;
    if (memchr(text, '\0', len)) cli_die("-f: '%s' contains a NUL byte; a prompt is text", path);
    text[len] = '\0';
    return text;
}

/* Named here, before any work; the engine checks again for other callers. */
void check_keep(const Options *o, int n_ctx) {
    PosencError err;
    if (o->no_shift || !context_shift_check_keep(n_ctx, o->keep, &err)) return;
    if (!cli_given(o, "--keep")) /* the context is what is too small */
        cli_die("--ctx %d: a context shift needs at least 2 cells (one to discard, one to "
                "move): raise --ctx, or pass --no-shift", n_ctx);
    cli_die("--keep %d: %s: keep at most --ctx - 2, or pass --no-shift", o->keep, err.msg);
}

ContextShiftMode shift_mode(const Options *o) {
    if (o->no_shift) return CONTEXT_SHIFT_OFF;
    if (o->shift_no_rerotate) {
        fprintf(stderr, "warning: --shift-no-rerotate keeps stale keys after a context shift: "
                        "this demonstrates a bug, the output will degrade\n");
        return CONTEXT_SHIFT_NO_REROTATE;
    }
    return CONTEXT_SHIFT_ON;
}

/* --logits-out: the file and its writer, or out == NULL when not asked for. */
void open_logits_out(const Options *o, int vocab, LogprobWriter *w) {
    w->out = NULL;
    if (!o->logits_out) return;
    FILE *f = fopen(o->logits_out, "w");
    if (!f) cli_die("--logits-out: cannot write '%s': %s", o->logits_out, strerror(errno));
    int top = o->logits_top < vocab ? o->logits_top : vocab;
    logprob_writer_init(w, f, vocab, top);
}

void close_logits_out(const Options *o, LogprobWriter *w) {
    if (!w->out) return;
    int failed = ferror(w->out);
    if (fclose(w->out) != 0 || failed) cli_die("--logits-out: error writing '%s'", o->logits_out);
    logprob_writer_free(w);
}

/* Without -s (or with -s 0), a seed from the clock's nanoseconds and the
 * process id, so runs started within one second differ; the caller prints
 * it, so a run can be repeated with -s. */
unsigned long long build_sampler(const Options *o, int vocab, Sampler *s) {
    unsigned long long seed = o->seed;
    while (!seed) { /* 0 would stall the xorshift generator */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        seed = ((unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec) ^
               ((unsigned long long)getpid() << 32);
        seed &= (unsigned long long)LONG_MAX; /* what -s accepts */
    }
    sampler_build(s, vocab, o->temperature, o->topp, o->topk, seed);
    sampler_set_min_p(s, o->min_p);
    sampler_set_penalties(s, o->penalties);
    return seed;
}

void progress_begin(ProgressLine *p) {
    p->terminal = isatty(STDERR_FILENO);
    p->start_s = p->shown_s = time_now_s();
}

int progress_due(ProgressLine *p, int last) {
    double now = time_now_s();
    if (!p->terminal && !last && now - p->shown_s < PROGRESS_EVERY_S) return 0;
    p->shown_s = now;
    return 1;
}

void progress_write(const ProgressLine *p, const char *line, int last) {
    if (p->terminal) fprintf(stderr, "\r%-100.100s%s", line, last ? "\n" : "");
    else fprintf(stderr, "%s\n", line);
}

void write_html(const Options *o, const char *title, const ViewReport *r) {
    PosencError err;
    FILE *f = html_report_open(o->html_path, title, r->how_to_read, &err);
    if (!f) cli_die("--html: %s", err.msg);
    if (r->tables) r->tables(f, r->arg);
    SvgSink sink = {.html = f};
    if (r->charts(&sink, r->arg, &err)) {
        fclose(f);
        remove(o->html_path);
        cli_die("--html: %s", err.msg);
    }
    html_report_data(f, r->json, r->arg);
    if (html_report_close(f, o->html_path, &err)) cli_die("--html: %s", err.msg);
    fprintf(stderr, "wrote %s\n", o->html_path);
}

void setup_open(Setup *s, const Options *o, int needs) {
    memset(s, 0, sizeof *s);
    double t0 = time_now_s();
    load_model(o, &s->model);
    s->has_tokenizer = (needs & SETUP_TOKENIZER) != 0;
    if (s->has_tokenizer) load_tokenizer(o, &s->model, &s->tok);
    s->load_s = time_now_s() - t0;
    if (needs & SETUP_VARIANTS) resolve_variants(o, &s->model, &s->v);
    s->n_ctx = o->ctx ? o->ctx : s->model.config.seq_len;
}

const char *setup_prompt(Setup *s, const Options *o) {
    if (o->text_file && !s->prompt_file) s->prompt_file = read_prompt_file(o->text_file);
    return o->text_file ? s->prompt_file : o->prompt;
}

int *setup_prompt_ids(Setup *s, const Options *o, int *n_ids) {
    int *ids;
    PosencError err;
    if (generate_encode_prompt(&s->tok, setup_prompt(s, o), &ids, n_ids, &err))
        cli_die("%s: %s", text_flag(o), err.msg);
    return ids;
}

void setup_close(Setup *s) {
    free(s->prompt_file);
    if (s->has_tokenizer) tokenizer_free(&s->tok);
    s->has_tokenizer = 0;
    model_free(&s->model);
}

const char *text_flag(const Options *o) { return o->text_file ? "-f" : "-i"; }

volatile sig_atomic_t cli_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    cli_interrupted = 1;
}

void catch_interrupts(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

/* ---- chat templates ---- */

/* Whether s[0, n) is UTF-8 text without NUL bytes. */
static int is_utf8_text(const char *s, size_t n) {
    uint32_t cp;
    for (size_t i = 0, len; i < n; i += len)
        if (!(len = (size_t)utf8_decode((const unsigned char *)s + i, n - i, &cp)) || cp == 0)
            return 0;
    return 1;
}

/* A Hugging Face tokenizer_config.json's chat_template: a string, or a list
 * of {name, template} of which "default" is the one used (malloc'd). */
static char *template_from_config(const char *path, const char *json, size_t len, PosencError *err) {
    JsonDoc doc;
    if (json_parse(&doc, json, len, err)) return NULL;
    const JsonValue *t = json_get(&doc.root, "chat_template");
    const char *text = t && t->type == JSON_STRING ? t->string : NULL;
    for (uint32_t i = 0; t && t->type == JSON_ARRAY && i < t->len; i++)
        if (json_is_string(json_get(&t->items[i], "name"), "default"))
            text = json_get_string(&t->items[i], "template");
    char *copy = text ? strdup(text) : NULL;
    if (text && !copy) posenc_out_of_memory(strlen(text) + 1, 1, "the chat template");
    json_free(&doc);
    if (!copy)
        posenc_error(err, "%s is JSON without a chat_template (a string, or a list holding one named "
                          "\"default\")", path);
    return copy;
}

/* --chat-template FILE: a Jinja template, or a tokenizer_config.json
 * holding one; anything but UTF-8 text is refused (malloc'd, *len set).
 * The file's text is freed before any error: LeakSanitizer then sees
 * nothing left behind by the exit. */
static char *read_template_file(const char *path, size_t *len) {
    char *text = read_text_file("--chat-template", path, len);
    if (!is_utf8_text(text, *len)) {
        free(text);
        cli_die("--chat-template: %s is not UTF-8 text: give a Jinja template, a "
                "tokenizer_config.json or a built-in format (%s)", path, cli_template_names());
    }
    /* a JSON object opens with '{' and a key or '}'; Jinja's '{' with '{', '%' or '#' */
    size_t i = 0;
    while (i < *len && isspace((unsigned char)text[i])) i++;
    size_t j = i + 1;
    while (j < *len && isspace((unsigned char)text[j])) j++;
    if (i < *len && text[i] == '{' && j < *len && (text[j] == '"' || text[j] == '}')) {
        PosencError err;
        char *inner = template_from_config(path, text, *len, &err);
        free(text);
        if (!inner) cli_die("--chat-template: %s%s%s", strstr(err.msg, path) ? "" : path,
                            strstr(err.msg, path) ? "" : ": ", err.msg);
        *len = strlen(inner);
        return inner;
    }
    return text;
}

/* --chat-template NAME|FILE, else the GGUF's tokenizer.chat_template:
 * parsed, or one line naming where the template came from. */
JinjaTemplate *load_chat_template(const Options *o, const Model *model) {
    PosencError err;
    const char *text = NULL, *source = NULL;
    char *file_text = NULL;
    size_t len = 0;
    if (o->chat_template) {
        text = chat_template_builtin(o->chat_template);
        source = "--chat-template";
        if (!text) {
            if (access(o->chat_template, R_OK) != 0)
                cli_die("--chat-template: '%s' is neither a built-in format (%s) nor a readable file",
                        o->chat_template, cli_template_names());
            file_text = read_template_file(o->chat_template, &len);
            text = file_text;
        } else {
            len = strlen(text);
        }
    } else if (model->gguf && gguf_find_kv(model->gguf, "tokenizer.chat_template")) {
        if (gguf_get_str(model->gguf, "tokenizer.chat_template", &text, &err)) cli_die("%s: %s", o->model_path, err.msg);
        len = strlen(text);
        source = "tokenizer.chat_template";
    } else {
        cli_die("%s has no chat template: name one with --chat-template (%s, or a Jinja file)", o->model_path,
                cli_template_names());
    }
    JinjaTemplate *t = jinja_parse(text, len, &err);
    free(file_text);
    if (!t) {
        if (o->chat_template) cli_die("--chat-template %s: %s", o->chat_template, err.msg);
        cli_die("%s: %s: %s (override it with --chat-template)", o->model_path, source, err.msg);
    }
    return t;
}

const JsonValue *load_template_kwargs(const Options *o, JsonDoc *doc) {
    if (!o->chat_template_kwargs) return NULL;
    PosencError err;
    if (json_parse(doc, o->chat_template_kwargs, strlen(o->chat_template_kwargs), &err))
        cli_die("--chat-template-kwargs: %s", err.msg);
    if (doc->root.type != JSON_OBJECT) {
        json_free(doc);
        cli_die("--chat-template-kwargs: a JSON object of variables, e.g. '{\"enable_thinking\": false}'");
    }
    static const char *const reserved[] = {"messages", "add_generation_prompt", "bos_token", "eos_token"};
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (json_get(&doc->root, reserved[i])) {
            json_free(doc);
            cli_die("--chat-template-kwargs: '%s' is set by posenc, not by the kwargs", reserved[i]);
        }
    return &doc->root;
}
