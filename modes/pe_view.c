#include "modes/pe_view.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "modes/plot_svg.h"

/* ---- computing the views ---------------------------------------------------- */

/* The vector the embed hook adds at each position: its effect on zeros. */
static void embed_views(PeView *v, const PeOps *ops) {
    int dim = v->pe.dim, n = v->n_pos;
    size_t cells;
    if (!size_mul(&cells, (size_t)n, (size_t)dim))
        posenc_out_of_memory((size_t)n, (size_t)dim, "the position vectors");
    v->vectors = calloc_or_exit(cells, sizeof(float), "the position vectors");
    v->cosine = malloc_or_exit((size_t)n * n * sizeof(double), "the position similarities");
    double *norm = malloc_or_exit((size_t)n * sizeof(double), "the position vectors' norms");
    for (int p = 0; p < n; p++) {
        ops->embed(&v->pe, v->vectors + (size_t)p * dim, p);
        const float *x = v->vectors + (size_t)p * dim;
        double s = 0.0;
        for (int i = 0; i < dim; i++) s += (double)x[i] * x[i];
        norm[p] = sqrt(s);
    }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            double dot = 0.0;
            for (int i = 0; i < dim; i++)
                dot += (double)v->vectors[(size_t)a * dim + i] * v->vectors[(size_t)b * dim + i];
            v->cosine[(size_t)a * n + b] =
                norm[a] > 0 && norm[b] > 0 ? dot / (norm[a] * norm[b]) : NAN;
        }
    free(norm);
}

/* splitmix64: a fixed, portable stream for the random vectors. */
static double uniform01(unsigned long long *state) {
    unsigned long long z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}

static float gaussian(unsigned long long *state) {
    double u = uniform01(state), w = uniform01(state);
    return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(2.0 * M_PI * w));
}

/* Adds q . k / head_size for d = 0..n_pos-1 to qk[]: one vector as a
 * query at position d and a key at position 0, each as the scheme `pe`
 * gives it there.  A random vector is rotated at both (YaRN's attention
 * factor on each); a cached key turned back to position 0 already carries
 * that factor, so it is only moved (the pure rotation).  A layer that does
 * not rotate scores it the same at every distance. */
static void add_self_scores(const PositionalEncoding *pe, int n_pos, const float *k, int cached,
                            float *at0, float *rotated, double *qk) {
    const PeOps *ops = pe_ops(pe);
    int hs = pe->head_size;
    memcpy(at0, k, (size_t)hs * sizeof(float));
    if (ops->rotate && !cached) ops->rotate(pe, at0, 1, 0);
    for (int d = 0; d < n_pos; d++) {
        memcpy(rotated, k, (size_t)hs * sizeof(float));
        if (ops->rotate && cached) ops->rerotate(pe, rotated, 1, d);
        else if (ops->rotate) ops->rotate(pe, rotated, 1, d);
        double dot = 0.0;
        for (int i = 0; i < hs; i++) dot += (double)at0[i] * rotated[i];
        qk[d] += dot / hs;
    }
}

/* The q.k curves: of random vectors under the view's scheme, and of the
 * model's own cached keys in each layer under that layer's scheme. */
