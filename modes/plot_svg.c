#include "modes/plot_svg.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 1040
#define LEFT 70
#define RIGHT 330     /* the legend */
#define TOP 80        /* title, subtitle, then the marker label */
#define BOTTOM 80     /* tick labels, axis label, footnote */
#define MIN_PLOT_H 380
#define LEGEND_ROW 34 /* label line and note line */

static const char *const COLORS[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                     "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

/* A "nice" tick step (1, 2 or 5 times a power of ten) for about 6 ticks. */
static double tick_step(double span) {
    double raw = span / 6.0, mag = pow(10.0, floor(log10(raw)));
    double r = raw / mag;
    return mag * (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10);
}

void svg_escape_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* <text> at (x, y) with extra attributes. */
static void text_at(FILE *f, double x, double y, const char *attrs, const char *s) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\"%s%s>", x, y, *attrs ? " " : "", attrs);
    svg_escape_text(f, s);
    fputs("</text>\n", f);
}

typedef struct {
    double xmin, xmax, ymin, ymax, plot_w, plot_h;
    int log2_x;
} Frame;

static double sx(const Frame *fr, double x) {
    if (fr->log2_x)
        return LEFT + (log2(x) - log2(fr->xmin)) / (log2(fr->xmax) - log2(fr->xmin)) * fr->plot_w;
    return LEFT + (x - fr->xmin) / (fr->xmax - fr->xmin) * fr->plot_w;
}
static double sy(const Frame *fr, double y) {
    return TOP + (1.0 - (y - fr->ymin) / (fr->ymax - fr->ymin)) * fr->plot_h;
}

static int faint_at(const SvgSeries *s, int i) { return s->faint && s->faint[i]; }
static double x_at(const SvgSeries *s, int i) { return s->x ? s->x[i] : i + 0.5; }

/* The curve as polylines: a new one wherever the data stops or the style
 * changes; a change of style shares its point so the curve stays joined. */
static void draw_curve(FILE *f, const Frame *fr, const SvgSeries *s, const char *color) {
    int start = -1;
    for (int i = 0; i <= s->n; i++) {
        int has = i < s->n && !isnan(s->y[i]);
        if (start >= 0 && (!has || faint_at(s, i) != faint_at(s, start))) {
            int last = has ? i : i - 1;
            const char *style = faint_at(s, start)
                                    ? " stroke-dasharray=\"4,3\" stroke-opacity=\"0.4\"" : "";
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"",
                    color, style);
            for (int j = start; j <= last; j++)
                fprintf(f, "%.1f,%.1f ", sx(fr, x_at(s, j)), sy(fr, s->y[j]));
            fputs("\"/>\n", f);
            start = has ? i : -1;
        } else if (start < 0 && has) {
            start = i;
        }
    }
}

/* Series with their own x values are a few measurements: each is marked,
 * its values in its title (a viewer's tooltip). */
static void draw_points(FILE *f, const Frame *fr, const SvgSeries *s, const char *color) {
    if (!s->x) return;
    for (int i = 0; i < s->n; i++)
        if (!isnan(s->y[i])) {
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>",
                    sx(fr, s->x[i]), sy(fr, s->y[i]), color);
            svg_escape_text(f, s->label);
            fprintf(f, ": %.6g, %.6g</title></circle>\n", s->x[i], s->y[i]);
        }
}

/* The x range: [0, longest series] for index positions; else the data's,
 * widened when it is one value. */
static void x_range(Frame *fr, const SvgSeries *series, int n_series) {
    fr->xmin = series[0].x ? INFINITY : 0.0;
    fr->xmax = series[0].x ? -INFINITY : 1.0;
    for (int s = 0; s < n_series; s++)
        for (int i = 0; i < series[s].n; i++) {
            if (series[s].x) fr->xmin = fmin(fr->xmin, series[s].x[i]);
            fr->xmax = fmax(fr->xmax, series[s].x ? series[s].x[i] : series[s].n);
        }
    if (fr->xmax > fr->xmin) return;
    if (fr->log2_x) fr->xmin /= 2, fr->xmax *= 2;
    else fr->xmin -= 1, fr->xmax += 1;
}

/* Vertical grid lines and their labels: "nice" steps, or powers of two. */
static void x_ticks(FILE *f, const Frame *fr, double bottom) {
    double step = fr->log2_x ? 0.0 : tick_step(fr->xmax - fr->xmin);
    double x = fr->log2_x ? exp2(ceil(log2(fr->xmin) - 1e-9)) : ceil(fr->xmin / step) * step;
    for (; x <= fr->xmax * (1 + 1e-9); x = fr->log2_x ? 2 * x : x + step)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                sx(fr, x), TOP, sx(fr, x), bottom, sx(fr, x), bottom + 18, x);
}

