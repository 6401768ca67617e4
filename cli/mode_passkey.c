/* -m passkey: retrieval of a key hidden in filler, over context lengths x
 * depths x --pe variants (modes/passkey.h). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"
#include "cli/modes.h"
#include "modes/passkey.h"
#include "modes/passkey_report.h"

#define MAX_CELLS_PER_AXIS 64

/* A comma list of numbers in [lo, hi], at most MAX_CELLS_PER_AXIS, each
 * once, in increasing order. */
static int parse_list(const char *flag, const char *s, double lo, double hi, int whole, double *out) {
    int n = 0;
    for (const char *p = s;;) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || (*end && *end != ',') || !(x >= lo && x <= hi) || (whole && x != floor(x)))
            cli_die("%s: '%s' is not a list of %s from %g to %g", flag, s,
                    whole ? "whole numbers" : "numbers", lo, hi);
        if (n == MAX_CELLS_PER_AXIS) cli_die("%s: at most %d values", flag, MAX_CELLS_PER_AXIS);
        if (n && x <= out[n - 1]) cli_die("%s: '%s' must increase", flag, s);
        out[n++] = x;
        if (!*end) break;
        p = end + 1;
    }
    return n;
}

/* The flag a chat template's error is blamed on. */
static const char *template_flag(const Options *o) {
    return o->chat_template ? "--chat-template" : "--chat";
}

/* The default lengths: the trained context / 4 .. x 4, doubling. */
static int default_lengths(int trained, double *out) {
    int n = 0;
    for (long len = trained / 4 > 16 ? trained / 4 : 16; len <= 4L * trained && len <= 1 << 22; len *= 2)
        out[n++] = (double)len;
    return n;
}

/* The cells a run scores and the haystacks in them (every variant reads the same). */
typedef struct {
    int lengths[MAX_CELLS_PER_AXIS], n_lengths;
    double depths[MAX_CELLS_PER_AXIS];
    int n_depths;
    PasskeyCase *cases;
    int n_cases;
    int *cell_of;      /* (n_cases) index of each case's cell, length-major */
} Plan;

static int index_of_length(const Plan *p, int length) {
    for (int i = 0; i < p->n_lengths; i++)
        if (p->lengths[i] == length) return i;
    return -1;
}

static int index_of_depth(const Plan *p, double depth) {
    for (int j = 0; j < p->n_depths; j++)
        if (fabs(p->depths[j] - depth) < 1e-9) return j;
    return -1;
}

/* --haystacks: the file's cells (those of --lengths and --depths only, when
 * given), lengths and depths in increasing order. */
static void plan_from_file(const Options *o, const PasskeyEncoder *enc, Plan *p) {
    PosencError err;
    PasskeyCase *all;
    int n_all;
    if (passkey_read_haystacks(o->haystacks, enc, &all, &n_all, &err)) cli_die("--haystacks %s", err.msg);
    double wanted_len[MAX_CELLS_PER_AXIS], wanted_depth[MAX_CELLS_PER_AXIS];
    int n_wl = o->lengths ? parse_list("--lengths", o->lengths, 1, 1 << 22, 1, wanted_len) : 0;
    int n_wd = o->depths ? parse_list("--depths", o->depths, 0, 100, 0, wanted_depth) : 0;
    p->cases = malloc_or_exit((size_t)n_all * sizeof *p->cases, "the haystacks");
    for (int k = 0; k < n_all; k++) {
        PasskeyCase *c = &all[k];
        int keep = !n_wl && !n_wd;
        for (int i = 0; i < n_wl && !keep; i++) keep = c->length == (int)wanted_len[i];
        if (n_wl && n_wd) {
            int depth_ok = 0;
            for (int j = 0; j < n_wd; j++) depth_ok |= fabs(c->depth * 100 - wanted_depth[j]) < 1e-6;
            keep &= depth_ok;
        } else if (n_wd) {
            for (int j = 0; j < n_wd && !keep; j++) keep = fabs(c->depth * 100 - wanted_depth[j]) < 1e-6;
        }
        if (!keep) {
            passkey_case_free(c);
            continue;
        }
        p->cases[p->n_cases++] = *c;
        /* the axes in increasing order */
        if (index_of_length(p, c->length) < 0) {
            if (p->n_lengths == MAX_CELLS_PER_AXIS)
                cli_die("--haystacks %s: more than %d lengths", o->haystacks, MAX_CELLS_PER_AXIS);
            int i = p->n_lengths++;
            while (i > 0 && p->lengths[i - 1] > c->length) p->lengths[i] = p->lengths[i - 1], i--;
            p->lengths[i] = c->length;
        }
        if (index_of_depth(p, c->depth) < 0) {
            if (p->n_depths == MAX_CELLS_PER_AXIS)
                cli_die("--haystacks %s: more than %d depths", o->haystacks, MAX_CELLS_PER_AXIS);
            int j = p->n_depths++;
            while (j > 0 && p->depths[j - 1] > c->depth) p->depths[j] = p->depths[j - 1], j--;
            p->depths[j] = c->depth;
        }
    }
    free(all);
    if (!p->n_cases)
        cli_die("--haystacks %s: no haystack has the --lengths and --depths asked for", o->haystacks);
}

