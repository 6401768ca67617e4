/* -m ppl with one model and one window (several: cli/mode_ppl_study.c). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/common.h"
#include "cli/modes.h"
#include "cli/ppl.h"
#include "modes/ppl_report.h"

/* What run_ppl's hooks need. */
typedef struct {
    const char *progress_label;
    const char *const *labels; /* per variant */
    LogprobWriter *logprobs;   /* out NULL: no --logits-out */
    int stream;                /* counting tokens of a stream, not windows */
    ProgressLine progress;
} PplReport;

/* The running mean NLL of the first variant and the time left, as
 * llama-perplexity prints a running value per chunk. */
static void show_progress(const PplProgressState *st, void *user) {
    PplReport *r = user;
    int last = st->done == st->total;
    if (!progress_due(&r->progress, last)) return;
    double elapsed = r->progress.shown_s - r->progress.start_s;
    const PplResult *first = &st->res[0];
    double nll = first->n_scored ? first->nll_sum / first->n_scored : 0.0;
    double eta = st->fraction > 0 ? elapsed * (1 - st->fraction) / st->fraction : 0.0;
    char line[160];
    snprintf(line, sizeof line, "%-20.20s %ld/%ld %s, %s nll %.4f (ppl %.3f), %s %.0f s",
             r->progress_label, st->done, st->total, r->stream ? "tokens" : "windows",
             r->labels[0], nll, exp(nll), last ? "took" : "ETA", last ? elapsed : eta);
    progress_write(&r->progress, line, last);
}

static void log_prediction(const PplPrediction *p, void *user) {
    const PplReport *r = user;
    logprob_writer_row(r->logprobs, r->labels[p->variant], p->index, p->pos, p->logits, p->target);
}

/* Before any context is built: a window defaults to the model's context
 * length, which a header may set to millions of tokens, and its logits
 * would be allocated before the text is found too short to fill it. */
const char *ppl_text_name(const Options *o) {
    static char name[1100];
    if (o->text_file) snprintf(name, sizeof name, "-f %s", o->text_file);
    else snprintf(name, sizeof name, "-i");
    return name;
}

const char *ppl_text_title(const Options *o) { return o->text_file ? o->text_file : "the -i text"; }

void check_text_length(const Options *o, int n_ids, int window) {
    if (o->stream && n_ids < 2)
        cli_die("%s: the text has %d tokens, too few to score (at least 2)", ppl_text_name(o),
                n_ids);
    if (!o->stream && n_ids - 1 < window)
        cli_die("%s: the text has %d tokens, too few for one window of %d (lower --ctx)",
                ppl_text_name(o), n_ids, window);
}

/* The settings of a --sinks list as the variants, on the one --pe variant. */
static void resolve_sink_settings(const Options *o, const Model *model, PplVariants *pv) {
    if (o->n_models > 1 || o->n_windows > 1)
        cli_die("--sinks %s: a list is compared in one -m ppl run, not in a study (several models "
                "or --ctx values)", o->sinks);
    if (pv->listed.n > 1)
        cli_die("--sinks %s: a list compares settings of one --pe variant; --pe lists %d", o->sinks,
                pv->listed.n);
    int n = parse_sink_settings(o, model, pv->sink_settings), baseline = o->baseline ? -1 : 0;
    for (int v = 0; v < n; v++) {
        pv->all_params[v] = pv->listed.params[0];
        pv->all_labels[v] = pv->sink_settings[v].label;
        if (o->baseline && !strcmp(o->baseline, pv->all_labels[v])) baseline = v;
    }
    if (baseline < 0)
        cli_die("--baseline: '%s' is not one of the --sinks settings (%s)", o->baseline, o->sinks);
    pv->labels = pv->all_labels;
    pv->params = pv->all_params;
    pv->n = n;
    pv->baseline = baseline;
    pv->added = 0;
    pv->sinks = pv->sink_settings;
    pv->sinks_pe_label = pv->listed.labels[0];
}

void resolve_ppl_variants(const Options *o, const Model *model, const Variants *listed,
                          PplVariants *pv) {
    pv->listed = *listed;
    pv->sinks = NULL;
    if (sinks_is_list(o)) {
        resolve_sink_settings(o, model, pv);
        return;
    }
    pv->all_params[0] = variant_params(model, o, NULL);
    pv->all_labels[0] = o->baseline ? o->baseline : pe_kind_name(pv->all_params[0].kind);
    int baseline = -1;
    for (int v = 1; v <= pv->listed.n; v++) {
        pv->all_params[v] = pv->listed.params[v - 1];
        pv->all_labels[v] = pv->listed.labels[v - 1];
        for (int u = 1; u < v; u++)
            if (!strcmp(pv->all_labels[u], pv->all_labels[v]))
                cli_die("--pe: '%s' is listed twice", pv->all_labels[v]);
        if (baseline < 0 && !strcmp(pv->all_labels[v], pv->all_labels[0])) baseline = v;
    }
    if (baseline < 0 && o->baseline)
        cli_die("--baseline: '%s' is not one of the --pe variants (%s)", o->baseline,
                o->pe_list ? o->pe_list : pv->all_labels[1]);
    pv->added = baseline < 0;
    pv->n = pv->listed.n + pv->added;
    pv->labels = pv->all_labels + !pv->added;
    pv->params = pv->all_params + !pv->added;
    pv->baseline = pv->added ? 0 : baseline - 1;
}

