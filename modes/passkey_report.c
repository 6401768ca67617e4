/* -m passkey's report (modes/passkey_report.h). */
#include "modes/passkey_report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

static const PasskeyCell *cell_at(const PasskeyGrid *g, int v, int i, int j) {
    return &g->cells[v][(size_t)i * g->n_depths + j];
}

static int scored(const PasskeyCell *c) { return !c->skipped && c->trials > 0; }

static double mean_logprob(const PasskeyCell *c) {
    return scored(c) ? c->logprob_sum / c->trials : NAN;
}

static int digits_of(int x) {
    int d = 1;
    while (x >= 10) x /= 10, d++;
    return d;
}

/* One row per variant and length, one column per depth: "exact/trials" and
 * the key's mean log-probability; "-" where the variant cannot encode the
 * length's positions, or no trial was scored. */
void passkey_report_table(FILE *out, const PasskeyGrid *g) {
    int most = 1, label_w = 7;
    for (int v = 0; v < g->n_variants; v++) {
        int w = (int)strlen(g->labels[v]);
        if (w > label_w) label_w = w < 24 ? w : 24;
        for (size_t k = 0; k < (size_t)g->n_lengths * g->n_depths; k++)
            if (g->cells[v][k].trials > most) most = g->cells[v][k].trials;
    }
    int count_w = 2 * digits_of(most) + 1, col_w = count_w + 9;
    fprintf(out, "%-*s %7s", label_w, "variant", "length");
    for (int j = 0; j < g->n_depths; j++) {
        char head[32];
        snprintf(head, sizeof head, "depth %g%%", 100 * g->depths[j]);
        fprintf(out, "  %*s", col_w, head);
    }
    fputc('\n', out);
    for (int v = 0; v < g->n_variants; v++)
        for (int i = 0; i < g->n_lengths; i++) {
            fprintf(out, "%-*.*s %7d", label_w, label_w, g->labels[v], g->lengths[i]);
            for (int j = 0; j < g->n_depths; j++) {
                const PasskeyCell *c = cell_at(g, v, i, j);
                if (!scored(c)) {
                    fprintf(out, "  %*s", col_w, "-");
                    continue;
                }
                char count[32];
                snprintf(count, sizeof count, "%d/%d", c->exact, c->trials);
                fprintf(out, "  %*s %8.3f", count_w, count, mean_logprob(c));
            }
            fputc('\n', out);
        }
}

static void cell_json(FILE *out, const PasskeyGrid *g, int v, int i, int j) {
    const PasskeyCell *c = cell_at(g, v, i, j);
    fputs("{\"variant\":", out);
    json_write_string(out, g->labels[v], strlen(g->labels[v]));
    fprintf(out, ",\"length\":%d,\"depth\":", c->length);
    json_write_number(out, c->depth);
    fprintf(out, ",\"trials\":%d,\"exact\":", c->trials);
    if (scored(c)) fprintf(out, "%d,\"mean_key_logprob\":%.9g}", c->exact, mean_logprob(c));
    else fputs("null,\"mean_key_logprob\":null}", out);
}

void passkey_report_json_lines(FILE *out, const PasskeyGrid *g) {
    for (int v = 0; v < g->n_variants; v++)
        for (int i = 0; i < g->n_lengths; i++)
            for (int j = 0; j < g->n_depths; j++) {
                cell_json(out, g, v, i, j);
                fputc('\n', out);
            }
}

void passkey_report_json_array(FILE *out, const PasskeyGrid *g) {
    fputc('[', out);
    for (int v = 0, first = 1; v < g->n_variants; v++)
        for (int i = 0; i < g->n_lengths; i++)
            for (int j = 0; j < g->n_depths; j++) {
                if (!first) fputc(',', out);
                first = 0;
                cell_json(out, g, v, i, j);
            }
    fputs("]\n", out);
}