/* Without --haystacks: --trials haystacks of every length and depth, built
 * from -f's filler (or the papers' sentence) and the seed. */
static void plan_built(const Options *o, const Setup *s, const PasskeyEncoder *enc, const char *filler,
                       uint64_t seed, Plan *p) {
    double lengths[MAX_CELLS_PER_AXIS];
    p->n_lengths = o->lengths ? parse_list("--lengths", o->lengths, 1, 1 << 22, 1, lengths)
                              : default_lengths(s->model.config.seq_len, lengths);
    for (int i = 0; i < p->n_lengths; i++) p->lengths[i] = (int)lengths[i];
    if (o->depths) {
        p->n_depths = parse_list("--depths", o->depths, 0, 100, 0, p->depths);
        for (int j = 0; j < p->n_depths; j++) p->depths[j] /= 100;
    } else {
        p->n_depths = 5;
        for (int j = 0; j < 5; j++) p->depths[j] = 0.1 + 0.2 * j;
    }
    PasskeyFormat f = passkey_default_format;
    if (o->intro) f.intro = o->intro;
    if (o->needle) f.needle = o->needle;
    if (o->question) f.question = o->question;
    f.digits = o->key_digits;
    PosencError err;
    if (passkey_check_format(&f, &err))
        cli_die("%s: %s", o->needle && strstr(err.msg, "needle") ? "--needle"
                          : o->question && strstr(err.msg, "question") ? "--question" : "--key-digits",
                err.msg);
    size_t n;
    if (!size_mul3(&n, (size_t)p->n_lengths, (size_t)p->n_depths, (size_t)o->trials) || n > INT_MAX)
        cli_die("--trials %d: too many haystacks", o->trials);
    p->cases = malloc_or_exit(n * sizeof *p->cases, "the haystacks");
    for (int i = 0; i < p->n_lengths; i++)
        for (int j = 0; j < p->n_depths; j++)
            for (int t = 0; t < o->trials; t++) {
                if (passkey_build(enc, filler, &f, p->lengths[i], p->depths[j], t, seed,
                                  &p->cases[p->n_cases], &err))
                {
                    if (strstr(err.msg, "chat template")) cli_die("%s: %s", template_flag(o), err.msg);
                    cli_die("--lengths %d: %s", p->lengths[i], err.msg);
                }
                p->n_cases++;
            }
}

static void plan_cells(Plan *p) {
    p->cell_of = malloc_or_exit((size_t)p->n_cases * sizeof *p->cell_of, "the cells");
    for (int k = 0; k < p->n_cases; k++)
        p->cell_of[k] = index_of_length(p, p->cases[k].length) * p->n_depths +
                        index_of_depth(p, p->cases[k].depth);
}

static void plan_free(Plan *p) {
    for (int k = 0; k < p->n_cases; k++) passkey_case_free(&p->cases[k]);
    free(p->cases);
    free(p->cell_of);
}

/* Where a run stands (cli/common.h's progress line).  The time left goes by
 * tokens, since a haystack's cost grows with its length. */
typedef struct {
    ProgressLine line;
    long haystacks, tokens;            /* done */
    long total_haystacks, total_tokens;
} Progress;

static void show_progress(Progress *pr, const char *label) {
    int last = pr->haystacks == pr->total_haystacks;
    if (!progress_due(&pr->line, last)) return;
    double elapsed = pr->line.shown_s - pr->line.start_s;
    double left = pr->tokens ? elapsed * (double)(pr->total_tokens - pr->tokens) / (double)pr->tokens : 0;
    char line[160];
    snprintf(line, sizeof line, "passkey %ld/%ld haystacks (%s), %s %.0f s", pr->haystacks,
             pr->total_haystacks, label, last ? "took" : "ETA", last ? elapsed : left);
    progress_write(&pr->line, line, last);
}