/* -f's text as the model's tokens. */
int *encode_ppl_text(const Options *o, const Tokenizer *tok, int *n_ids) {
    size_t len;
    char *text = o->text_file ? read_text_file("-f", o->text_file, &len) : strdup(o->prompt);
    if (!o->text_file) len = strlen(text);
    int *ids = NULL;
    PosencError err;
    int failed = tokenizer_encode_alloc(tok, text, len, o->bos, 0, &ids, n_ids, &err);
    free(text); /* before a die: LeakSanitizer sees no pointer to it left */
    if (failed) cli_die("%s: %s", ppl_text_name(o), err.msg);
    return ids;
}

/* ctxs (built) in lockstep; popt's keep or keeps set. */
static int score_contexts(const Options *o, Context *ctxs, const char *const *labels, int n,
                          int baseline, const int *ids, int n_ids, const PplOptions *popt,
                          const char *progress_label, LogprobWriter *logprobs, PplResult *res) {
    PplReport report = {progress_label, labels, logprobs, o->stream, {0}};
    progress_begin(&report.progress);
    PplHooks hooks = {show_progress, logprobs && logprobs->out ? log_prediction : NULL, &report};
    PosencError err;
    int rc = ppl_evaluate_variants(ctxs, n, baseline, ids, n_ids, popt, res, &hooks, &err);
    if (rc < 0) cli_die("%s", err.msg);
    for (int v = 0; v < n; v++) context_free(&ctxs[v]);
    return rc;
}

static PplOptions ppl_options(const Options *o, int window, volatile sig_atomic_t *interrupted) {
    return (PplOptions){.window = window, .stride = o->stride, .max_chunks = o->chunks,
                        .stream = o->stream, .keep = o->keep, .shift = shift_mode(o),
                        .pos_offset = o->pos_offset, .interrupted = interrupted};
}

int score_variants(const Options *o, const Model *model, const char *const *labels,
                   const PeParams *params, int n, int baseline, const int *ids, int n_ids,
                   int window, const char *progress_label, LogprobWriter *logprobs,
                   volatile sig_atomic_t *interrupted, PplResult *res) {
    PplOptions popt = ppl_options(o, window, interrupted);
    Context ctxs[MAX_VARIANTS + 1];
    for (int v = 0; v < n; v++)
        build_context(&ctxs[v], o, model, &params[v], labels[v], context_size_ppl(window, kv_type(o)));
    return score_contexts(o, ctxs, labels, n, baseline, ids, n_ids, &popt, progress_label, logprobs, res);
}

int score_sink_settings(const Options *o, const Model *model, const PplVariants *pv,
                        const int *ids, int n_ids, int window, const char *progress_label,
                        LogprobWriter *logprobs, volatile sig_atomic_t *interrupted, PplResult *res) {
    PplOptions popt = ppl_options(o, window, interrupted);
    int keeps[MAX_VARIANTS];
    Context ctxs[MAX_VARIANTS];
    for (int v = 0; v < pv->n; v++) {
        Options with = *o; /* the learned sinks as the setting says, on a model that has them */
        with.sinks = !pv->sinks[v].learned && model->config.family.attn_sinks ? "off" : NULL;
        build_context(&ctxs[v], &with, model, &pv->params[v], pv->sinks_pe_label,
                      context_size_ppl(window, kv_type(o)));
        keeps[v] = pv->sinks[v].keep;
    }
    popt.keeps = keeps;
    return score_contexts(o, ctxs, pv->labels, pv->n, pv->baseline, ids, n_ids, &popt,
                          progress_label, logprobs, res);
}

/* One run's page: the A/B table, the NLL-by-position chart and the data. */
typedef struct {
    const PplChartSource *chart;
    const char *caption;
    const PplRow *rows;
    const PplResult *res;
    const char *const *labels;
    int n;
} PplPage;

static void ppl_page_json(FILE *out, const void *arg) {
    const PplPage *p = arg;
    ppl_report_write_json(out, p->chart, p->rows, p->res, p->n);
}

static void ppl_page_table(FILE *html, const void *arg) {
    const PplPage *p = arg;
    ppl_report_html_table(html, p->caption, p->rows, p->res, p->n);
}

static int ppl_page_charts(const SvgSink *sink, const void *arg, PosencError *err) {
    const PplPage *p = arg;
    return ppl_report_sink_svg(sink, p->chart, p->labels, p->res, p->n, err);
}

