/* -m ppl's report of one run (modes/ppl_report.h). */
#include "modes/ppl_report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "modes/plot_svg.h"

/* Mean NLL by position, smoothed by a centred moving average over
 * 2*half+1 positions (each position weighted by how often it was scored). */
static double *nll_curve(const PplResult *r, int half) {
    double *y = malloc_or_exit((size_t)r->n_pos * sizeof(double), "the NLL curve");
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

int ppl_report_write_csv(const char *path, const char *const *labels, const PplResult *res, int n,
                         PosencError *err) {
    FILE *f = fopen(path, "w");
    if (!f) return posenc_error(err, "cannot write '%s': %s", path, strerror(errno));
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
    if (fclose(f) != 0) return posenc_error(err, "error writing '%s'", path);
    return 0;
}

/* A position scored fewer times than this share of the most-scored one
 * (the early positions of a --stride run, the positions a --stream only
 * passes once) is drawn faint: its mean rests on few tokens. */
#define FAINT_BELOW_PERCENT 10

/* The chart and where it goes: a file (path) or a sink. */
static int position_chart(const char *path, const SvgSink *sink, const PplChartSource *src,
                          const char *const *labels, const PplResult *res, int n,
                          PosencError *err) {
    /* Every variant scores the same predictions: the counts are common. */
    int n_pos = res[0].n_pos, half = n_pos > 256 ? n_pos / 256 : 0;
    long most = 0;
    for (int i = 0; i < n_pos; i++)
        if (res[0].count_by_pos[i] > most) most = res[0].count_by_pos[i];
    long too_few = (most * FAINT_BELOW_PERCENT + 99) / 100;
    unsigned char *faint = malloc_or_exit((size_t)n_pos, "the sparse-position marks");
    int n_faint = 0;
    for (int i = 0; i < n_pos; i++) n_faint += faint[i] = res[0].count_by_pos[i] < too_few;

    SvgSeries *series = calloc_or_exit((size_t)n, sizeof *series, "the chart's curves");
    char (*notes)[128] = calloc_or_exit((size_t)n, sizeof *notes, "the chart's notes");
    for (int v = 0; v < n; v++) {
        double nll, se;
        ppl_mean_se(res[v].nll_sum, res[v].nll_sq_sum, res[v].n_scored, &nll, &se);
        snprintf(notes[v], sizeof notes[v], "mean NLL %.4f \u00b1 %.4f, ctx %d, %ld %s", nll, se,
                 n_pos, res[v].n_chunks, src->stream ? "chunks" : "windows");
        series[v] = (SvgSeries){.label = labels[v], .note = notes[v],
                                .y = nll_curve(&res[v], half), .faint = faint, .n = n_pos};
    }
    char title[512], subtitle[128], footnote[160], marker[64];
    snprintf(title, sizeof title, "NLL by position: %s, %s", src->model, src->text);
    if (half)
        snprintf(subtitle, sizeof subtitle, "each curve: centred moving average over %d positions",
                 2 * half + 1);
    else
        snprintf(subtitle, sizeof subtitle, "each curve: mean NLL at every position (no "
                 "smoothing)");
    snprintf(footnote, sizeof footnote, "faint, dashed, cut at the frame: positions scored fewer "
             "than %ld times (%d%% of the most-scored position's %ld)", too_few,
             FAINT_BELOW_PERCENT, most);
    snprintf(marker, sizeof marker, "trained context %d", src->trained_ctx);
    SvgChart chart = {.title = title, .subtitle = subtitle,
                      .x_label = "position within the window", .y_label = "mean NLL (nats/token)",
                      .footnote = n_faint ? footnote : NULL, .marker_x = src->trained_ctx,
                      .marker_label = marker};
    int rc = path ? svg_write_curves(path, &chart, series, n, err)
                  : svg_sink_curves(sink, NULL, "nll-by-position", &chart, series, n, err);
    for (int v = 0; v < n; v++) free((void *)series[v].y);
    free(series);
    free(notes);
    free(faint);
    return rc;
}

int ppl_report_write_svg(const char *path, const PplChartSource *src, const char *const *labels,
                         const PplResult *res, int n, PosencError *err) {
    return position_chart(path, NULL, src, labels, res, n, err);
}

int ppl_report_sink_svg(const SvgSink *sink, const PplChartSource *src, const char *const *labels,
                        const PplResult *res, int n, PosencError *err) {
    return position_chart(NULL, sink, src, labels, res, n, err);
}

/* The table is at most 100 columns wide (without the study's model column);
 * seconds are in --json. */
#define LABEL_WIDTH 18

/* The columns after the variant's label, as the text table right-aligns
 * them in these widths and the HTML table shows them. */
enum { N_CELLS = 10, CELL_CHARS = 64 }; /* ppl's digits fill 64 only past 140 nats a token */
static const char *const CELL_NAMES[N_CELLS] = {"ctx", "tokens", "nll", "se", "ppl", "dnll", "se",
                                                "kl", "top1", "tok/s"};
static const int CELL_WIDTHS[N_CELLS] = {5, 8, 7, 6, 8, 8, 6, 7, 6, 7};

/* The baseline's own row shows "baseline" and leaves the comparison empty. */
static void row_cells(const PplRow *row, const PplResult *r, char cells[N_CELLS][CELL_CHARS]) {
    double nll, se, diff, diff_se, n = (double)r->n_scored;
    ppl_mean_se(r->nll_sum, r->nll_sq_sum, r->n_scored, &nll, &se);
    ppl_mean_se(r->diff_sum, r->diff_sq_sum, r->n_scored, &diff, &diff_se);
    snprintf(cells[0], sizeof cells[0], "%d", row->ctx);
    snprintf(cells[1], sizeof cells[1], "%ld", r->n_scored);
    snprintf(cells[2], sizeof cells[2], "%.4f", nll);
    snprintf(cells[3], sizeof cells[3], "%.4f", se);
    snprintf(cells[4], sizeof cells[4], "%.3f", exp(nll));
    if (row->is_baseline) {
        snprintf(cells[5], sizeof cells[5], "baseline");
        cells[6][0] = cells[7][0] = cells[8][0] = '\0';
    } else {
        snprintf(cells[5], sizeof cells[5], "%+.4f", diff);
        snprintf(cells[6], sizeof cells[6], "%.4f", diff_se);
        snprintf(cells[7], sizeof cells[7], "%.4f", n > 0 ? r->kl_sum / n : 0.0);
        snprintf(cells[8], sizeof cells[8], "%.4f", n > 0 ? r->top1_agree / n : 0.0);
    }
    snprintf(cells[9], sizeof cells[9], "%.0f", n / r->seconds);
}

void ppl_report_row_json(FILE *out, const PplRow *row, const PplResult *r) {
    const char *model = row->model, *label = row->label, *baseline = row->baseline;
    double nll, se, diff, diff_se, n = (double)r->n_scored;
    ppl_mean_se(r->nll_sum, r->nll_sq_sum, r->n_scored, &nll, &se);
    ppl_mean_se(r->diff_sum, r->diff_sq_sum, r->n_scored, &diff, &diff_se);
    double kl = n > 0 ? r->kl_sum / n : 0.0, top1 = n > 0 ? r->top1_agree / n : 0.0;
    fputs("{", out);
    if (model) {
        fputs("\"model\":", out);
        json_write_string(out, model, strlen(model));
        fputs(",", out);
    }
    fputs("\"pe\":", out);
    json_write_string(out, label, strlen(label));
    fprintf(out, ",\"ctx\":%d,\"tokens\":%ld,\"chunks\":%ld,\"nll\":%.9g,\"nll_se\":%.9g,"
           "\"ppl\":%.9g,\"baseline\":", row->ctx, r->n_scored, r->n_chunks, nll, se, exp(nll));
    json_write_string(out, baseline, strlen(baseline));
    fprintf(out, ",\"baseline_added\":%s,\"nll_diff\":%.9g,\"nll_diff_se\":%.9g,\"kl\":%.9g,"
           "\"top1_agree\":%.9g,\"seconds\":%.3f,\"tok_s\":%.1f,\"stream\":%s}",
           row->baseline_added ? "true" : "false", diff, diff_se, kl, top1, r->seconds,
           n / r->seconds, row->stream ? "true" : "false");
}

void ppl_report_row(FILE *out, int json, const PplRow *row, const PplResult *r) {
    if (json) {
        ppl_report_row_json(out, row, r);
        fputc('\n', out);
        return;
    }
    const char *model = row->model, *label = row->label;
    if (model) fprintf(out, "%-*s ", row->model_width, model);
    /* a label wider than its column gets a line of its own: the columns stay aligned */
    if ((int)strlen(label) > LABEL_WIDTH)
        fprintf(out, "%s\n%*s", label, (model ? row->model_width + 1 : 0) + LABEL_WIDTH, "");
    else
        fprintf(out, "%-*s", LABEL_WIDTH, label);
    char cells[N_CELLS][CELL_CHARS];
    row_cells(row, r, cells);
    for (int c = 0; c < N_CELLS; c++) fprintf(out, " %*s", CELL_WIDTHS[c], cells[c]);
    fputc('\n', out);
}

void ppl_report_columns(FILE *out, int model_width) {
    if (model_width) fprintf(out, "%-*s ", model_width, "model");
    fprintf(out, "%-*s", LABEL_WIDTH, "variant");
    for (int c = 0; c < N_CELLS; c++) fprintf(out, " %*s", CELL_WIDTHS[c], CELL_NAMES[c]);
    fputc('\n', out);
}

void ppl_report_html_table(FILE *f, const char *caption, const PplRow *rows, const PplResult *res,
                           int n) {
    fputs("<table class=\"ppl\">\n<caption>", f);
    svg_escape_text(f, caption);
    fputs("</caption>\n<thead><tr><th>variant</th>", f);
    for (int c = 0; c < N_CELLS; c++) fprintf(f, "<th>%s</th>", CELL_NAMES[c]);
    fputs("</tr></thead>\n<tbody>\n", f);
    for (int v = 0; v < n; v++) {
        char cells[N_CELLS][CELL_CHARS];
        row_cells(&rows[v], &res[v], cells);
        fputs("<tr><td>", f);
        svg_escape_text(f, rows[v].label);
        fputs("</td>", f);
        for (int c = 0; c < N_CELLS; c++) fprintf(f, "<td>%s</td>", cells[c]);
        fputs("</tr>\n", f);
    }
    fputs("</tbody>\n</table>\n", f);
}

void ppl_report_write_json(FILE *out, const PplChartSource *src, const PplRow *rows,
                           const PplResult *res, int n) {
    fputs("{\"model\": ", out);
    json_write_string(out, src->model, strlen(src->model));
    fputs(", \"text\": ", out);
    json_write_string(out, src->text, strlen(src->text));
    fprintf(out, ", \"ctx\": %d, \"trained_ctx\": %d, \"stream\": %s, \"variants\": [",
            res[0].n_pos, src->trained_ctx, src->stream ? "true" : "false");
    for (int v = 0; v < n; v++) {
        fputs(v ? ",\n  " : "\n  ", out);
        ppl_report_row_json(out, &rows[v], &res[v]);
    }
    fputs("],\n \"count_by_position\": [", out);
    for (int i = 0; i < res[0].n_pos; i++) fprintf(out, "%s%ld", i ? "," : "", res[0].count_by_pos[i]);
    fputs("],\n \"nll_by_position\": [", out);
    double *mean = malloc_or_exit((size_t)res[0].n_pos * sizeof *mean, "the NLL by position");
    for (int v = 0; v < n; v++) {
        for (int i = 0; i < res[v].n_pos; i++)
            mean[i] = res[v].count_by_pos[i] ? res[v].nll_by_pos[i] / res[v].count_by_pos[i] : NAN;
        fputs(v ? ",\n  " : "\n  ", out);
        json_write_doubles(out, mean, (size_t)res[v].n_pos);
    }
    free(mean);
    fputs("]}\n", out);
}
