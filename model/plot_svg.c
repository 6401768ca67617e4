#include "model/plot_svg.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 860
#define H 500
#define LEFT 70
#define RIGHT 200
#define TOP 50
#define BOTTOM 60

static const char *const COLORS[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                     "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

/* A "nice" tick step (1, 2 or 5 times a power of ten) for about 6 ticks. */
static double tick_step(double span) {
    double raw = span / 6.0, mag = pow(10.0, floor(log10(raw)));
    double r = raw / mag;
    return mag * (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10);
}

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

int svg_write_curves(const char *path, const char *title, const char *x_label,
                     const char *y_label, const SvgSeries *series, int n_series,
                     int marker_x, const char *marker_label, PosencError *err) {
    double ymin = INFINITY, ymax = -INFINITY;
    int xmax = 1;
    for (int s = 0; s < n_series; s++) {
        if (series[s].n > xmax) xmax = series[s].n;
        for (int i = 0; i < series[s].n; i++)
            if (!isnan(series[s].y[i])) {
                ymin = fmin(ymin, series[s].y[i]);
                ymax = fmax(ymax, series[s].y[i]);
            }
    }
    if (!(ymin <= ymax)) return posenc_error(err, "--svg: no data to plot");
    if (ymax - ymin < 1e-9) ymax = ymin + 1.0;
    double ystep = tick_step(ymax - ymin);
    ymin = floor(ymin / ystep) * ystep;
    ymax = ceil(ymax / ystep) * ystep;
    FILE *f = fopen(path, "w");
    if (!f) return posenc_error(err, "--svg: cannot write '%s': %s", path, strerror(errno));

    double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
#define SX(x) (LEFT + (double)(x) / xmax * pw)
#define SY(y) (TOP + (1.0 - ((y) - ymin) / (ymax - ymin)) * ph)
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"28\" font-size=\"16\">", LEFT);
    xml_text(f, title);
    fprintf(f, "</text>\n");
    double xstep = tick_step(xmax);
    for (double x = 0; x <= xmax + 1e-9; x += xstep)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
                SX(x), TOP, SX(x), H - BOTTOM, SX(x), H - BOTTOM + 18, x);
    for (double y = ymin; y <= ymax + 1e-9; y += ystep)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                LEFT, SY(y), W - RIGHT, SY(y), LEFT - 6, SY(y) + 4, y);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
               "stroke=\"black\"/>\n", LEFT, TOP, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", LEFT + pw / 2, H - 15);
    xml_text(f, x_label);
    fprintf(f, "</text>\n<text transform=\"translate(18,%.1f) rotate(-90)\" "
               "text-anchor=\"middle\">", TOP + ph / 2);
    xml_text(f, y_label);
    fprintf(f, "</text>\n");
    if (marker_x > 0 && marker_x < xmax) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\" "
                   "stroke-dasharray=\"6,4\"/><text x=\"%.1f\" y=\"%d\">",
                SX(marker_x), TOP, SX(marker_x), H - BOTTOM, SX(marker_x) + 4, TOP + 14);
        xml_text(f, marker_label);
        fprintf(f, "</text>\n");
    }
    for (int s = 0; s < n_series; s++) {
        const char *color = COLORS[s % 8];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
        for (int i = 0; i < series[s].n; i++)
            if (!isnan(series[s].y[i])) fprintf(f, "%.1f,%.1f ", SX(i + 0.5), SY(series[s].y[i]));
        fprintf(f, "\"/>\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                   "stroke-width=\"3\"/><text x=\"%d\" y=\"%d\">",
                W - RIGHT + 15, TOP + 10 + 20 * s, W - RIGHT + 40, TOP + 10 + 20 * s, color,
                W - RIGHT + 46, TOP + 14 + 20 * s);
        xml_text(f, series[s].label);
        fprintf(f, "</text>\n");
    }
#undef SX
#undef SY
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) return posenc_error(err, "--svg: error writing '%s'", path);
    return 0;
}
