/* The --pe variants and the per-layer overrides (--pe-layers, --window,
 * --chunk, a variant's @SPEC): parsed, applied to the model's per-layer
 * table and checked before any work. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"

/* Marks in sel[n_layers] the layers of LAYERS (spec[0, len)): "all",
 * "everyN" (the N-th, 2N-th, ...: layers N-1, 2N-1, ...), "I" or "I-J",
 * joined by '+' (or ','). */
static void select_layers(const char *flag, const char *spec, size_t len, int n_layers,
                          unsigned char *sel) {
    char buf[256];
    if (len == 0 || len >= sizeof buf) cli_die("%s: empty or too long layer list in '%s'", flag, spec);
    memcpy(buf, spec, len);
    buf[len] = '\0';
    for (char *save = NULL, *t = strtok_r(buf, "+,", &save); t; t = strtok_r(NULL, "+,", &save)) {
        char *end;
        if (!strcmp(t, "all")) {
            memset(sel, 1, (size_t)n_layers);
        } else if (!strncmp(t, "every", 5)) {
            long step = strtol(t + 5, &end, 10);
            if (end == t + 5 || *end || step < 1 || step > n_layers)
                cli_die("%s: '%s': everyN needs N in 1..%d (the model's layers)", flag, t, n_layers);
            for (long l = step - 1; l < n_layers; l += step) sel[l] = 1;
        } else {
            long a = strtol(t, &end, 10), b = a;
            if (end != t && *end == '-') b = strtol(end + 1, &end, 10);
            if (end == t || *end || a < 0 || b < a || b >= n_layers)
                cli_die("%s: '%s' is not a layer or range of the model's layers 0..%d", flag, t,
                        n_layers - 1);
            for (long l = a; l <= b; l++) sel[l] = 1;
        }
    }
}

/* What a layer spec sets: a scheme, or a size (a bare number meaning every
 * layer) that is a window or a chunk. */
typedef enum { SPEC_SCHEME, SPEC_WINDOW, SPEC_CHUNK } LayerSpec;

/* Applies LAYERS=VALUE[/LAYERS=VALUE...] to `table` (the variant's,
 * model_layers_for); a size wider than n_ctx (when given) is refused. */
static void apply_layer_spec(const char *flag, const char *spec, const Model *m,
                             const PeParams *variant, LayerAttention *table, LayerSpec what,
                             int n_ctx) {
    int windows = what != SPEC_SCHEME;
    int n_layers = m->config.n_layers;
    unsigned char sel[MODEL_MAX_LAYERS]; /* on the stack: an error exits with nothing to free */
    char buf[512];
    if (strlen(spec) >= sizeof buf) cli_die("%s: '%s' is too long", flag, spec);
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *a = strtok_r(buf, "/", &save); a; a = strtok_r(NULL, "/", &save)) {
        char *eq = strchr(a, '=');
        const char *value = eq ? eq + 1 : a;
        memset(sel, !eq, (size_t)n_layers);
        if (!eq && !windows) cli_die("%s: '%s' needs the form LAYERS=SCHEME", flag, a);
        if (eq) select_layers(flag, a, (size_t)(eq - a), n_layers, sel);
        int scheme = -1, window = -1;
        if (windows) {
            window = (int)cli_parse_long(flag, value, 0, INT_MAX);
            if (n_ctx && window > n_ctx)
                cli_die("%s: a %s of %d is wider than the context of %d (--ctx)", flag,
                        what == SPEC_CHUNK ? "chunk" : "window", window, n_ctx);
        } else {
            PeKind k;
            if (pe_kind_from_name(value, &k))
                cli_die("%s: unknown scheme '%s' (%s)", flag, value, cli_scheme_names());
            scheme = (int)k;
        }
        for (int l = 0; l < n_layers; l++) {
            PosencError err;
            int failed = !sel[l] ? 0
                         : what == SPEC_CHUNK
                             ? model_layer_chunk(m, table, l, window, &err)
                             : model_layer_override(m, variant, table, l, scheme, window, &err);
            if (failed) cli_die("%s: layer %d: %s", flag, l, err.msg);
        }
    }
}

