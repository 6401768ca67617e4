/* -m ppl with one model and one window (several: cli/mode_ppl_study.c). */
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

void resolve_ppl_variants(const Options *o, const Model *model, const Variants *listed,
                          PplVariants *pv) {
    pv->listed = *listed;
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

void score_variants(const Options *o, const Model *model, const char *const *labels,
                           const PeParams *params, int n, int baseline, const int *ids,
                           int n_ids, int window, const char *progress_label, LogprobWriter *logprobs,
                           PplResult *res) {
    PplOptions popt = {.window = window, .stride = o->stride, .max_chunks = o->chunks,
                       .stream = o->stream, .keep = o->keep, .shift = shift_mode(o),
                       .pos_offset = o->pos_offset};
    Context ctxs[MAX_VARIANTS + 1];
    for (int v = 0; v < n; v++)
        build_context(&ctxs[v], o, model, &params[v], labels[v], context_size_ppl(window, kv_type(o)));
    PplReport report = {progress_label, labels, logprobs};
    PplHooks hooks = {isatty(STDERR_FILENO) ? progress_bar : NULL,
                      logprobs && logprobs->out ? log_prediction : NULL, &report};
    PosencError err;
    if (ppl_evaluate_variants(ctxs, n, baseline, ids, n_ids, &popt, res, &hooks, &err))
        cli_die("%s", err.msg);
    for (int v = 0; v < n; v++) context_free(&ctxs[v]);
}

int run_ppl(const Options *o) {
    if (!o->text_file && !o->prompt) cli_die("-m ppl needs a text to score: -f FILE or -i TEXT");
    if (o->n_models > 1 || o->n_windows > 1) return run_ppl_study(o);
    if (o->html_path)
        cli_die("--html: -m ppl writes a page for the extrapolation study: give --ctx a list of "
                "windows or several models");
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

    if (!o->json) {
        printf("# %s on %s: %d tokens, %s of %d%s; baseline %s (%s)\n"
               "# se: standard error over the scored tokens; vs the baseline on the same tokens: "
               "dnll = NLL(variant) - NLL(baseline), kl = KL(baseline || variant) in nats, "
               "top1 = argmax agreement\n",
               o->model_path, ppl_text_title(o), n_ids, o->stream ? "stream through a cache" : "windows",
               window, o->stride ? " (sliding)" : "", pv.labels[pv.baseline],
               pv.added ? "the checkpoint's scheme, not in --pe, so run too"
               : o->baseline ? "--baseline" : "the checkpoint's scheme");
        ppl_report_columns(stdout, 0);
    }
    fflush(stdout);
    char progress_label[32];
    if (pv.n == 1) snprintf(progress_label, sizeof progress_label, "%s", pv.labels[0]);
    else snprintf(progress_label, sizeof progress_label, "%d variants", pv.n);
    PplResult res[MAX_VARIANTS + 1];
    score_variants(o, model, pv.labels, pv.params, pv.n, pv.baseline, ids, n_ids, window,
                   progress_label, &logprobs, res);
    close_logits_out(o, &logprobs);
    for (int v = 0; v < pv.n; v++) {
        PplRow row = {.label = pv.labels[v], .ctx = window, .baseline = pv.labels[pv.baseline],
                      .is_baseline = v == pv.baseline, .baseline_added = pv.added,
                      .stream = o->stream};
        ppl_report_row(stdout, o->json, &row, &res[v]);
    }
    PosencError err;
    if (o->csv_path && ppl_report_write_csv(o->csv_path, pv.labels, res, pv.n, &err))
        cli_die("--csv: %s", err.msg);
    PplChartSource chart = {o->model_path, ppl_text_title(o), model->config.seq_len, o->stream};
    if (o->svg_path && ppl_report_write_svg(o->svg_path, &chart, pv.labels, res, pv.n, &err))
        cli_die("--svg: %s", err.msg);
    for (int v = 0; v < pv.n; v++) ppl_result_free(&res[v]);
    free(ids);
    setup_close(&s);
    return EXIT_SUCCESS;
}
