/* A self-contained SVG line chart: NLL against position, one curve per
 * variant, with axes, ticks, a legend and a marker at the trained context. */
#ifndef POSENC_PLOT_SVG_H
#define POSENC_PLOT_SVG_H
#include "model/util.h"

typedef struct {
    const char *label;
    const double *y;   /* (n) values; NAN where there is no data */
    int n;
} SvgSeries;

int svg_write_curves(const char *path, const char *title, const char *x_label,
                     const char *y_label, const SvgSeries *series, int n_series,
                     int marker_x, const char *marker_label, PosencError *err);
#endif