void parse_group_window(const char *flag, const char *value, int *group, int *window) {
    char *end;
    long g = strtol(value, &end, 10), w = 0;
    int ok = end != value && *end == ',' && g >= 1 && g <= INT_MAX;
    if (ok) {
        const char *second = end + 1;
        w = strtol(second, &end, 10);
        ok = end != second && !*end && w >= 1 && w <= INT_MAX;
    }
    if (!ok) cli_die("%s expects G,W (a group and a window, integers >= 1), got '%s'", flag, value);
    *group = (int)g, *window = (int)w;
}

/* --attn-temperature B,L[,llama4] on the table: the checkpoint's
 * temperature replaced by the flag's. */
static void apply_temperature(const char *value, const Model *m, LayerAttention *table) {
    const char *flag = "--attn-temperature";
    char buf[64], *end, *form;
    snprintf(buf, sizeof buf, "%s", value);
    char *comma = strchr(buf, ','), *length = comma ? comma + 1 : NULL;
    if (comma) *comma = '\0';
    form = length ? strchr(length, ',') : NULL;
    if (form) *form++ = '\0';
    float beta = strtof(buf, &end);
    int ok = length && end != buf && !*end && beta > 0.0f && beta <= 100.0f;
    long l = ok ? strtol(length, &end, 10) : 0;
    ok = ok && end != length && !*end && l >= 1 && l <= INT_MAX && (!form || !strcmp(form, "llama4"));
    if (!ok || strlen(value) >= sizeof buf)
        cli_die("%s expects B,L or B,L,llama4 (B in (0, 100], L an integer >= 1), got '%s'", flag, value);
    for (int i = 0; i < m->config.n_layers; i++) table[i].temperature_beta = 0.0f;
    PosencError err;
    if (model_layers_temperature(m, table, beta, (int)l, form != NULL, &err)) cli_die("%s: %s", flag, err.msg);
}

/* The variant's per-layer table with the overrides: --window, then
 * --pe-layers, then the variant's own @ part (`label` as the user spelled
 * it), then Self-Extend on the layers that rotate, the attention
 * temperature and --sinks off; malloc'd. */
LayerAttention *variant_layers(const Options *o, const Model *m, const PeParams *p,
                                      const char *label, int n_ctx) {
    LayerAttention *table = model_layers_for(m, p);
    if (o->window) apply_layer_spec("--window", o->window, m, p, table, SPEC_WINDOW, n_ctx);
    if (o->chunk) apply_layer_spec("--chunk", o->chunk, m, p, table, SPEC_CHUNK, n_ctx);
    if (o->pe_layers) apply_layer_spec("--pe-layers", o->pe_layers, m, p, table, SPEC_SCHEME, n_ctx);
    const char *at = label ? strchr(label, '@') : NULL;
    if (at) apply_layer_spec("--pe", at + 1, m, p, table, SPEC_SCHEME, n_ctx);
    if (o->self_extend) {
        int group, window;
        PosencError err;
        parse_group_window("--self-extend", o->self_extend, &group, &window);
        if (model_layers_self_extend(m, table, group, window, &err))
            cli_die("--self-extend%s%s: %s", label ? " with --pe " : "", label ? label : "", err.msg);
    }
    if (o->attn_temperature) apply_temperature(o->attn_temperature, m, table);
    if (o->sinks && !sinks_is_list(o)) {
        PosencError err;
        if (model_layers_sinks_off(m, table, &err)) cli_die("--sinks off: %s", err.msg);
    } else if (o->sinks && !(cli_mode_bit(o->mode) & MODE_PPL)) {
        cli_die("--sinks %s: a list of settings (learned, off, keep:N, learned+keep:N) is compared by "
                "-m ppl; here --sinks takes off", o->sinks);
    }
    return table;
}

