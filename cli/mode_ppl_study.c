/* -m ppl with several models or windows: the extrapolation study. */
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"
#include "cli/modes.h"
#include "cli/ppl.h"
#include "modes/ppl_report.h"
#include "modes/ppl_study.h"

/* One model of the extrapolation study, loaded and checked before any work. */
typedef struct {
    Options o;               /* the command line with this model's path */
    Setup setup;
    PplVariants pv;
    int *ids, n_ids;
    int first_series;        /* its variants' series in the study */
} StudyModel;

/* Whether variant v can run at `window`; a refusal is noted, not an error:
 * the study shows the scheme's curve where it exists (learned positions end
 * at their table). */
static int study_variant_runs(const StudyModel *sm, int v, int window, int note) {
    const Model *m = &sm->setup.model;
    PeRange r = pe_position_range(&sm->pv.params[v], m->config.seq_len,
                                  m->weights.positional.n_positions, sm->o.pos_offset + window - 1);
    if (r.verdict != PE_RANGE_REFUSED) return 1;
    if (note)
        fprintf(stderr, "note: %s: %s at --ctx %d: %s; not scored (--pe-overflow clamp "
                "would reuse the last position)\n", sm->o.model_path, sm->pv.labels[v], window, r.fact);
    return 0;
}

/* Loads every model, resolves its variants and tokens, and checks every
 * window against the text, the positions and --stride/--keep. */
static StudyModel *load_study(const Options *o, const int *windows, int n_windows) {
    StudyModel *sm = calloc_or_exit((size_t)o->n_models, sizeof *sm, "the study's models");
    for (int m = 0; m < o->n_models; m++) {
        StudyModel *s = &sm[m];
        s->o = *o;
        s->o.model_path = o->model_paths[m];
        setup_open(&s->setup, &s->o, SETUP_TOKENIZER | SETUP_VARIANTS);
        resolve_ppl_variants(&s->o, &s->setup.model, &s->setup.v, &s->pv);
        s->ids = encode_ppl_text(&s->o, &s->setup.tok, &s->n_ids);
        for (int w = 0; w < n_windows; w++) {
            int window = windows[w];
            check_text_length(&s->o, s->n_ids, window);
            if (o->stride > window)
                cli_die("--stride %d must be in 1..%d (the smallest --ctx)", o->stride, window);
            if (o->stream) check_keep(o, window);
            for (int v = 0; v < s->pv.n; v++)
                study_variant_runs(s, v, window, 1);
        }
        /* Extrapolation warnings once per variant, at the largest window it runs. */
        for (int v = 0; v < s->pv.n; v++)
            for (int w = n_windows - 1; w >= 0; w--)
                if (study_variant_runs(s, v, windows[w], 0)) {
                    char label[256];
                    snprintf(label, sizeof label, "%s: %s", s->o.model_path, s->pv.labels[v]);
                    check_positions(&s->setup.model, &s->pv.params[v], label,
                                    o->pos_offset + windows[w] - 1);
                    break;
                }
    }
    return sm;
}

/* One window of one model: the variants that can run there, compared with
 * the baseline (none run when the baseline cannot).  Returns the windows (or
 * stream chunks) scored: fewer than all when Ctrl-C stopped it. */