int run_ppl(const Options *o) {
    if (!o->text_file && !o->prompt) cli_die("-m ppl needs a text to score: -f FILE or -i TEXT");
    if (o->n_models > 1 || o->n_windows > 1) return run_ppl_study(o);
    Setup s;
    setup_open(&s, o, SETUP_TOKENIZER | SETUP_VARIANTS);
    const Model *model = &s.model;
    PplVariants pv;
    resolve_ppl_variants(o, model, &s.v, &pv);
    int window = s.n_ctx;
    if (o->stride > window)
        cli_die("--stride %d must be in 1..%d (the window, --ctx)", o->stride, window);
    if (o->stream) check_keep(o, window);
    for (int v = 0; v < pv.n; v++)
        check_positions(model, &pv.params[v], pv.labels[v], o->pos_offset + window - 1);
    int n_ids;
    int *ids = encode_ppl_text(o, &s.tok, &n_ids);
    check_text_length(o, n_ids, window);
    LogprobWriter logprobs;
    open_logits_out(o, model->config.vocab_size, &logprobs);

    /* the table's header, and the --html table's caption */
    char run[2 * PATH_MAX + 256], legend[256];
    snprintf(run, sizeof run, "%s on %s: %d tokens, %s of %d%s; baseline %s (%s)", o->model_path,
             ppl_text_title(o), n_ids, o->stream ? "stream through a cache" : "windows", window,
             o->stride ? " (sliding)" : "", pv.labels[pv.baseline],
             pv.added ? "the checkpoint's scheme, not in --pe, so run too"
             : o->baseline ? "--baseline" : pv.sinks ? "the first --sinks setting" : "the checkpoint's scheme");
    snprintf(legend, sizeof legend, "se: standard error over the scored tokens; vs the baseline on "
             "the same tokens: dnll = NLL(variant) - NLL(baseline), kl = KL(baseline || variant) in "
             "nats, top1 = argmax agreement");
    if (!o->json) {
        printf("# %s\n# %s\n", run, legend);
        ppl_report_columns(stdout, 0);
    }
    fflush(stdout);
    char progress_label[32];
    if (pv.n == 1) snprintf(progress_label, sizeof progress_label, "%s", pv.labels[0]);
    else snprintf(progress_label, sizeof progress_label, "%d variants", pv.n);
    PplResult res[MAX_VARIANTS + 1];
    catch_interrupts(); /* Ctrl-C: the table of what was scored */
    int stopped = pv.sinks ? score_sink_settings(o, model, &pv, ids, n_ids, window, progress_label,
                                                 &logprobs, &cli_interrupted, res)
                           : score_variants(o, model, pv.labels, pv.params, pv.n, pv.baseline, ids,
                                            n_ids, window, progress_label, &logprobs, &cli_interrupted, res);
    if (stopped)
        fprintf(stderr, "note: interrupted: the table holds the %ld %s scored\n", res[0].n_chunks,
                o->stream ? "chunks" : "windows");
    close_logits_out(o, &logprobs);
    PplRow rows[MAX_VARIANTS + 1];
    for (int v = 0; v < pv.n; v++) {
        rows[v] = (PplRow){.label = pv.labels[v], .ctx = window, .baseline = pv.labels[pv.baseline],
                           .is_baseline = v == pv.baseline, .baseline_added = pv.added,
                           .stream = o->stream};
        ppl_report_row(stdout, o->json, &rows[v], &res[v]);
    }
    PosencError err;
    if (o->csv_path && ppl_report_write_csv(o->csv_path, pv.labels, res, pv.n, &err))
        cli_die("--csv: %s", err.msg);
    PplChartSource chart = {o->model_path, ppl_text_title(o), model->config.seq_len, o->stream};
    if (o->svg_path && ppl_report_write_svg(o->svg_path, &chart, pv.labels, res, pv.n, &err))
        cli_die("--svg: %s", err.msg);
    if (o->html_path) {
        char title[2 * PATH_MAX + 32], caption[sizeof run + sizeof legend + 64];
        snprintf(title, sizeof title, "posenc -m ppl: %s on %s", o->model_path, ppl_text_title(o));
        snprintf(caption, sizeof caption, "%s%s. %s.", stopped ? "Interrupted: what was scored "
                 "before Ctrl-C. " : "", run, legend);
        PplPage page = {&chart, caption, rows, res, pv.labels, pv.n};
        write_html(o, title, &(ViewReport){.how_to_read = "The table compares every --pe variant "
                   "with the baseline on the same tokens; the chart shows each variant's mean NLL "
                   "at every position within the window.", .json = ppl_page_json,
                   .tables = ppl_page_table, .charts = ppl_page_charts, .arg = &page});
    }
    for (int v = 0; v < pv.n; v++) ppl_result_free(&res[v]);
    free(ids);
    setup_close(&s);
    return stopped ? 128 + SIGINT : EXIT_SUCCESS; /* a shell's status for Ctrl-C */
}
