/* A self-contained SVG line chart: one curve per series (NLL against
 * position, or against the window), with axes, ticks, a legend, a marker
 * at the trained context in the top margin, and faint dashed stretches
 * where a curve rests on too few samples to be read like the rest. */
#ifndef POSENC_PLOT_SVG_H
#define POSENC_PLOT_SVG_H
#include <stdio.h>

#include "base/util.h"

typedef struct {
    const char *label;
    const char *note;            /* second legend line, or NULL */
    const double *x;             /* (n) x values, or NULL: point i is drawn at i + 0.5 */
    const double *y;             /* (n) values; NAN where there is no data */
    const unsigned char *faint;  /* (n) nonzero: drawn faint and dashed; or NULL */
    int n;
} SvgSeries;

typedef struct {
    const char *title;
    const char *subtitle;        /* under the title (e.g. the smoothing), or NULL */
    const char *x_label, *y_label;
    const char *footnote;        /* under the x axis label (e.g. what faint means), or NULL */
    int log2_x;                  /* x on a log2 scale, ticks at powers of two (x > 0) */
    int marker_x;                /* a dashed vertical line here, if inside the x range */
    const char *marker_label;    /* written above the plot, clear of every curve */
} SvgChart;

int svg_write_curves(const char *path, const SvgChart *chart, const SvgSeries *series,
                     int n_series, PosencError *err);

/* One heatmap panel: rows x cols values, row 0 at the top, column 0 at the
 * left. */
typedef struct {
    const char *label;           /* above the panel */
    const char *x_label, *y_label;
    const double *v;             /* (rows, cols); NAN: no value (a masked cell), left blank */
    int rows, cols;
} SvgHeatmap;

/* Panels in a grid, one colour scale for all, drawn as a bar with its ends
 * labelled: white at 0, blue below it and red above, when any value is
 * negative; else white to blue.  Each cell is a rect whose title holds its value. */
int svg_write_heatmaps(const char *path, const char *title, const char *subtitle,
                       const SvgHeatmap *panels, int n_panels, PosencError *err);

/* A view's chart file: PREFIX-LABEL-VIEW.svg (PREFIX-VIEW.svg for a NULL
 * label); a variant label's ':' (rope:ntk:4) is kept. */
void svg_chart_path(char *buf, size_t n, const char *prefix, const char *label, const char *view);
/* rc of a chart writer, after naming the file on `written` when it was
 * written (and `written` is not NULL). */
int svg_report_written(FILE *written, const char *path, int rc);
#endif
