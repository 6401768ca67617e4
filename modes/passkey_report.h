/* -m passkey's report: the table (or JSON lines), the CSV and the heatmaps
 * (length x depth, one panel per variant) of exact retrieval and of the
 * key's log-probability. */
#ifndef POSENC_MODES_PASSKEY_REPORT_H
#define POSENC_MODES_PASSKEY_REPORT_H

#include <stdio.h>

#include "modes/passkey.h"
#include "modes/plot_svg.h"

/* Every variant's cells on one grid: cells[v][i * n_depths + j] is length
 * i and depth j of variant v. */
typedef struct {
    const int *lengths;
    int n_lengths;
    const double *depths;
    int n_depths;
    const char *const *labels;        /* (n_variants) */
    PasskeyCell *const *cells;        /* (n_variants) */
    int n_variants;
} PasskeyGrid;

void passkey_report_table(FILE *out, const PasskeyGrid *g);
/* One line per cell: {"variant","length","depth","trials","exact","mean_key_logprob"},
 * depth as a fraction; the mean null where nothing was scored. */
void passkey_report_json_lines(FILE *out, const PasskeyGrid *g);
/* The same cells as one JSON array (an HTML page's data). */
void passkey_report_json_array(FILE *out, const PasskeyGrid *g);
int passkey_report_write_csv(const char *path, const PasskeyGrid *g, PosencError *err);
/* Two heatmap figures: "exact" (the share of trials retrieved) and
 * "logprob" (the key's mean log-probability). */
int passkey_report_charts(const SvgSink *sink, const PasskeyGrid *g, PosencError *err);

#endif
