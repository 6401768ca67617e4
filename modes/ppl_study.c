#include "modes/ppl_study.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "modes/plot_svg.h"

void ppl_study_build(PplStudy *s, const int *windows, int n_windows, int n_series) {
    *s = (PplStudy){n_windows, windows, 0,
                    calloc_or_exit((size_t)n_series, sizeof *s->series, "the study's series"),
                    n_series};
    for (int i = 0; i < n_series; i++) {
        PplStudySeries *r = &s->series[i];
        r->nll = malloc_or_exit((size_t)n_windows * sizeof(double), "the study's NLL");
        r->se = malloc_or_exit((size_t)n_windows * sizeof(double), "the study's standard errors");
        r->tokens = calloc_or_exit((size_t)n_windows, sizeof(long), "the study's token counts");
        for (int w = 0; w < n_windows; w++) r->nll[w] = r->se[w] = NAN;
    }
}

void ppl_study_free(PplStudy *s) {
    for (int i = 0; i < s->n_series; i++) {
        free(s->series[i].nll);
        free(s->series[i].se);
        free(s->series[i].tokens);
    }
    free(s->series);
    s->series = NULL;
}

void ppl_study_print_table(FILE *f, const PplStudy *s) {
    int width = 6;
    for (int i = 0; i < s->n_series; i++)
        if ((int)strlen(s->series[i].label) > width) width = (int)strlen(s->series[i].label);
    fprintf(f, "# mean NLL (nats/token) by window (--ctx)\n%-*s", width, "series");
    for (int w = 0; w < s->n_windows; w++) fprintf(f, " %9d", s->windows[w]);
    fputc('\n', f);
    for (int i = 0; i < s->n_series; i++) {
        fprintf(f, "%-*s", width, s->series[i].label);
        for (int w = 0; w < s->n_windows; w++)
            if (isnan(s->series[i].nll[w])) fprintf(f, " %9s", "-");
            else fprintf(f, " %9.4f", s->series[i].nll[w]);
        fputc('\n', f);
    }
}

int ppl_study_write_csv(const char *path, const PplStudy *s, PosencError *err) {
    FILE *f = fopen(path, "w");
    if (!f) return posenc_error(err, "cannot write '%s': %s", path, strerror(errno));
    fprintf(f, "series,ctx,tokens,nll,se\n");
    for (int i = 0; i < s->n_series; i++)
        for (int w = 0; w < s->n_windows; w++) {
            const PplStudySeries *r = &s->series[i];
            if (isnan(r->nll[w])) continue;
            /* a label with a comma or quote is quoted, as RFC 4180 says */
            if (strpbrk(r->label, ",\"\n")) {
                fputc('"', f);
                for (const char *c = r->label; *c; c++) {
                    if (*c == '"') fputc('"', f);
                    fputc(*c, f);
                }
                fputc('"', f);
            } else {
                fputs(r->label, f);
            }
            fprintf(f, ",%d,%ld,%.6f,%.6f\n", s->windows[w], r->tokens[w], r->nll[w], r->se[w]);
        }
    if (fclose(f) != 0) return posenc_error(err, "error writing '%s'", path);
    return 0;
}

/* The chart of the study and where it goes: a file (path) or a sink. */
static int study_chart(const char *path, const SvgSink *sink, const char *title, const char *subtitle,
                       const PplStudy *s, PosencError *err) {
    SvgSeries *series = malloc_or_exit((size_t)s->n_series * sizeof *series, "the chart's series");
    double *x = malloc_or_exit((size_t)s->n_windows * sizeof *x, "the chart's windows");
    for (int w = 0; w < s->n_windows; w++) x[w] = s->windows[w];
    for (int i = 0; i < s->n_series; i++)
        series[i] = (SvgSeries){.label = s->series[i].label, .note = s->series[i].note, .x = x,
                                .y = s->series[i].nll, .n = s->n_windows};
    char marker[64];
    snprintf(marker, sizeof marker, "trained context %d", s->trained_ctx);
    SvgChart chart = {.title = title, .subtitle = subtitle,
                      .x_label = "window (tokens, --ctx; log scale)",
                      .y_label = "mean NLL (nats/token)", .log2_x = 1,
                      .marker_x = s->trained_ctx, .marker_label = marker};
    int rc = path ? svg_write_curves(path, &chart, series, s->n_series, err)
                  : svg_sink_curves(sink, NULL, "nll-by-window", &chart, series, s->n_series, err);
    free(x);
    free(series);
    return rc;
}

int ppl_study_write_svg(const char *path, const char *title, const char *subtitle,
                        const PplStudy *s, PosencError *err) {
    return study_chart(path, NULL, title, subtitle, s, err);
}

int ppl_study_sink_svg(const SvgSink *sink, const char *title, const char *subtitle,
                       const PplStudy *s, PosencError *err) {
    return study_chart(NULL, sink, title, subtitle, s, err);
}

void ppl_study_write_json(FILE *out, const PplStudy *s) {
    fputs("{\"windows\": [", out);
    for (int w = 0; w < s->n_windows; w++) fprintf(out, "%s%d", w ? ", " : "", s->windows[w]);
    fprintf(out, "], \"trained_ctx\": %d, \"series\": [", s->trained_ctx);
    for (int i = 0; i < s->n_series; i++) {
        const PplStudySeries *r = &s->series[i];
        fputs(i ? ",\n  {\"label\": " : "\n  {\"label\": ", out);
        json_write_string(out, r->label, strlen(r->label));
        fputs(", \"note\": ", out);
        json_write_string(out, r->note, strlen(r->note));
        fputs(", \"nll\": ", out);
        json_write_doubles(out, r->nll, (size_t)s->n_windows);
        fputs(", \"se\": ", out);
        json_write_doubles(out, r->se, (size_t)s->n_windows);
        fputs(", \"tokens\": [", out);
        for (int w = 0; w < s->n_windows; w++) fprintf(out, "%s%ld", w ? ", " : "", r->tokens[w]);
        fputs("]}", out);
    }
    fputs("]}\n", out);
}