static void report_json(FILE *out, const void *arg) { passkey_report_json_array(out, arg); }
static int report_charts(const SvgSink *sink, const void *arg, PosencError *err) {
    return passkey_report_charts(sink, arg, err);
}

int run_passkey(const Options *o) {
    static const char *const builders[] = {"--intro", "--needle", "--question", "--key-digits",
                                           "-f", "--trials", "-s"};
    for (size_t b = 0; b < sizeof builders / sizeof *builders && o->haystacks; b++)
        if (cli_given(o, builders[b]))
            cli_die("%s: --haystacks gives the haystacks; %s is for building them", builders[b],
                    builders[b]);
    if (o->system_prompt && !o->chat && !o->chat_template)
        cli_die("-y: a system prompt is a chat's: give --chat (or --chat-template T) too");
    if (o->chat_template_kwargs && !o->chat && !o->chat_template)
        cli_die("--chat-template-kwargs: template variables are a chat's: give --chat (or "
                "--chat-template T) too");
    Setup s;
    setup_open(&s, o, SETUP_TOKENIZER | SETUP_VARIANTS);
    const Model *model = &s.model;
    const Variants *v = &s.v;
    uint64_t seed = cli_given(o, "-s") ? o->seed : 1;
    size_t filler_len;
    char *filler = o->text_file ? read_text_file("-f", o->text_file, &filler_len) : NULL;
    /* a chat model reads the haystack as its user's turn */
    JinjaTemplate *template = o->chat || o->chat_template ? load_chat_template(o, model) : NULL;
    JsonDoc kwargs_doc;
    const JsonValue *kwargs = template ? load_template_kwargs(o, &kwargs_doc) : NULL;
    ChatFormat chat;
    if (template) chat_format_init(&chat, template, kwargs, &s.tok);
    PasskeyEncoder enc = {&s.tok, template ? &chat : NULL, o->system_prompt};
    if (template) { /* the template's own text must encode, or no haystack can */
        PosencError err;
        size_t len;
        char *text = chat_format_render(&chat, &(ChatMessage){"user", ""}, 1, 1, &len, &err);
        int *ids = NULL, n_ids;
        int failed = !text || chat_format_encode(&chat, text, len, &ids, &n_ids, &err);
        free(ids);
        free(text); /* before a die: LeakSanitizer sees no pointer to it left */
        if (failed) cli_die("%s: %s", template_flag(o), err.msg);
    }
    Plan plan = {0};
    if (o->haystacks) plan_from_file(o, &enc, &plan);
    else plan_built(o, &s, &enc, filler ? filler : passkey_default_filler, seed, &plan);
    free(filler);
    if (template) {
        chat_format_free(&chat);
        jinja_free(template);
        if (kwargs) json_free(&kwargs_doc);
    }
    plan_cells(&plan);

    /* Before any work: every haystack fits the cache, and each variant
     * either encodes a length's positions or skips that length. */
    int longest = 0, most_key = 0;
    for (int k = 0; k < plan.n_cases; k++) {
        if (plan.cases[k].n_ids > longest) longest = plan.cases[k].n_ids;
        int n_key = plan.cases[k].n_ids - plan.cases[k].key_start;
        if (n_key > most_key) most_key = n_key;
    }
    int n_ctx = o->ctx ? o->ctx : longest;
    if (longest > n_ctx)
        cli_die("--ctx %d: a haystack of length %d has %d tokens (lower --lengths, or raise --ctx)",
                n_ctx, plan.lengths[plan.n_lengths - 1], longest);
    ContextSize size = context_size_generate(n_ctx, kv_type(o));
    if (most_key > size.max_tokens)
        cli_die("--key-digits: the key takes %d tokens, more than one forward chunk (%d)", most_key,
                size.max_tokens);
    size.logit_rows = most_key;
    PasskeyCell *cells[MAX_VARIANTS];
    int n_cells = plan.n_lengths * plan.n_depths;
    for (int i = 0; i < v->n; i++) {
        cells[i] = calloc_or_exit((size_t)n_cells, sizeof *cells[i], "the cells");
        for (int c = 0; c < n_cells; c++) {
            cells[i][c].length = plan.lengths[c / plan.n_depths];
            cells[i][c].depth = plan.depths[c % plan.n_depths];
        }
        int encodable = 0, skipped_from = 0;
        for (int k = 0; k < plan.n_cases; k++) {
            PeRange r = pe_position_range(&v->params[i], model->config.seq_len,
                                          model->weights.positional.n_positions, plan.cases[k].n_ids - 1);
            if (r.verdict == PE_RANGE_REFUSED) {
                cells[i][plan.cell_of[k]].skipped = 1;
                if (!skipped_from || plan.cases[k].length < skipped_from) skipped_from = plan.cases[k].length;
            } else if (plan.cases[k].n_ids > encodable) {
                encodable = plan.cases[k].n_ids;
            }
        }
        if (skipped_from)
            fprintf(stderr, "note: --pe %s: lengths from %d on are past the positions it encodes: "
                            "not scored (--pe-overflow clamp scores them)\n", v->labels[i], skipped_from);
        if (encodable) check_positions(model, &v->params[i], v->labels[i], encodable - 1);
    }

    if (!o->json)
        printf("# passkey on %s: %s; %d haystacks per variant\n"
               "# exact/trials: trials whose every key token was the most probable; then the key's "
               "log-probability, mean over the trials\n",
               o->model_path, o->haystacks ? o->haystacks : o->text_file ? o->text_file
                                                                     : "the papers' filler",
               plan.n_cases);
    fflush(stdout);
    Progress pr = {0};
    for (int i = 0; i < v->n; i++)
        for (int k = 0; k < plan.n_cases; k++)
            if (!cells[i][plan.cell_of[k]].skipped) {
                pr.total_haystacks++;
                pr.total_tokens += plan.cases[k].n_ids;
            }
    catch_interrupts(); /* Ctrl-C: the table of what was scored */
    GroupAttention ga = {0};
    if (o->self_extend_llamacpp)
        parse_group_window("--self-extend-llamacpp", o->self_extend_llamacpp, &ga.group, &ga.window);
    progress_begin(&pr.line);
    for (int i = 0; i < v->n && !cli_interrupted; i++) {
        Context ctx;
        build_context(&ctx, o, model, &v->params[i], v->labels[i], size);
        PosencError err;
        if (o->self_extend_llamacpp && group_attention_check(&ctx, ga.group, ga.window, &err))
            cli_die("--self-extend-llamacpp %s: %s", o->self_extend_llamacpp, err.msg);
        for (int k = 0; k < plan.n_cases && !cli_interrupted; k++) {
            PasskeyCell *cell = &cells[i][plan.cell_of[k]];
            if (cell->skipped) continue;
            PasskeyScore score;
            if (passkey_score(&ctx, &plan.cases[k], o->self_extend_llamacpp ? &ga : NULL, &score, &err)) cli_die("--pe %s: %s", v->labels[i], err.msg);
            cell->trials++;
            cell->exact += score.exact;
            cell->logprob_sum += score.logprob;
            pr.haystacks++;
            pr.tokens += plan.cases[k].n_ids;
            show_progress(&pr, v->labels[i]);
        }
        context_free(&ctx);
    }
    if (cli_interrupted)
        fprintf(stderr, "note: interrupted: the table holds the %ld haystacks scored\n", pr.haystacks);

    PasskeyGrid grid = {plan.lengths, plan.n_lengths, plan.depths, plan.n_depths, v->labels,
                        cells, v->n};
    if (o->json) passkey_report_json_lines(stdout, &grid);
    else passkey_report_table(stdout, &grid);
    PosencError err;
    if (o->csv_path && passkey_report_write_csv(o->csv_path, &grid, &err)) cli_die("--csv: %s", err.msg);
    SvgSink charts = {.prefix = o->svg_path, .written = stderr};
    if (o->svg_path && passkey_report_charts(&charts, &grid, &err)) cli_die("--svg: %s", err.msg);
    if (o->html_path) {
        char title[1100];
        snprintf(title, sizeof title, "posenc -m passkey: %s", o->model_path);
        write_html(o, title, &(ViewReport){.how_to_read = "Each panel is one --pe variant: rows are "
                   "context lengths, columns the depth of the key; hover a cell for its value.",
                   .json = report_json, .charts = report_charts, .arg = &grid});
    }
    for (int i = 0; i < v->n; i++) free(cells[i]);
    plan_free(&plan);
    setup_close(&s);
    return cli_interrupted ? 128 + SIGINT : EXIT_SUCCESS;
}