/* The y range of the points drawn solid (or of all, when every one is
 * faint): a few noisy faint points must not squash the curves that matter. */
static void y_range(Frame *fr, const SvgSeries *series, int n_series, int faint_too) {
    for (int s = 0; s < n_series; s++)
        for (int i = 0; i < series[s].n; i++)
            if (!isnan(series[s].y[i]) && (faint_too || !faint_at(&series[s], i))) {
                fr->ymin = fmin(fr->ymin, series[s].y[i]);
                fr->ymax = fmax(fr->ymax, series[s].y[i]);
            }
}

int svg_print_curves(FILE *f, const SvgChart *c, const SvgSeries *series, int n_series,
                     PosencError *err) {
    if (n_series < 1) return posenc_error(err, "no data to plot");
    Frame fr = {0, 0, INFINITY, -INFINITY, W - LEFT - RIGHT, MIN_PLOT_H, c->log2_x};
    x_range(&fr, series, n_series);
    y_range(&fr, series, n_series, 0);
    if (!(fr.ymin <= fr.ymax)) y_range(&fr, series, n_series, 1);
    if (!(fr.ymin <= fr.ymax)) return posenc_error(err, "no data to plot");
    if (fr.ymax - fr.ymin < 1e-9) fr.ymax = fr.ymin + 1.0;
    double ystep = tick_step(fr.ymax - fr.ymin);
    fr.ymin = floor(fr.ymin / ystep) * ystep;
    fr.ymax = ceil(fr.ymax / ystep) * ystep;
    if (fr.plot_h < LEGEND_ROW * n_series) fr.plot_h = LEGEND_ROW * n_series; /* legend room */
    int H = TOP + (int)fr.plot_h + BOTTOM;
    double bottom = TOP + fr.plot_h;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<clipPath id=\"plot-area\"><rect x=\"%d\" y=\"%d\" width=\"%.0f\" "
               "height=\"%.0f\"/></clipPath>\n", LEFT, TOP, fr.plot_w, fr.plot_h);
    text_at(f, LEFT, 26, "font-size=\"16\"", c->title);
    if (c->subtitle) text_at(f, LEFT, 46, "", c->subtitle);
    x_ticks(f, &fr, bottom);
    for (double y = fr.ymin; y <= fr.ymax + 1e-9; y += ystep)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                LEFT, sy(&fr, y), W - RIGHT, sy(&fr, y), LEFT - 6, sy(&fr, y) + 4, y);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
               "stroke=\"black\"/>\n", LEFT, TOP, fr.plot_w, fr.plot_h);
    text_at(f, LEFT + fr.plot_w / 2, bottom + 38, "text-anchor=\"middle\"", c->x_label);
    char rotate[64];
    snprintf(rotate, sizeof rotate, "transform=\"rotate(-90 18 %.1f)\" text-anchor=\"middle\"",
             TOP + fr.plot_h / 2);
    text_at(f, 18, TOP + fr.plot_h / 2, rotate, c->y_label);
    if (c->footnote) text_at(f, LEFT, bottom + 62, "font-size=\"11\" fill=\"#555\"", c->footnote);
    if (c->marker_x > fr.xmin && c->marker_x < fr.xmax) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" "
                   "stroke-dasharray=\"6,4\"/>\n", sx(&fr, c->marker_x), TOP - 4,
                sx(&fr, c->marker_x), bottom);
        text_at(f, sx(&fr, c->marker_x), TOP - 8, "text-anchor=\"middle\"", c->marker_label);
    }
    for (int s = 0; s < n_series; s++) {
        const char *color = COLORS[s % 8];
        double ly = TOP + 12 + LEGEND_ROW * s, lx = W - RIGHT + 15;
        fputs("<g class=\"series\">\n<g clip-path=\"url(#plot-area)\">\n", f);
        draw_curve(f, &fr, &series[s], color);
        draw_points(f, &fr, &series[s], color);
        fputs("</g>\n", f);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"3\"/>\n", lx, ly - 4, lx + 25, ly - 4, color);
        text_at(f, lx + 31, ly, "class=\"legend\"", series[s].label);
        if (series[s].note)
            text_at(f, lx + 31, ly + 14, "class=\"legend-note\" font-size=\"11\"", series[s].note);
        fputs("</g>\n", f);
    }
    fprintf(f, "</svg>\n");
    return 0;
}

