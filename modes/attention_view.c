#include "modes/attention_view.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "modes/plot_svg.h"

/* One softmax row into its slot: rows of different (layer, head, query)
 * never share one, so the attention threads may all write at once. */
static void record_row(void *user, int layer, int head, int pos_q, const float *w, int n_cells) {
    AttentionView *v = user;
    size_t n = (size_t)v->n_tokens;
    float *row = v->weights + (((size_t)layer * v->n_heads + head) * n + (size_t)pos_q) * n;
    memcpy(row, w, (size_t)n_cells * sizeof(float));
}

static void summarise(AttentionView *v) {
    int n = v->n_tokens;
    for (int lh = 0; lh < v->n_layers * v->n_heads; lh++) {
        const float *w = v->weights + (size_t)lh * n * n;
        double *mass = v->mass + (size_t)lh * n, entropy = 0.0, sink = 0.0;
        for (int q = 0; q < n; q++) {
            double row = 0.0;
            for (int k = 0; k <= q; k++) {
                double x = w[(size_t)q * n + k];
                mass[q - k] += x / n;
                row += x;
                if (x > 0) entropy -= x * log(x);
            }
            sink += (1.0 - row) / n;
        }
        v->entropy[lh] = entropy / n;
        if (v->sink) v->sink[lh] = sink;
    }
}

int attention_view_build(AttentionView *v, Context *ctx, const int *ids, int n, const char *label,
                         PosencError *err) {
    const ModelConfig *c = &ctx->model->config;
    memset(v, 0, sizeof *v);
    *v = (AttentionView){.label = label, .n_layers = c->n_layers, .n_heads = c->n_heads,
                         .n_tokens = n};
    size_t cells;
    if (!size_mul3(&cells, (size_t)c->n_layers * c->n_heads, (size_t)n, (size_t)n))
        return posenc_error_oom(err, (size_t)c->n_layers * c->n_heads * n, (size_t)n,
                                "the attention weights");
    v->weights = calloc_or_exit(cells, sizeof(float), "the attention weights");
    v->mass = calloc_or_exit((size_t)c->n_layers * c->n_heads * n, sizeof(double),
                          "the mass by distance");
    v->entropy = calloc_or_exit((size_t)c->n_layers * c->n_heads, sizeof(double), "the entropies");
    int sinks = 0;
    for (int l = 0; l < c->n_layers; l++) sinks |= ctx->layers[l].sinks != NULL;
    if (sinks)
        v->sink = calloc_or_exit((size_t)c->n_layers * c->n_heads, sizeof(double), "the sinks' mass");
    int rc = context_observe_attention(ctx, record_row, v, err);
    if (!rc) rc = context_check_tokens(ctx, ids, n, 0, err);
    if (!rc) rc = context_check_logits(ctx, context_prefill(ctx, ids, n, 0), 1, n - 1, err);
    context_observe_attention(ctx, NULL, NULL, err);
    if (rc) {
        attention_view_free(v);
        return -1;
    }
    summarise(v);
    return 0;
}

void attention_view_free(AttentionView *v) {
    free(v->weights);
    free(v->mass);
    free(v->entropy);
    free(v->sink);
    memset(v, 0, sizeof *v);
}

static int selected(AttentionSelection sel, int layer, int head) {
    return (sel.layer < 0 || sel.layer == layer) && (sel.head < 0 || sel.head == head);
}

static const float *head_weights(const AttentionView *v, int layer, int head) {
    return v->weights + ((size_t)layer * v->n_heads + head) * v->n_tokens * v->n_tokens;
}

/* The mass by distance averaged over the selected heads, (n_tokens). */
static double *selected_mass(const AttentionView *v, AttentionSelection sel) {
    int n = v->n_tokens, count = 0;
    double *mass = calloc_or_exit((size_t)n, sizeof(double), "the mass by distance");
    for (int l = 0; l < v->n_layers; l++)
        for (int h = 0; h < v->n_heads; h++)
            if (selected(sel, l, h)) {
                const double *m = v->mass + ((size_t)l * v->n_heads + h) * n;
                for (int d = 0; d < n; d++) mass[d] += m[d];
                count++;
            }
    for (int d = 0; d < n; d++) mass[d] /= count;
    return mass;
}

/* ---- JSON, text, CSV ----------------------------------------------------------- */