static void rotate_views(PeView *v, const Context *keys_ctx) {
    int hs = v->pe.head_size, n = v->n_pos;
    float *k = malloc_or_exit((size_t)hs * sizeof(float), "a random vector");
    float *rotated = malloc_or_exit((size_t)hs * sizeof(float), "a rotated vector");
    float *at0 = malloc_or_exit((size_t)hs * sizeof(float), "a vector at position 0");
    v->qk_random = calloc_or_exit((size_t)n, sizeof(double), "the q.k curve");
    unsigned long long state = PE_VIEW_SEED;
    for (int s = 0; s < PE_VIEW_RANDOM_SAMPLES; s++) {
        for (int i = 0; i < hs; i++) k[i] = gaussian(&state);
        add_self_scores(&v->pe, n, k, 0, at0, rotated, v->qk_random);
    }
    for (int d = 0; d < n; d++) v->qk_random[d] /= PE_VIEW_RANDOM_SAMPLES;
    if (keys_ctx) {
        const KVCache *kv = &keys_ctx->cache;
        int kv_heads = kv->kv_dim / hs;
        float *row = malloc_or_exit((size_t)kv->kv_dim * sizeof(float), "a cached key");
        v->n_layers = keys_ctx->model->config.n_layers;
        v->n_keys = kv->n_used * kv_heads;
        v->qk_keys = calloc_or_exit((size_t)v->n_layers * n, sizeof(double), "the keys' q.k curves");
        for (int l = 0; l < v->n_layers; l++) {
            const PositionalEncoding *lpe = &keys_ctx->layers[l].pe;
            double *qk = v->qk_keys + (size_t)l * n;
            for (int c = 0; c < kv->n_used; c++) {
                kv_cache_load_keys(kv, l, c, 1, row);
                if (pe_ops(lpe)->rerotate) /* back to position 0 */
                    pe_ops(lpe)->rerotate(lpe, row, kv_heads, -kv->pos[c]);
                for (int h = 0; h < kv_heads; h++)
                    add_self_scores(lpe, n, row + (size_t)h * hs, 1, at0, rotated, qk);
            }
            for (int d = 0; d < n; d++) qk[d] /= v->n_keys;
        }
        free(row);
    }
    free(at0);
    free(k);
    free(rotated);
}

/* The bias hook's output for every query and every key at or before it. */
static void bias_views(PeView *v, const PeOps *ops) {
    int n = v->n_pos, heads = v->pe.n_heads;
    size_t cells;
    if (!size_mul3(&cells, (size_t)heads, (size_t)n, (size_t)n))
        posenc_out_of_memory((size_t)heads * n, (size_t)n, "the bias matrices");
    v->bias = malloc_or_exit(cells * sizeof(double), "the bias matrices");
    int *pos_k = malloc_or_exit((size_t)n * sizeof(int), "the key positions");
    float *scores = malloc_or_exit((size_t)n * sizeof(float), "the biases");
    for (int i = 0; i < n; i++) pos_k[i] = i;
    for (int h = 0; h < heads; h++)
        for (int q = 0; q < n; q++) {
            memset(scores, 0, (size_t)n * sizeof(float));
            ops->bias(&v->pe, h, q, pos_k, scores, q + 1);
            double *row = v->bias + ((size_t)h * n + q) * n;
            for (int k = 0; k < n; k++) row[k] = k <= q ? scores[k] : NAN;
        }
    if (v->pe.params.kind == PE_T5) {
        v->bucket = malloc_or_exit((size_t)n * sizeof(int), "the buckets");
        for (int d = 0; d < n; d++)
            v->bucket[d] = pe_t5_bucket(-(long long)d, v->pe.params.t5_buckets,
                                        v->pe.params.t5_max_distance);
    }
    free(pos_k);
    free(scores);
}

int pe_view_build(PeView *v, const Model *m, const PeParams *p, const LayerAttention *layers,
                  const char *label, int n_pos, const Context *keys_ctx, PosencError *err) {
    memset(v, 0, sizeof *v);
    v->label = label;
    v->n_pos = n_pos;
    model_layers_describe(layers, m->config.n_layers, v->layers, sizeof v->layers);
    if (model_build_scheme(m, p, &v->pe, err)) return -1;
    const PeOps *ops = pe_ops(&v->pe);
    if (ops->embed) embed_views(v, ops);
    if (ops->rotate) rotate_views(v, keys_ctx);
    if (ops->bias) bias_views(v, ops);
    return 0;
}

