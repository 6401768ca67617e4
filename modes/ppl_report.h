/* -m ppl's report of one run: the table rows (or JSON objects), the CSV of
 * mean NLL by position and the NLL-by-position chart. */
#ifndef POSENC_MODES_PPL_REPORT_H
#define POSENC_MODES_PPL_REPORT_H

#include <stdio.h>

#include "base/util.h"
#include "modes/perplexity.h"

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

/* se: the standard error of the position's mean, empty below 2 tokens. */
int ppl_report_write_csv(const char *path, const char *const *labels, const PplResult *res, int n,
                         PosencError *err);

/* What the chart's title and marker say. */
typedef struct {
    const char *model, *text;
    int trained_ctx;
    int stream;
} PplChartSource;

int ppl_report_write_svg(const char *path, const PplChartSource *src, const char *const *labels,
                         const PplResult *res, int n, PosencError *err);

#endif
