/* -m attention. */
#include <stdlib.h>

#include "cli/common.h"
#include "cli/modes.h"
#include "modes/attention_view.h"

typedef struct {
    const char *model;
    const int *ids;
    const char *const *token_names;
    const AttentionView *views;
    int n;
    AttentionSelection sel;
} AttentionReport;

static void attention_report_json(FILE *out, const void *arg) {
    const AttentionReport *r = arg;
    attention_view_write_json(out, r->model, r->ids, r->views, r->n, r->sel);
}

static int attention_report_charts(const SvgSink *sink, const void *arg, PosencError *err) {
    const AttentionReport *r = arg;
    return attention_view_write_charts(sink, r->views, r->n, r->sel, r->token_names, err);
}

/* A heatmap axis's name of each token: its position and its text, a space
 * shown as '_' and a line break as '|', at most TOKEN_NAME_BYTES of it. */
#define TOKEN_NAME_BYTES 8
static char **token_names(const Tokenizer *tok, const int *ids, int n) {
    char **names = malloc_or_exit((size_t)n * sizeof *names, "the token names");
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *piece = tokenizer_decode(tok, i ? ids[i - 1] : -1, ids[i], &len);
        size_t keep = len < TOKEN_NAME_BYTES ? len : TOKEN_NAME_BYTES;
        while (keep < len && keep > 0 && ((unsigned char)piece[keep] & 0xC0) == 0x80) keep--;
        names[i] = malloc_or_exit(keep + 16, "a token name");
        int at = snprintf(names[i], 16, "%d ", i);
        for (size_t j = 0; j < keep; j++)
            names[i][at++] = piece[j] == ' ' ? '_' : piece[j] == '\n' || piece[j] == '\r' ? '|'
                             : (unsigned char)piece[j] < 0x20 ? '?' : piece[j];
        names[i][at] = '\0';
    }
    return names;
}

/* Where each head attends for the text, under each --pe variant. */
#define ATTENTION_MAX_TOKENS 1024
int run_attention(const Options *o) {
    if (!o->prompt && !o->text_file) cli_die("-m attention needs a text: -i TEXT or -f FILE");
    Setup s;
    setup_open(&s, o, SETUP_TOKENIZER | SETUP_VARIANTS);
    const Variants *v = &s.v;
    const ModelConfig *c = &s.model.config;
    if (o->layer >= c->n_layers)
        cli_die("--layer %d: the model has %d layers (0..%d)", o->layer, c->n_layers, c->n_layers - 1);
    if (o->head >= c->n_heads)
        cli_die("--head %d: the model has %d heads (0..%d)", o->head, c->n_heads, c->n_heads - 1);
    int n_ids;
    int *ids = setup_prompt_ids(&s, o, &n_ids);
    if (n_ids > ATTENTION_MAX_TOKENS)
        cli_die("%s: the text has %d tokens; -m attention shows at most %d", text_flag(o), n_ids,
                ATTENTION_MAX_TOKENS);
    for (int i = 0; i < v->n; i++) check_positions(&s.model, &v->params[i], v->labels[i], n_ids - 1);
    AttentionView views[MAX_VARIANTS];
    for (int i = 0; i < v->n; i++) {
        Context ctx;
        build_context(&ctx, o, &s.model, &v->params[i], v->labels[i],
                      context_size_generate(n_ids, TENSOR_F32));
        PosencError err;
        if (attention_view_build(&views[i], &ctx, ids, n_ids, v->labels[i], &err))
            cli_die("%s", err.msg);
        context_free(&ctx);
    }
    AttentionSelection sel = {o->layer, o->head};
    char **names = token_names(&s.tok, ids, n_ids);
    if (o->json) attention_view_write_json(stdout, o->model_path, ids, views, v->n, sel);
    else attention_view_print(stdout, o->model_path, views, v->n, sel);
    PosencError err;
    if (o->csv_path && attention_view_write_csv(o->csv_path, views, v->n, sel, &err))
        cli_die("--csv: %s", err.msg);
    SvgSink charts = {.prefix = o->svg_path, .written = stderr};
    if (o->svg_path &&
        attention_view_write_charts(&charts, views, v->n, sel, (const char *const *)names, &err))
        cli_die("--svg: %s", err.msg);
    if (o->html_path) {
        char title[1100];
        snprintf(title, sizeof title, "posenc -m attention: %s", o->model_path);
        AttentionReport ar = {o->model_path, ids, (const char *const *)names, views, v->n, sel};
        write_html(o, title, &(ViewReport){.how_to_read = "Hover a cell for its value; the head picker "
                   "shows one head's weights and entropy.", .json = attention_report_json,
                   .charts = attention_report_charts, .arg = &ar});
    }
    for (int i = 0; i < v->n; i++) attention_view_free(&views[i]);
    for (int i = 0; i < n_ids; i++) free(names[i]);
    free(names);
    free(ids);
    setup_close(&s);
    return EXIT_SUCCESS;
}