static void json_variant(FILE *f, const AttentionView *v, AttentionSelection sel) {
    int n = v->n_tokens;
    fputs("{\"pe\":", f);
    json_write_string(f, v->label, strlen(v->label));
    fprintf(f, ",\"n_layers\":%d,\"n_heads\":%d,\"entropy\":", v->n_layers, v->n_heads);
    json_write_matrix(f, v->entropy, (size_t)v->n_layers, (size_t)v->n_heads);
    if (v->sink) {
        fputs(",\"sink\":", f);
        json_write_matrix(f, v->sink, (size_t)v->n_layers, (size_t)v->n_heads);
    }
    fputs(",\"mass\":[", f);
    for (int l = 0; l < v->n_layers; l++) {
        if (l) fputc(',', f);
        json_write_matrix(f, v->mass + (size_t)l * v->n_heads * n, (size_t)v->n_heads, (size_t)n);
    }
    fputs("],\"weights\":[", f);
    int first = 1;
    for (int l = 0; l < v->n_layers; l++)
        for (int h = 0; h < v->n_heads; h++) {
            if (!selected(sel, l, h)) continue;
            fprintf(f, "%s{\"layer\":%d,\"head\":%d,\"w\":[", first ? "" : ",", l, h);
            first = 0;
            for (int q = 0; q < n; q++) {
                if (q) fputc(',', f);
                json_write_floats(f, head_weights(v, l, h) + (size_t)q * n, (size_t)n);
            }
            fputs("]}", f);
        }
    fputs("]}", f);
}

void attention_view_write_json(FILE *f, const char *model_path, const int *ids,
                               const AttentionView *views, int n, AttentionSelection sel) {
    fputs("{\"model\":", f);
    json_write_string(f, model_path, strlen(model_path));
    fputs(",\"tokens\":[", f);
    for (int t = 0; t < views[0].n_tokens; t++) fprintf(f, "%s%d", t ? "," : "", ids[t]);
    fputs("],\"variants\":[", f);
    for (int i = 0; i < n; i++) {
        if (i) fputc(',', f);
        json_variant(f, &views[i], sel);
    }
    fputs("]}\n", f);
}

void attention_view_print(FILE *f, const char *model_path, const AttentionView *views, int n,
                          AttentionSelection sel) {
    fprintf(f, "# %s: attention over %d tokens (--json or --csv for every weight, --svg for "
               "charts)\n", model_path, views[0].n_tokens);
    for (int i = 0; i < n; i++) {
        const AttentionView *v = &views[i];
        double uniform = 0.0; /* query q spread evenly over its q + 1 keys: ln(q + 1) */
        for (int q = 0; q < v->n_tokens; q++) uniform += log(q + 1.0) / v->n_tokens;
        fprintf(f, "\n## %s: entropy of each head (nats; even attention would give %.4f)\nlayer",
                v->label, uniform);
        for (int h = 0; h < v->n_heads; h++) fprintf(f, "  head %-3d", h);
        fputc('\n', f);
        for (int l = 0; l < v->n_layers; l++) {
            fprintf(f, "%5d", l);
            for (int h = 0; h < v->n_heads; h++)
                fprintf(f, "  %8.4f", v->entropy[(size_t)l * v->n_heads + h]);
            fputc('\n', f);
        }
        if (v->sink) {
            fprintf(f, "## %s: mass each head gives its learned sink (mean over queries; the "
                       "rest is the cells')\nlayer", v->label);
            for (int h = 0; h < v->n_heads; h++) fprintf(f, "  head %-3d", h);
            fputc('\n', f);
            for (int l = 0; l < v->n_layers; l++) {
                fprintf(f, "%5d", l);
                for (int h = 0; h < v->n_heads; h++)
                    fprintf(f, "  %8.4f", v->sink[(size_t)l * v->n_heads + h]);
                fputc('\n', f);
            }
        }
        double *mass = selected_mass(v, sel);
        fputs("distance  attention mass (mean over the selected heads)\n", f);
        for (int d = 0; d < v->n_tokens; d = d ? 2 * d : 1) fprintf(f, "%8d  %.6f\n", d, mass[d]);
        free(mass);
    }
}