#define PANEL 300     /* a heatmap panel's side */
#define PANEL_GAP 90  /* room for the axis labels between panels */
#define PANELS_PER_ROW 3

/* The colour of v on the scale [lo, hi]: white at 0, blue below, red
 * above, when any value is negative; else white to blue. */
static void heat_colour(double v, double lo, double hi, char out[8]) {
    double r, g, b;
    if (lo < 0) {
        double t = v < 0 ? -v / -lo : v / hi; /* 0 at white, 1 at full colour */
        if (v < 0) r = 1 - t, g = 1 - 0.6 * t, b = 1;
        else r = 1, g = 1 - 0.8 * t, b = 1 - 0.8 * t;
    } else {
        double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
        r = 1 - 0.9 * t, g = 1 - 0.6 * t, b = 1 - 0.2 * t;
    }
    snprintf(out, 8, "#%02x%02x%02x", (int)(255 * r + 0.5), (int)(255 * g + 0.5),
             (int)(255 * b + 0.5));
}

/* Every k-th of n names, k the smallest that keeps `room` pixels for each. */
static int name_step(int n, double cell, double room) {
    int k = 1;
    while (k < n && cell * k < room) k++;
    return k;
}

static void heat_panel(FILE *f, const SvgHeatmap *p, double x0, double y0, double lo, double hi) {
    double cw = (double)PANEL / p->cols, ch = (double)PANEL / p->rows;
    fputs("<g class=\"panel\">\n", f);
    text_at(f, x0, y0 - 8, "class=\"panel-label\"", p->label);
    for (int r = 0; r < p->rows; r++)
        for (int c = 0; c < p->cols; c++) {
            size_t at = (size_t)r * p->cols + c;
            double v = p->v[at];
            if (isnan(v)) continue;
            char colour[8];
            heat_colour(v, lo, hi, colour);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\">"
                       "<title>", x0 + c * cw, y0 + r * ch, cw + 0.1, ch + 0.1, colour);
            if (p->row_names && p->col_names) {
                svg_escape_text(f, p->row_names[r]);
                fputs(", ", f);
                svg_escape_text(f, p->col_names[c]);
            } else {
                fprintf(f, "%d,%d", r, c);
            }
            fprintf(f, ": %.4g</title></rect>\n", v);
            /* about 7 pixels a character at font-size 12 */
            if (p->cell_text && cw >= 7.0 * (double)strlen(p->cell_text[at]) + 4 && ch >= 14)
                text_at(f, x0 + (c + 0.5) * cw, y0 + (r + 0.5) * ch + 4,
                        "class=\"cell\" text-anchor=\"middle\"", p->cell_text[at]);
        }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"black\"/>\n", x0, y0, PANEL, PANEL);
    double y_label_x = x0 - 14;
    if (p->col_names) {
        int k = name_step(p->cols, cw, 48);
        for (int c = 0; c < p->cols; c += k)
            text_at(f, x0 + (c + 0.5) * cw, y0 + PANEL + 14, "class=\"tick\" text-anchor=\"middle\"",
                    p->col_names[c]);
    } else {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"start\">0</text>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n",
                x0, y0 + PANEL + 14, x0 + PANEL, y0 + PANEL + 14, p->cols - 1);
    }
    if (p->row_names) {
        int k = name_step(p->rows, ch, 14);
        for (int r = 0; r < p->rows; r += k)
            text_at(f, x0 - 4, y0 + (r + 0.5) * ch + 4, "class=\"tick\" text-anchor=\"end\"",
                    p->row_names[r]);
        y_label_x = x0 - 52;
    } else {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n", x0 - 4,
                y0 + PANEL, p->rows - 1);
    }
    text_at(f, x0 + PANEL / 2.0, y0 + PANEL + 30, "class=\"x-label\" text-anchor=\"middle\"",
            p->x_label);
    char rotate[96];
    snprintf(rotate, sizeof rotate, "class=\"y-label\" transform=\"rotate(-90 %.1f %.1f)\" "
             "text-anchor=\"middle\"", y_label_x, y0 + PANEL / 2.0);
    text_at(f, y_label_x, y0 + PANEL / 2.0, rotate, p->y_label);
    fputs("</g>\n", f);
}

