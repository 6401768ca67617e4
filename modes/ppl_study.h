/* The extrapolation study: mean NLL against the evaluation window for
 * several series — models, or --pe variants of one — as Press et al. draw
 * it, from -m ppl runs at every window of --ctx 64,128,... . */
#ifndef POSENC_PPL_STUDY_H
#define POSENC_PPL_STUDY_H
#include <stdio.h>

#include "base/util.h"
#include "modes/plot_svg.h"

typedef struct {
    char label[192];     /* the model, its variant, or both */
    char note[128];      /* the legend's second line */
    double *nll, *se;    /* (n_windows) NAN where the series did not run at that window */
    long *tokens;        /* (n_windows) tokens scored; 0 where it did not run */
} PplStudySeries;

typedef struct {
    int n_windows;
    const int *windows;  /* (n_windows) increasing */
    int trained_ctx;     /* the models' common trained context, 0 when they differ */
    PplStudySeries *series;
    int n_series;
} PplStudy;

/* n_series series, every value NAN (not run) until filled in. */
void ppl_study_build(PplStudy *s, const int *windows, int n_windows, int n_series);
void ppl_study_free(PplStudy *s);

/* One line per series, one column of mean NLL per window ("-" where it did
 * not run). */
void ppl_study_print_table(FILE *f, const PplStudy *s);
/* series,ctx,tokens,nll,se for every point that ran. */
int ppl_study_write_csv(const char *path, const PplStudy *s, PosencError *err);
/* The chart: one curve per series over a log2 window axis, to a file or
 * (view "nll-by-window") to a sink. */
int ppl_study_write_svg(const char *path, const char *title, const char *subtitle,
                        const PplStudy *s, PosencError *err);
int ppl_study_sink_svg(const SvgSink *sink, const char *title, const char *subtitle,
                       const PplStudy *s, PosencError *err);
/* The study as one JSON document (windows, trained_ctx, and per series its
 * label, note, and nll, se (null where it did not run) and tokens per
 * window): the --html page's data. */
void ppl_study_write_json(FILE *out, const PplStudy *s);
#endif