int sinks_is_list(const Options *o) { return o->sinks && strcmp(o->sinks, "off"); }

/* "learned", "off", "keep:N" or "learned+keep:N". */
static SinkSetting parse_sink_setting(const char *item, const Model *m, int n_ctx) {
    SinkSetting s = {.learned = !strncmp(item, "learned", 7), .keep = 0};
    const char *rest = s.learned ? item + 7 : !strcmp(item, "off") ? "" : item;
    if (s.learned && *rest == '+') rest++;
    else if (s.learned && *rest) rest = item; /* "learnedX": refused below */
    if (*rest) {
        char *end;
        long keep = strncmp(rest, "keep:", 5) ? -1 : strtol(rest + 5, &end, 10);
        if (keep < 0 || end == rest + 5 || *end)
            cli_die("--sinks: '%s' is not a setting (learned, off, keep:N, learned+keep:N)", item);
        PosencError err;
        if (keep > INT_MAX || context_shift_check_keep(n_ctx, (int)keep, &err))
            cli_die("--sinks %s: %s", item, keep > INT_MAX ? "too many kept cells" : err.msg);
        s.keep = (int)keep;
    }
    if (s.learned && !m->config.family.attn_sinks)
        cli_die("--sinks %s: the model has no learned attention sinks (architecture %s)", item,
                m->config.family.name);
    if (strlen(item) >= sizeof s.label) cli_die("--sinks: '%s' is too long", item);
    snprintf(s.label, sizeof s.label, "%s", item);
    return s;
}

int parse_sink_settings(const Options *o, const Model *m, SinkSetting *out) {
    char buf[512];
    if (strlen(o->sinks) >= sizeof buf) cli_die("--sinks: list too long");
    snprintf(buf, sizeof buf, "%s", o->sinks);
    int n = 0, keeps = 0, n_ctx = o->ctx ? o->ctx : m->config.seq_len;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == MAX_VARIANTS) cli_die("--sinks: at most %d settings", MAX_VARIANTS);
        out[n] = parse_sink_setting(t, m, n_ctx);
        keeps |= out[n].keep > 0;
        for (int u = 0; u < n; u++)
            if (out[u].learned == out[n].learned && out[u].keep == out[n].keep)
                cli_die("--sinks: '%s' and '%s' are the same setting", out[u].label, t);
        n++;
    }
    if (n == 0) cli_die("--sinks: empty list");
    if (keeps && !o->stream)
        cli_die("--sinks: kept cells (keep:N) matter only where a context shift discards cells: "
                "add --stream");
    if (keeps && cli_given(o, "--keep"))
        cli_die("--keep and --sinks keep:N both set the kept cells: give them in --sinks");
    return n;
}

/* A scaling the user asked for (spec: the --pe variant that names it, else
 * --rope-scaling) whose factor is 1 would leave RoPE as it is, and the run
 * would equal the baseline without a word: refused.  Dynamic NTK is the
 * exception, as it grows with the sequence whatever the factor. */
static void check_scaling_factor(const PeParams *p, const char *spec) {
    PeRopeScaling s = p->rope_scaling;
    int scales_by_factor = s == PE_ROPE_SCALING_LINEAR || s == PE_ROPE_SCALING_NTK ||
                           s == PE_ROPE_SCALING_YARN || s == PE_ROPE_SCALING_YARN_PAPER ||
                           s == PE_ROPE_SCALING_LLAMA3;
    if (p->kind != PE_ROPE || !scales_by_factor || p->rope_factor > 1.0f) return;
    if (spec)
        cli_die("--pe %s: a scaling factor of 1 leaves RoPE unscaled: give one (%s:4) or "
                "--rope-factor F", spec, spec);
    cli_die("--rope-scaling %s: a scaling factor of 1 leaves RoPE unscaled: give --rope-factor F",
            pe_rope_scaling_name(s));
}

