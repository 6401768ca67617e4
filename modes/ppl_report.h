/* -m ppl's report of one run: the table rows (or JSON objects), the CSV of
 * mean NLL by position, the NLL-by-position chart, and the --html page's
 * table and data. */
#ifndef POSENC_MODES_PPL_REPORT_H
#define POSENC_MODES_PPL_REPORT_H

#include <stdio.h>

#include "base/util.h"
#include "modes/perplexity.h"
#include "modes/plot_svg.h"

/* One row: a variant at one window, against the baseline. */
typedef struct {
    const char *model;      /* the study's model column; NULL in a run of one model and window */
    int model_width;        /* that column's width */
    const char *label;      /* the variant */
    int ctx;                /* the window */
    const char *baseline;   /* the baseline's label */
    int is_baseline;
    int baseline_added;     /* the baseline is the checkpoint's scheme, run though not listed */
    int stream;             /* scored as one stream through the cache */
} PplRow;

void ppl_report_columns(FILE *out, int model_width);
void ppl_report_row(FILE *out, int json, const PplRow *row, const PplResult *r);
/* --json's object of the row, without the line's end. */
void ppl_report_row_json(FILE *out, const PplRow *row, const PplResult *r);
/* The rows as an HTML table (the text table's columns and values, the
 * study's model column left out) under `caption`. */
void ppl_report_html_table(FILE *f, const char *caption, const PplRow *rows, const PplResult *res,
                           int n);

/* se: the standard error of the position's mean, empty below 2 tokens. */
int ppl_report_write_csv(const char *path, const char *const *labels, const PplResult *res, int n,
                         PosencError *err);

/* What the chart's title and marker say. */
typedef struct {
    const char *model, *text;
    int trained_ctx;
    int stream;
} PplChartSource;

/* The chart to a file, or (view "nll-by-position") to a sink. */
int ppl_report_write_svg(const char *path, const PplChartSource *src, const char *const *labels,
                         const PplResult *res, int n, PosencError *err);
int ppl_report_sink_svg(const SvgSink *sink, const PplChartSource *src, const char *const *labels,
                        const PplResult *res, int n, PosencError *err);
/* The run as one JSON document, the --html page's data: model, text, ctx
 * (positions in a window), trained_ctx, stream, variants (each its --json
 * object), count_by_position (tokens scored at each position, common to
 * every variant) and nll_by_position (per variant, the mean NLL at each
 * position; null where none was scored). */
void ppl_report_write_json(FILE *out, const PplChartSource *src, const PplRow *rows,
                           const PplResult *res, int n);

#endif
