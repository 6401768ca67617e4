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

/* s with <, >, & and " as entities: text or an attribute value of XML and HTML. */
void svg_escape_text(FILE *f, const char *s);

/* The chart to `f`, or -1 with the reason (no data). */
int svg_print_curves(FILE *f, const SvgChart *chart, const SvgSeries *series, int n_series,
                     PosencError *err);
/* The same to the file `path` (none is left when it fails). */
int svg_write_curves(const char *path, const SvgChart *chart, const SvgSeries *series,
                     int n_series, PosencError *err);

/* One heatmap panel: rows x cols values, row 0 at the top, column 0 at the
 * left. */
typedef struct {
    const char *label;           /* above the panel */
    const char *x_label, *y_label;
    const double *v;             /* (rows, cols); NAN: no value (a masked cell), left blank */
    int rows, cols;
    /* Optional: the rows' and columns' names (tokens, lengths, depths), as
     * ticks (every k-th when they would crowd) and in each cell's title;
     * NULL: the first and last index.  cell_text: (rows, cols) words written
     * in the cells, when they are wide enough to hold them; NULL: none. */
    const char *const *row_names, *const *col_names;
    const char *const *cell_text;
} SvgHeatmap;

/* Panels in a grid, one colour scale for all, drawn as a bar with its ends
 * labelled: white at 0, blue below it and red above, when any value is
 * negative; else white to blue.  Each cell is a rect whose title holds its value. */
int svg_print_heatmaps(FILE *f, const char *title, const char *subtitle,
                       const SvgHeatmap *panels, int n_panels, PosencError *err);

/* Where a view's charts go: files PREFIX-VIEW.svg and PREFIX-VARIANT-VIEW.svg
 * (each named on `written` when not NULL), or, when html is set, figures
 * of one HTML page (<figure class="chart" data-view data-variant>). */
typedef struct {
    const char *prefix;
    FILE *written;
    FILE *html;
} SvgSink;
/* One chart of `view` (and `label`, the variant, or NULL) to the sink. */
int svg_sink_curves(const SvgSink *s, const char *label, const char *view, const SvgChart *chart,
                    const SvgSeries *series, int n_series, PosencError *err);
int svg_sink_heatmaps(const SvgSink *s, const char *label, const char *view, const char *title,
                      const char *subtitle, const SvgHeatmap *panels, int n_panels,
                      PosencError *err);
#endif