/* One variant "NAME[:SCALING[:FACTOR]][@LAYERS=SCHEME...]" on top of the
 * checkpoint's scheme and the global flags. */
PeParams variant_params(const Model *m, const Options *o, const char *spec) {
    PeParams p = m->pe;
    if (o->rope_theta > 0.0f) p.rope_theta = o->rope_theta;
    if (o->alibi_max_bias > 0.0f) p.alibi_max_bias = o->alibi_max_bias;
    if (o->rope_factor > 0.0f) p.rope_factor = o->rope_factor;
    if (o->rope_orig_ctx > 0) p.rope_orig_ctx = o->rope_orig_ctx;
    if (o->rope_scaling && pe_rope_scaling_from_name(o->rope_scaling, &p.rope_scaling))
        cli_die("--rope-scaling: unknown mode '%s' (%s)", o->rope_scaling, cli_scaling_names());
    if (o->longrope_rule) {
        if (!strcmp(o->longrope_rule, "sequence")) p.longrope_rule = PE_LONGROPE_BY_SEQUENCE;
        else if (!strcmp(o->longrope_rule, "context")) p.longrope_rule = PE_LONGROPE_BY_CONTEXT;
        else cli_die("--longrope-rule: unknown rule '%s' (sequence|context)", o->longrope_rule);
    }
    if (o->pe_overflow) {
        if (!strcmp(o->pe_overflow, "error")) p.learned_overflow = PE_OVERFLOW_ERROR;
        else if (!strcmp(o->pe_overflow, "clamp")) p.learned_overflow = PE_OVERFLOW_CLAMP;
        else cli_die("--pe-overflow: unknown policy '%s' (error|clamp)", o->pe_overflow);
    }
    if (!spec) {
        if (o->rope_scaling) check_scaling_factor(&p, NULL);
        return p;
    }
    char name[64], scaling[64] = "", head[128];
    float factor = 0.0f;
    const char *at = strchr(spec, '@');
    size_t head_len = at ? (size_t)(at - spec) : strlen(spec);
    if (head_len >= sizeof head) cli_die("--pe: variant too long in '%s'", spec);
    memcpy(head, spec, head_len);
    head[head_len] = '\0';
    if (at) { /* its syntax and schemes, checked now */
        LayerAttention *table = model_layers_for(m, &p);
        apply_layer_spec("--pe", at + 1, m, &p, table, SPEC_SCHEME, 0);
        free(table);
    }
    spec = head;
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len >= sizeof name) cli_die("--pe: scheme name too long in '%s'", spec);
    memcpy(name, spec, len);
    name[len] = '\0';
    if (pe_kind_from_name(name, &p.kind))
        cli_die("--pe: unknown scheme '%s' (%s)", name, cli_scheme_names());
    if (colon) {
        char tail[64];
        snprintf(tail, sizeof tail, "%s", colon + 1);
        char *c2 = strchr(tail, ':');
        if (c2) {
            *c2 = '\0';
            factor = cli_parse_float("--pe factor", c2 + 1, 1.0f, 1e6f);
        }
        snprintf(scaling, sizeof scaling, "%s", tail);
        if (p.kind != PE_ROPE) cli_die("--pe: '%s': only rope takes a scaling mode", spec);
        if (pe_rope_scaling_from_name(scaling, &p.rope_scaling))
            cli_die("--pe: '%s': unknown scaling '%s' (%s)", spec, scaling, cli_scaling_names());
        if (factor > 0.0f) p.rope_factor = factor;
    }
    if (o->rope_scaling || colon) check_scaling_factor(&p, colon ? spec : NULL);
    return p;
}

/* A scheme the model cannot carry (e.g. `learned` without a position table)
 * is refused before any work. */