int passkey_report_write_csv(const char *path, const PasskeyGrid *g, PosencError *err) {
    FILE *f = fopen(path, "w");
    if (!f) return posenc_error(err, "cannot write '%s': %s", path, strerror(errno));
    fprintf(f, "variant,length,depth,trials,exact,mean_key_logprob\n");
    for (int v = 0; v < g->n_variants; v++)
        for (int i = 0; i < g->n_lengths; i++)
            for (int j = 0; j < g->n_depths; j++) {
                const PasskeyCell *c = cell_at(g, v, i, j);
                fprintf(f, "\"%s\",%d,%g,%d,", g->labels[v], c->length, c->depth, c->trials);
                if (scored(c)) fprintf(f, "%d,%.9g\n", c->exact, mean_logprob(c));
                else fprintf(f, ",\n");
            }
    if (fclose(f) != 0) return posenc_error(err, "error writing '%s'", path);
    return 0;
}

/* The panels of one measure: value(cell) in each, the exact counts written in
 * the cells. */
static int grid_heatmaps(const SvgSink *sink, const PasskeyGrid *g, const char *view,
                         const char *title, const char *subtitle, int exact, PosencError *err) {
    int rows = g->n_lengths, cols = g->n_depths;
    size_t n = (size_t)rows * cols;
    SvgHeatmap *panels = calloc_or_exit((size_t)g->n_variants, sizeof *panels, "the heatmap panels");
    double *values = malloc_or_exit((size_t)g->n_variants * n * sizeof(double), "the heatmaps");
    char (*text)[24] = malloc_or_exit((size_t)g->n_variants * n * sizeof *text, "the cells' text");
    const char **cell_text = malloc_or_exit((size_t)g->n_variants * n * sizeof *cell_text, "the cells' text");
    char (*row_text)[16] = malloc_or_exit((size_t)rows * sizeof *row_text, "the lengths");
    char (*col_text)[16] = malloc_or_exit((size_t)cols * sizeof *col_text, "the depths");
    const char **row_names = malloc_or_exit((size_t)rows * sizeof *row_names, "the lengths");
    const char **col_names = malloc_or_exit((size_t)cols * sizeof *col_names, "the depths");
    for (int i = 0; i < rows; i++) {
        snprintf(row_text[i], sizeof row_text[i], "%d", g->lengths[i]);
        row_names[i] = row_text[i];
    }
    for (int j = 0; j < cols; j++) {
        snprintf(col_text[j], sizeof col_text[j], "%g%%", 100 * g->depths[j]);
        col_names[j] = col_text[j];
    }
    for (int v = 0; v < g->n_variants; v++) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) {
                size_t at = (size_t)v * n + (size_t)i * cols + j;
                const PasskeyCell *c = cell_at(g, v, i, j);
                values[at] = !scored(c) ? NAN : exact ? (double)c->exact / c->trials : mean_logprob(c);
                if (!scored(c)) snprintf(text[at], sizeof text[at], "-");
                else if (exact) snprintf(text[at], sizeof text[at], "%d/%d", c->exact, c->trials);
                else snprintf(text[at], sizeof text[at], "%.2f", mean_logprob(c));
                cell_text[at] = text[at];
            }
        panels[v] = (SvgHeatmap){.label = g->labels[v], .x_label = "depth of the key",
                                 .y_label = "length (tokens)", .v = values + (size_t)v * n,
                                 .rows = rows, .cols = cols, .row_names = row_names,
                                 .col_names = col_names, .cell_text = cell_text + (size_t)v * n};
    }
    int rc = svg_sink_heatmaps(sink, NULL, view, title, subtitle, panels, g->n_variants, err);
    free(panels);
    free(values);
    free(text);
    free(cell_text);
    free(row_text);
    free(col_text);
    free(row_names);
    free(col_names);
    return rc;
}

int passkey_report_charts(const SvgSink *sink, const PasskeyGrid *g, PosencError *err) {
    if (grid_heatmaps(sink, g, "exact", "Passkey retrieval: share of trials retrieved exactly",
                      "a trial counts when every key token is the most probable one; blank: "
                      "positions the variant cannot encode", 1, err))
        return -1;
    return grid_heatmaps(sink, g, "logprob", "Passkey retrieval: the key's log-probability",
                         "sum over the key's tokens, mean over the trials (0: certain)", 0, err);
}
