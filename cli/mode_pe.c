/* -m pe. */
#include <stdlib.h>

#include "cli/common.h"
#include "cli/modes.h"
#include "modes/pe_view.h"

typedef struct {
    const char *model;
    const PeView *views;
    int n;
} PeReport;

static void pe_report_json(FILE *out, const void *arg) {
    const PeReport *r = arg;
    pe_view_write_json(out, r->model, r->views, r->n);
}

static int pe_report_charts(const SvgSink *sink, const void *arg, PosencError *err) {
    const PeReport *r = arg;
    return pe_view_write_charts(sink, r->views, r->n, err);
}

/* -m pe with -i/-f: the text run through a context of the variant, whose
 * cached keys the RoPE view reads; NULL for a scheme without rotation. */
static Context *pe_keys_context(const Options *o, const Model *m, const PeParams *p,
                                const char *label, const int *ids, int n_ids) {
    if (!ids || !pe_kind_ops(p->kind)->rotate) return NULL;
    check_positions(m, p, label, n_ids - 1);
    Context *ctx = malloc_or_exit(sizeof *ctx, "a context");
    build_context(ctx, o, m, p, label, context_size_generate(n_ids, TENSOR_F32));
    PosencError err;
    if (context_check_tokens(ctx, ids, n_ids, 0, &err))
        cli_die("%s: %s", text_flag(o), err.msg);
    context_prefill(ctx, ids, n_ids, 0);
    return ctx;
}

/* The positional scheme of each --pe variant as data: --json, a summary,
 * --svg PREFIX charts. */
int run_pe(const Options *o) {
    int have_text = o->prompt || o->text_file;
    if (o->tokenizer_path && !have_text)
        cli_die("-z encodes the text of -i or -f, which -m pe reads only for the RoPE view's keys");
    Setup s;
    setup_open(&s, o, SETUP_VARIANTS | (have_text ? SETUP_TOKENIZER : 0));
    const Variants *v = &s.v;
    const Model *model = &s.model;
    int rotates = 0;
    for (int i = 0; i < v->n; i++) rotates |= pe_kind_ops(v->params[i].kind)->rotate != NULL;
    if (have_text && !rotates)
        cli_die("%s: the text gives the RoPE view its keys, and no --pe variant rotates (%s)",
                text_flag(o), o->pe_list ? o->pe_list : v->labels[0]);
    int n_pos = o->ctx ? o->ctx : model->config.seq_len < 64 ? model->config.seq_len : 64;
    if (n_pos > 4096) cli_die("--ctx %d: -m pe shows at most 4096 positions", n_pos);
    for (int i = 0; i < v->n; i++) check_positions(model, &v->params[i], v->labels[i], n_pos - 1);
    int n_ids = 0;
    int *ids = have_text ? setup_prompt_ids(&s, o, &n_ids) : NULL;
    PeView views[MAX_VARIANTS];
    for (int i = 0; i < v->n; i++) {
        Context *keys = pe_keys_context(o, model, &v->params[i], v->labels[i], ids, n_ids);
        PosencError err;
        LayerAttention *layers = variant_layers(o, model, &v->params[i], v->labels[i], n_pos);
        int failed = pe_view_build(&views[i], model, &v->params[i], layers, v->labels[i], n_pos,
                                   keys, &err);
        free(layers);
        if (failed)
            cli_die("--pe %s: %s", v->labels[i], err.msg);
        if (keys) context_free(keys);
        free(keys);
    }
    if (o->json) pe_view_write_json(stdout, o->model_path, views, v->n);
    else pe_view_print(stdout, o->model_path, views, v->n);
    PosencError err;
    SvgSink charts = {.prefix = o->svg_path, .written = stderr};
    if (o->svg_path && pe_view_write_charts(&charts, views, v->n, &err)) cli_die("--svg: %s", err.msg);
    if (o->html_path) {
        char title[1100];
        snprintf(title, sizeof title, "posenc -m pe: %s", o->model_path);
        PeReport pr = {o->model_path, views, v->n};
        write_html(o, title, &(ViewReport){.how_to_read = "Hover a cell for its value; click a "
                   "similarity cell for its two positions' similarity.", .json = pe_report_json,
                   .charts = pe_report_charts, .arg = &pr});
    }
    for (int i = 0; i < v->n; i++) pe_view_free(&views[i]);
    free(ids);
    setup_close(&s);
    return EXIT_SUCCESS;
}