static long study_window(const Options *o, StudyModel *s, int w, int model_width,
                         PplStudy *study) {
    int window = study->windows[w], n = 0, baseline = -1;
    const char *labels[MAX_VARIANTS + 1];
    PeParams params[MAX_VARIANTS + 1];
    int series[MAX_VARIANTS + 1];
    if (!study_variant_runs(s, s->pv.baseline, window, 0)) return 0;
    for (int v = 0; v < s->pv.n; v++) {
        if (!study_variant_runs(s, v, window, 0)) continue;
        if (v == s->pv.baseline) baseline = n;
        labels[n] = s->pv.labels[v];
        params[n] = s->pv.params[v];
        series[n++] = s->first_series + v;
    }
    char progress_label[64];
    snprintf(progress_label, sizeof progress_label, "%s ctx %d", s->o.model_path, window);
    PplResult res[MAX_VARIANTS + 1];
    score_variants(&s->o, &s->setup.model, labels, params, n, baseline, s->ids, s->n_ids, window,
                   progress_label, NULL, &cli_interrupted, res);
    long scored = res[0].n_chunks;
    for (int v = 0; v < n; v++) {
        PplRow row = {s->o.model_path, model_width, labels[v], window, labels[baseline],
                      v == baseline, s->pv.added, o->stream};
        ppl_report_row(stdout, o->json, &row, &res[v]);
        PplStudySeries *r = &study->series[series[v]];
        ppl_mean_se(res[v].nll_sum, res[v].nll_sq_sum, res[v].n_scored, &r->nll[w], &r->se[w]);
        r->tokens[w] = res[v].n_scored;
        ppl_result_free(&res[v]);
    }
    fflush(stdout);
    return scored;
}

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

/* The extrapolation study: every model (each with its --pe variants) at
 * every window of --ctx; the usual rows with a model column, then the
 * table of mean NLL by window, and --svg/--csv of that table. */
int run_ppl_study(const Options *o) {
    if (o->n_windows == 0) cli_die("several models need --ctx: one window or a list of them");
    const int *windows = o->windows;
    int n_windows = o->n_windows;
    StudyModel *sm = load_study(o, windows, n_windows);
    int n_series = 0, trained = sm[0].setup.model.config.seq_len, model_width = 5;
    for (int m = 0; m < o->n_models; m++) {
        int len = (int)strlen(o->model_paths[m]);
        if (len > model_width) model_width = len;
        sm[m].first_series = n_series;
        n_series += sm[m].pv.n;
        if (sm[m].setup.model.config.seq_len != trained) trained = 0;
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
                     pe_kind_name(sm[m].pv.params[v].kind), sm[m].setup.model.config.seq_len);
        }
    if (!o->json) {
        printf("# study on %s: %d model%s, %s of", ppl_text_title(o), o->n_models,
               o->n_models > 1 ? "s" : "", o->stream ? "streams through a cache" : "windows");
        for (int w = 0; w < n_windows; w++) printf("%s%d", w ? "," : " ", windows[w]);
        printf("%s; each model's variants against its baseline (dnll, kl, top1 as in one run)\n",
               o->stride ? " (sliding)" : "");
        ppl_report_columns(stdout, model_width);
    }
    catch_interrupts(); /* Ctrl-C: the study table of what was scored */
    for (int m = 0; m < o->n_models && !cli_interrupted; m++)
        for (int w = 0; w < n_windows && !cli_interrupted; w++) {
            long scored = study_window(o, &sm[m], w, model_width, &study);
            if (cli_interrupted)
                fprintf(stderr, "note: interrupted in %s at --ctx %d after %ld %s: the study table "
                        "holds what was scored, '-' what was not run\n", o->model_paths[m],
                        windows[w], scored, o->stream ? "chunks" : "windows");
        }
    if (!o->json) ppl_study_print_table(stdout, &study);
    PosencError err;
    if (o->csv_path && ppl_study_write_csv(o->csv_path, &study, &err)) cli_die("--csv: %s", err.msg);
    StudyReport report = {.study = &study};
    snprintf(report.title, sizeof report.title, "Mean NLL by window: %s", ppl_text_title(o));
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
        cli_die("--svg: %s", err.msg);
    if (o->html_path)
        write_html(o, report.title, &(ViewReport){.how_to_read = "Hover a point for its series, "
                   "window, NLL and standard error.", .json = study_report_json,
                   .charts = study_report_charts, .arg = &report});
    ppl_study_free(&study);
    for (int m = 0; m < o->n_models; m++) {
        free(sm[m].ids);
        setup_close(&sm[m].setup);
    }
    free(sm);
    return cli_interrupted ? 128 + SIGINT : EXIT_SUCCESS; /* a shell's status for Ctrl-C */
}