void pe_view_free(PeView *v) {
    free(v->vectors);
    free(v->cosine);
    free(v->qk_random);
    free(v->qk_keys);
    free(v->bias);
    free(v->bucket);
    pe_free(&v->pe);
    memset(v, 0, sizeof *v);
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_key(FILE *f, const char *key) { fprintf(f, ",\"%s\":", key); }

static void json_variant(FILE *f, const PeView *v) {
    const PositionalEncoding *pe = &v->pe;
    fputs("{\"pe\":", f);
    json_write_string(f, v->label, strlen(v->label));
    fprintf(f, ",\"kind\":\"%s\",\"positions\":%d,\"dim\":%d,\"n_heads\":%d,\"head_size\":%d",
            pe_kind_name(pe->params.kind), v->n_pos, pe->dim, pe->n_heads, pe->head_size);
    json_key(f, "layers");
    json_write_string(f, v->layers, strlen(v->layers));
    /* the parameters as -m inspect shows them: the scheme's own describe */
    const PeOps *ops = pe_ops(pe);
    PeField fields[PE_MAX_FIELDS];
    int n_fields = ops->describe ? ops->describe(&pe->params, pe->head_size, pe->trained_ctx,
                                                 &pe->tables, fields) : 0;
    fputs(",\"params\":{", f);
    for (int i = 0; i < n_fields; i++) {
        fprintf(f, "%s\"%s\":", i ? "," : "", fields[i].key);
        if (fields[i].text) json_write_string(f, fields[i].text, strlen(fields[i].text));
        else if (fields[i].integer) fprintf(f, "%.0f", fields[i].number);
        else fprintf(f, "%.9g", fields[i].number);
    }
    fputc('}', f);
    if (v->vectors) {
        json_key(f, "vectors");
        fputc('[', f);
        for (int p = 0; p < v->n_pos; p++) {
            if (p) fputc(',', f);
            json_write_floats(f, v->vectors + (size_t)p * pe->dim, (size_t)pe->dim);
        }
        fputc(']', f);
        json_key(f, "cosine");
        json_write_matrix(f, v->cosine, v->n_pos, v->n_pos);
    }
    if (v->qk_random) {
        int half = pe->params.rope_dim / 2;
        json_key(f, "inv_freq");
        json_write_floats(f, pe->inv_freq, (size_t)half);
        json_key(f, "wavelength");
        fputc('[', f);
        for (int j = 0; j < half; j++)
            fprintf(f, "%s%.9g", j ? "," : "", 2.0 * M_PI / (double)pe->inv_freq[j]);
        fputc(']', f);
        fprintf(f, ",\"rope_scaling\":\"%s\",\"rope_factor\":%.9g,\"attn_factor\":%.9g,"
                   "\"random_samples\":%d,\"seed\":%u",
                pe_rope_scaling_name(pe->params.rope_scaling), (double)pe->params.rope_factor,
                (double)pe->rope_mscale, PE_VIEW_RANDOM_SAMPLES, PE_VIEW_SEED);
        json_key(f, "qk_random");
        json_write_doubles(f, v->qk_random, v->n_pos);
        json_key(f, "qk_keys");
        if (v->qk_keys) json_write_matrix(f, v->qk_keys, v->n_layers, v->n_pos);
        else fputs("null", f);
        fprintf(f, ",\"keys_per_layer\":%d", v->n_keys);
    }
    if (v->bias) {
        if (pe->slopes) {
            json_key(f, "slopes");
            json_write_floats(f, pe->slopes, (size_t)pe->n_heads);
        }
        if (v->bucket) {
            json_key(f, "bucket");
            fputc('[', f);
            for (int d = 0; d < v->n_pos; d++) fprintf(f, "%s%d", d ? "," : "", v->bucket[d]);
            fputc(']', f);
        }
        json_key(f, "bias");
        fputc('[', f);
        for (int h = 0; h < pe->n_heads; h++) {
            if (h) fputc(',', f);
            json_write_matrix(f, v->bias + (size_t)h * v->n_pos * v->n_pos, v->n_pos, v->n_pos);
        }
        fputc(']', f);
    }
    fputc('}', f);
}

void pe_view_write_json(FILE *f, const char *model_path, const PeView *views, int n) {
    fputs("{\"model\":", f);
    json_write_string(f, model_path, strlen(model_path));
    fputs(",\"variants\":[", f);
    for (int i = 0; i < n; i++) {
        if (i) fputc(',', f);
        json_variant(f, &views[i]);
    }
    fputs("]}\n", f);
}

/* ---- text -------------------------------------------------------------------- */

static void print_variant(FILE *f, const PeView *v) {
    const PositionalEncoding *pe = &v->pe;
    fprintf(f, "\n## %s (%s): positions 0..%d\n", v->label, pe_kind_name(pe->params.kind),
            v->n_pos - 1);
    fprintf(f, "layers: %s\n", v->layers);
    if (!v->vectors && !v->qk_random && !v->bias)
        fputs("no positional hook: attention sees content only\n", f);
    if (v->vectors) {
        fputs("distance  cos(pos 0, pos d)  mean cos(pos p, pos p+d)\n", f);
        for (int d = 0; d < v->n_pos; d = d ? 2 * d : 1) {
            double mean = 0.0;
            for (int p = 0; p + d < v->n_pos; p++) mean += v->cosine[(size_t)p * v->n_pos + p + d];
            fprintf(f, "%8d  %17.6f  %24.6f\n", d, v->cosine[d], mean / (v->n_pos - d));
        }
    }
    if (v->qk_random) {
        fprintf(f, "scaling %s, factor %g, attention factor %g (on cos and sin)\n",
                pe_rope_scaling_name(pe->params.rope_scaling), (double)pe->params.rope_factor,
                (double)pe->rope_mscale);
        fputs("pair  inv_freq      wavelength (tokens)\n", f);
        for (int j = 0; j < pe->params.rope_dim / 2; j++)
            fprintf(f, "%4d  %-12.6g  %.6g\n", j, (double)pe->inv_freq[j],
                    2.0 * M_PI / (double)pe->inv_freq[j]);
        fprintf(f, "distance  q.k/head_size: random (%d)", PE_VIEW_RANDOM_SAMPLES);
        for (int l = 0; v->qk_keys && l < v->n_layers; l++) fprintf(f, "  keys L%d", l);
        fputc('\n', f);
        for (int d = 0; d < v->n_pos; d = d ? 2 * d : 1) {
            fprintf(f, "%8d  %28.6f", d, v->qk_random[d]);
            for (int l = 0; v->qk_keys && l < v->n_layers; l++)
                fprintf(f, "  %8.4f", v->qk_keys[(size_t)l * v->n_pos + d]);
            fputc('\n', f);
        }
    }
    if (v->bias) {
        if (pe->slopes) {
            fputs("head  slope\n", f);
            for (int h = 0; h < pe->n_heads; h++)
                fprintf(f, "%4d  %.9g\n", h, (double)pe->slopes[h]);
        }
        fprintf(f, "distance%s  bias by head\n", v->bucket ? "  bucket" : "");
        for (int d = 0; d < v->n_pos; d = d ? 2 * d : 1) {
            fprintf(f, "%8d", d);
            if (v->bucket) fprintf(f, "  %6d", v->bucket[d]);
            for (int h = 0; h < pe->n_heads; h++)
                fprintf(f, "  %9.4f", v->bias[((size_t)h * v->n_pos + d) * v->n_pos]);
            fputc('\n', f);
        }
    }
}

void pe_view_print(FILE *f, const char *model_path, const PeView *views, int n) {
    fprintf(f, "# %s: the positional scheme as data (--json for every value, --svg for charts)\n",
            model_path);
    for (int i = 0; i < n; i++) print_variant(f, &views[i]);
}

/* ---- charts ------------------------------------------------------------------ */

static int embed_charts(const SvgSink *sink, const PeView *v, PosencError *err) {
    int n = v->n_pos, dim = v->pe.dim;
    double *vec = malloc_or_exit((size_t)n * dim * sizeof(double), "the heatmap");
    for (size_t i = 0; i < (size_t)n * dim; i++) vec[i] = v->vectors[i];
    SvgHeatmap panels[2] = {
        {.label = "position vectors", .x_label = "dimension", .y_label = "position", .v = vec,
         .rows = n, .cols = dim},
        {.label = "cosine similarity of two positions' vectors", .x_label = "position",
         .y_label = "position", .v = v->cosine, .rows = n, .cols = n},
    };
    char title[256];
    snprintf(title, sizeof title, "%s: the vector added at each position", v->label);
    int rc = svg_sink_heatmaps(sink, v->label, "vectors", title, NULL, panels, 2, err);
    free(vec);
    return rc;
}

static int bias_charts(const SvgSink *sink, const PeView *v, PosencError *err) {
    int heads = v->pe.n_heads, n = v->n_pos;
    SvgHeatmap *panels = malloc_or_exit((size_t)heads * sizeof *panels, "the heatmap panels");
    char (*labels)[48] = malloc_or_exit((size_t)heads * sizeof *labels, "the panel labels");
    for (int h = 0; h < heads; h++) {
        if (v->pe.slopes)
            snprintf(labels[h], sizeof labels[h], "head %d, slope %.4g", h,
                     (double)v->pe.slopes[h]);
        else snprintf(labels[h], sizeof labels[h], "head %d", h);
        panels[h] = (SvgHeatmap){.label = labels[h], .x_label = "key position",
                                 .y_label = "query position", .v = v->bias + (size_t)h * n * n,
                                 .rows = n, .cols = n};
    }
    char title[256];
    snprintf(title, sizeof title, "%s: the bias added to each attention score (blank: masked)",
             v->label);
    int rc = svg_sink_heatmaps(sink, v->label, "bias", title, NULL, panels, heads, err);
    free(panels);
    free(labels);
    return rc;
}

/* Every rope variant's wavelengths (log2) by pair in one chart, and their
 * q.k curves in another. */
static int rotate_charts(const SvgSink *sink, const PeView *views, int n, PosencError *err) {
    SvgSeries wave[2 * 16], qk[2 * 16];
    double *wave_y[16] = {0};
    char notes[16][96], key_labels[16][96];
    int n_wave = 0, n_qk = 0, max_pos = 0;
    for (int i = 0; i < n && n_wave < 16; i++) {
        const PeView *v = &views[i];
        if (!v->qk_random) continue;
        int half = v->pe.params.rope_dim / 2;
        wave_y[n_wave] = malloc_or_exit((size_t)half * sizeof(double), "the wavelengths");
        for (int j = 0; j < half; j++) wave_y[n_wave][j] = log2(2.0 * M_PI / v->pe.inv_freq[j]);
        snprintf(notes[n_wave], sizeof notes[n_wave], "scaling %s, factor %g",
                 pe_rope_scaling_name(v->pe.params.rope_scaling), (double)v->pe.params.rope_factor);
        wave[n_wave] = (SvgSeries){.label = v->label, .note = notes[n_wave], .y = wave_y[n_wave],
                                   .n = half};
        qk[n_qk++] = (SvgSeries){.label = v->label, .note = "random vectors", .y = v->qk_random,
                                 .n = v->n_pos};
        if (v->qk_keys) {
            snprintf(key_labels[n_wave], sizeof key_labels[n_wave], "%s, model keys", v->label);
            qk[n_qk++] = (SvgSeries){.label = key_labels[n_wave], .note = "layer 0",
                                     .y = v->qk_keys, .n = v->n_pos};
        }
        if (v->n_pos > max_pos) max_pos = v->n_pos;
        n_wave++;
    }
    int rc = 0;
    if (n_wave) {
        SvgChart c = {.title = "RoPE: wavelength of each rotation pair",
                      .subtitle = "2 pi / frequency after scaling: a pair turns once per "
                                  "wavelength",
                      .x_label = "rotation pair", .y_label = "log2 wavelength (tokens)"};
        rc = svg_sink_curves(sink, NULL, "wavelength", &c, wave, n_wave, err);
        SvgChart q = {.title = "RoPE: mean q.k / head size against distance, k = q",
                      .subtitle = "score of a vector against itself rotated d positions apart",
                      .x_label = "distance between query and key (positions)",
                      .y_label = "mean q.k / head size"};
        if (!rc) rc = svg_sink_curves(sink, NULL, "qk", &q, qk, n_qk, err);
    }
    for (int i = 0; i < n_wave; i++) free(wave_y[i]);
    return rc;
}

int pe_view_write_charts(const SvgSink *sink, const PeView *views, int n, PosencError *err) {
    for (int i = 0; i < n; i++) {
        if (views[i].vectors && embed_charts(sink, &views[i], err)) return -1;
        if (views[i].bias && bias_charts(sink, &views[i], err)) return -1;
    }
    return rotate_charts(sink, views, n, err);
}