static void check_scheme(const Model *m, const PeParams *p, const char *label) {
    PosencError err;
    if (model_check_scheme(m, p, &err)) cli_die("--pe %s: %s", label, err.msg);
}

void resolve_variants(const Options *o, const Model *m, Variants *v) {
    const char *specs[MAX_VARIANTS] = {NULL};
    v->n = 1;
    if (o->pe_list) {
        if (strlen(o->pe_list) >= sizeof v->buf) cli_die("--pe: list too long");
        snprintf(v->buf, sizeof v->buf, "%s", o->pe_list);
        v->n = 0;
        for (char *save = NULL, *t = strtok_r(v->buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (v->n == MAX_VARIANTS) cli_die("--pe: at most %d variants", MAX_VARIANTS);
            specs[v->n++] = t;
        }
        if (v->n == 0) cli_die("--pe: empty list");
        if (v->n > 1 && !(cli_mode_bit(o->mode) & (MODE_PPL | MODE_PE | MODE_ATTENTION | MODE_PASSKEY | MODE_SERVE)))
            cli_die("--pe: a comma list compares variants and needs -m ppl, pe, attention, passkey or serve");
    }
    unsigned kinds = 0;
    int scaled = 0;
    for (int i = 0; i < v->n; i++) {
        v->params[i] = variant_params(m, o, specs[i]);
        v->labels[i] = specs[i] ? specs[i] : pe_kind_name(v->params[i].kind);
        check_scheme(m, &v->params[i], v->labels[i]);
        /* the per-layer overrides too, before any work (a ppl list of windows
         * is checked against its first) */
        free(variant_layers(o, m, &v->params[i], v->labels[i], o->ctx ? o->ctx : m->config.seq_len));
        kinds |= 1u << v->params[i].kind;
        scaled |= v->params[i].kind == PE_ROPE && v->params[i].rope_scaling != PE_ROPE_SCALING_NONE;
    }
    const struct { const char *flag; PeKind kind; } scheme_flags[] = {
        {"--rope-theta", PE_ROPE}, {"--rope-scaling", PE_ROPE}, {"--rope-factor", PE_ROPE},
        {"--rope-orig-ctx", PE_ROPE}, {"--longrope-rule", PE_ROPE},
        {"--alibi-max-bias", PE_ALIBI}, {"--pe-overflow", PE_LEARNED},
    };
    for (size_t f = 0; f < sizeof scheme_flags / sizeof *scheme_flags; f++)
        if (cli_given(o, scheme_flags[f].flag) && !(kinds & (1u << scheme_flags[f].kind)))
            cli_die("%s applies to %s and no scheme that runs is %s (see --pe)", scheme_flags[f].flag,
                    pe_kind_name(scheme_flags[f].kind), pe_kind_name(scheme_flags[f].kind));
    if (cli_given(o, "--rope-factor") && (kinds & (1u << PE_ROPE)) && !scaled)
        cli_die("--rope-factor %g scales nothing: name the scaling (--rope-scaling S, or --pe "
                "rope:S:F)", (double)o->rope_factor);
}

/* Positions past what the variant covers: a warning where the scheme can
 * go on, an error where it cannot (positional/ decides and states the
 * fact; here the flags that change it are added). */
void check_positions(const Model *m, const PeParams *p, const char *label, int last_pos) {
    PeRange r = pe_position_range(p, m->config.seq_len, m->weights.positional.n_positions, last_pos);
    switch (r.verdict) {
    case PE_RANGE_TRAINED: break;
    case PE_RANGE_EXTRAPOLATES: fprintf(stderr, "warning: %s: %s\n", label, r.fact); break;
    case PE_RANGE_CLAMPED:
        fprintf(stderr, "warning: %s: %s (--pe-overflow clamp)\n", label, r.fact);
        break;
    case PE_RANGE_REFUSED:
        cli_die("--pe %s: %s (lower --ctx/--pos-offset, or --pe-overflow clamp)", label, r.fact);
    }
}