int svg_print_heatmaps(FILE *f, const char *title, const char *subtitle,
                       const SvgHeatmap *panels, int n_panels, PosencError *err) {
    double lo = INFINITY, hi = -INFINITY;
    for (int p = 0; p < n_panels; p++)
        for (size_t i = 0; i < (size_t)panels[p].rows * panels[p].cols; i++)
            if (!isnan(panels[p].v[i])) {
                lo = fmin(lo, panels[p].v[i]);
                hi = fmax(hi, panels[p].v[i]);
            }
    if (!(lo <= hi)) return posenc_error(err, "no data to plot");
    int per_row = n_panels < PANELS_PER_ROW ? n_panels : PANELS_PER_ROW;
    int rows = (n_panels + per_row - 1) / per_row;
    int w = LEFT + per_row * (PANEL + PANEL_GAP), h = TOP + rows * (PANEL + PANEL_GAP) + 60;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", w, h, w, h);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    text_at(f, LEFT, 26, "font-size=\"16\"", title);
    if (subtitle) text_at(f, LEFT, 46, "", subtitle);
    for (int p = 0; p < n_panels; p++)
        heat_panel(f, &panels[p], LEFT + (p % per_row) * (PANEL + PANEL_GAP),
                   TOP + (p / per_row) * (PANEL + PANEL_GAP), lo, hi);
    /* the scale: a bar of 20 steps from lo to hi */
    double bar_y = h - 40;
    fputs("<g class=\"scale\">\n", f);
    for (int i = 0; i < 20; i++) {
        char colour[8];
        heat_colour(lo + (hi - lo) * (i + 0.5) / 20, lo, hi, colour);
        fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"15\" height=\"12\" fill=\"%s\"/>\n",
                LEFT + 15 * i, bar_y, colour);
    }
    fprintf(f, "<text class=\"scale-min\" x=\"%d\" y=\"%.1f\">%.4g</text>"
               "<text class=\"scale-max\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n",
            LEFT, bar_y + 26, lo, LEFT + 300, bar_y + 26, hi);
    fputs("</g>\n</svg>\n", f);
    return 0;
}

/* Opens the chart's file, or NULL with the reason. */
static FILE *open_chart(const char *path, PosencError *err) {
    FILE *f = fopen(path, "w");
    if (!f) posenc_error(err, "cannot write '%s': %s", path, strerror(errno));
    return f;
}

/* Closes it after `rc` of its writer; a failed chart leaves no file. */
static int close_chart(FILE *f, const char *path, int rc, PosencError *err) {
    if (fclose(f) != 0 && !rc) rc = posenc_error(err, "error writing '%s'", path);
    if (rc) {
        remove(path);
        if (!strstr(err->msg, path)) posenc_error_prefix(err, path);
    }
    return rc;
}

int svg_write_curves(const char *path, const SvgChart *chart, const SvgSeries *series,
                     int n_series, PosencError *err) {
    FILE *f = open_chart(path, err);
    if (!f) return -1;
    return close_chart(f, path, svg_print_curves(f, chart, series, n_series, err), err);
}

/* A view's chart: PREFIX-LABEL-VIEW.svg (PREFIX-VIEW.svg for a NULL label;
 * a variant's ':' is kept), or a figure of the HTML page. */
static FILE *sink_begin(const SvgSink *s, const char *label, const char *view, char *path,
                        size_t n, PosencError *err) {
    if (s->html) {
        fprintf(s->html, "<figure class=\"chart\" data-view=\"%s\" data-variant=\"", view);
        if (label) svg_escape_text(s->html, label);
        fputs("\">\n", s->html);
        return s->html;
    }
    if (label) snprintf(path, n, "%s-%s-%s.svg", s->prefix, label, view);
    else snprintf(path, n, "%s-%s.svg", s->prefix, view);
    return open_chart(path, err);
}

static int sink_end(const SvgSink *s, FILE *f, const char *path, int rc, PosencError *err) {
    if (s->html) {
        fputs("</figure>\n", f);
        return rc;
    }
    rc = close_chart(f, path, rc, err);
    if (!rc && s->written) fprintf(s->written, "wrote %s\n", path);
    return rc;
}

int svg_sink_curves(const SvgSink *s, const char *label, const char *view, const SvgChart *chart,
                    const SvgSeries *series, int n_series, PosencError *err) {
    char path[1024];
    FILE *f = sink_begin(s, label, view, path, sizeof path, err);
    if (!f) return -1;
    return sink_end(s, f, path, svg_print_curves(f, chart, series, n_series, err), err);
}

int svg_sink_heatmaps(const SvgSink *s, const char *label, const char *view, const char *title,
                      const char *subtitle, const SvgHeatmap *panels, int n_panels,
                      PosencError *err) {
    char path[1024];
    FILE *f = sink_begin(s, label, view, path, sizeof path, err);
    if (!f) return -1;
    return sink_end(s, f, path, svg_print_heatmaps(f, title, subtitle, panels, n_panels, err), err);
}