int attention_view_write_csv(const char *path, const AttentionView *views, int n,
                             AttentionSelection sel, PosencError *err) {
    FILE *f = fopen(path, "w");
    if (!f) return posenc_error(err, "cannot write '%s': %s", path, strerror(errno));
    fputs("variant,layer,head,query,key,weight\n", f);
    for (int i = 0; i < n; i++) {
        const AttentionView *v = &views[i];
        for (int l = 0; l < v->n_layers; l++)
            for (int h = 0; h < v->n_heads; h++) {
                if (!selected(sel, l, h)) continue;
                const float *w = head_weights(v, l, h);
                for (int q = 0; q < v->n_tokens; q++)
                    for (int k = 0; k <= q; k++)
                        fprintf(f, "%s,%d,%d,%d,%d,%.9g\n", v->label, l, h, q, k,
                                (double)w[(size_t)q * v->n_tokens + k]);
            }
    }
    if (fclose(f) != 0) return posenc_error(err, "error writing '%s'", path);
    return 0;
}

/* ---- charts -------------------------------------------------------------------- */

static int weight_chart(const SvgSink *sink, const AttentionView *v, AttentionSelection sel,
                        const char *const *token_names, PosencError *err) {
    int n = v->n_tokens, heads = v->n_layers * v->n_heads, panels = 0;
    SvgHeatmap *p = malloc_or_exit((size_t)heads * sizeof *p, "the heatmap panels");
    char (*labels)[48] = malloc_or_exit((size_t)heads * sizeof *labels, "the panel labels");
    double *w = malloc_or_exit((size_t)heads * n * n * sizeof(double), "the heatmap");
    for (int l = 0; l < v->n_layers; l++)
        for (int h = 0; h < v->n_heads; h++) {
            if (!selected(sel, l, h)) continue;
            double *cells = w + (size_t)panels * n * n;
            const float *src = head_weights(v, l, h);
            for (int q = 0; q < n; q++)
                for (int k = 0; k < n; k++)
                    cells[(size_t)q * n + k] = k <= q ? src[(size_t)q * n + k] : NAN;
            snprintf(labels[panels], sizeof labels[panels], "layer %d, head %d", l, h);
            p[panels] = (SvgHeatmap){.label = labels[panels], .x_label = "key (position, token)",
                                     .y_label = "query (position, token)",
                                     .v = cells, .rows = n, .cols = n, .row_names = token_names,
                                     .col_names = token_names};
            panels++;
        }
    char title[256];
    snprintf(title, sizeof title, "%s: attention weights (blank: masked)", v->label);
    int rc = svg_sink_heatmaps(sink, v->label, "weights", title, NULL, p, panels, err);
    free(p);
    free(labels);
    free(w);
    return rc;
}

int attention_view_write_charts(const SvgSink *sink, const AttentionView *views, int n,
                                AttentionSelection sel, const char *const *token_names,
                                PosencError *err) {
    for (int i = 0; i < n; i++)
        if (weight_chart(sink, &views[i], sel, token_names, err)) return -1;
    SvgSeries *mass = malloc_or_exit((size_t)n * sizeof *mass, "the chart's series");
    SvgSeries *entropy = malloc_or_exit((size_t)n * sizeof *entropy, "the chart's series");
    char scope[64];
    if (sel.layer < 0 && sel.head < 0) snprintf(scope, sizeof scope, "every layer and head");
    else if (sel.head < 0) snprintf(scope, sizeof scope, "layer %d, every head", sel.layer);
    else if (sel.layer < 0) snprintf(scope, sizeof scope, "head %d of every layer", sel.head);
    else snprintf(scope, sizeof scope, "layer %d, head %d", sel.layer, sel.head);
    for (int i = 0; i < n; i++) {
        mass[i] = (SvgSeries){.label = views[i].label, .note = scope,
                              .y = selected_mass(&views[i], sel), .n = views[i].n_tokens};
        entropy[i] = (SvgSeries){.label = views[i].label, .note = "every layer and head",
                                 .y = views[i].entropy, .n = views[i].n_layers * views[i].n_heads};
    }
    char subtitle[128];
    snprintf(subtitle, sizeof subtitle, "mean over the queries of the weight at each distance; "
             "%s", scope);
    SvgChart m = {.title = "Attention mass by distance", .subtitle = subtitle,
                  .x_label = "distance between query and key (positions)",
                  .y_label = "attention mass"};
    int rc = svg_sink_curves(sink, NULL, "mass", &m, mass, n, err);
    SvgChart e = {.title = "Entropy of each head's attention",
                  .subtitle = "mean over the queries of -sum w ln w; heads numbered layer by layer",
                  .x_label = "head (layer x heads + head)", .y_label = "entropy (nats)"};
    if (!rc) rc = svg_sink_curves(sink, NULL, "entropy", &e, entropy, n, err);
    for (int i = 0; i < n; i++) free((void *)mass[i].y);
    free(mass);
    free(entropy);
    return rc;
}
