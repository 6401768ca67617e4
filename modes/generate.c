#include "modes/generate.h"

#include "modes/cache_dump.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

void write_piece(FILE *out, const char *piece, size_t len) {
    if (len == 0) return;
    if (len == 1 && !(isprint((unsigned char)piece[0]) || isspace((unsigned char)piece[0])))
        return;
    fwrite(piece, 1, len, out);
}

/* The text written so far ends mid-line: a trace line sharing the terminal
 * must start on a line of its own. */
typedef struct {
    const GenerateOptions *opt;
    int mid_line;
} Output;

static void emit(FILE *out, Output *o, const Tokenizer *tok, int prev, int token) {
    size_t len;
    const char *piece = tokenizer_decode(tok, prev, token, &len);
    write_piece(out, piece, len);
    if (len) o->mid_line = piece[len - 1] != '\n';
    fflush(out);
}

/* Tells the caller about a generated token; the cache's last cell holds
 * the token whose logits chose it. */
static void report_step(const Context *ctx, const Tokenizer *tok, const GenerateOptions *opt,
                        int made, int prev, int token, const float *logits) {
    GenerateStep step = {.step = made, .pos = ctx->cache.pos[ctx->cache.n_used - 1],
                         .token = token, .logits = logits};
    step.piece = tokenizer_decode(tok, prev, token, &step.piece_len);
    opt->on_step(&step, opt->step_user);
}

/* Starts a trace line where it cannot run into the text. */
static FILE *trace_begin(Output *o) {
    FILE *t = o->opt->trace;
    if (o->opt->trace_shares_out && o->mid_line) {
        fputc('\n', t);
        o->mid_line = 0;
    }
    return t;
}

void generate_write_escaped(FILE *out, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", out);
        else if (c == '\'' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) fprintf(out, "\\x%02x", c);
        else fputc(c, out);
    }
}

/* Token text in quotes, control bytes escaped, long chunks elided; a BOS
 * is named before the quotes, not decoded. */
static void trace_tokens(FILE *t, const Tokenizer *tok, const int *ids, int n) {
    enum { MAX_SHOWN = 48 };
    int shown = 0;
    if (n > 0 && ids[0] == tok->bos_id) fputs("BOS ", t);
    fputc('\'', t);
    for (int i = 0; i < n && shown < MAX_SHOWN; i++) {
        if (ids[i] == tok->bos_id) continue;
        size_t len;
        const char *piece = tokenizer_decode(tok, i ? ids[i - 1] : -1, ids[i], &len);
        size_t take = len < (size_t)(MAX_SHOWN - shown) ? len : (size_t)(MAX_SHOWN - shown);
        generate_write_escaped(t, piece, take);
        shown += (int)take;
    }
    fputs(shown == MAX_SHOWN ? "'..." : "'", t);
}

void generate_trace_chunk(FILE *t, const Context *ctx, const Tokenizer *tok, const int *ids, int n,
                          int pos0) {
    char ranges[256];
    kv_cache_format_positions(&ctx->cache, ranges, sizeof ranges);
    if (n == 1) fprintf(t, "[pos] q=%d ", pos0);
    else fprintf(t, "[pos] q=%d-%d (%d tokens) ", pos0, pos0 + n - 1, n);
    trace_tokens(t, tok, ids, n);
    fprintf(t, " cache=%s (%d/%d cells)", ranges, ctx->cache.n_used, ctx->cache.n_ctx);
    int layers = 0, window = context_narrowest_window(ctx, &layers), last = pos0 + n - 1;
    if (window) { /* what the chunk's last query can still see in its narrowest layers */
        int first = model_window_first(window, last), out = 0;
        for (int c = 0; c < ctx->cache.n_used; c++) out += ctx->cache.pos[c] < first;
        fprintf(t, " window=%d", window);
        if (layers < ctx->model->config.n_layers)
            fprintf(t, " (%d of %d layers)", layers, ctx->model->config.n_layers);
        fprintf(t, ": q=%d sees %d-%d, %d cached cell%s out of reach", last, first, last, out,
                out == 1 ? "" : "s");
    }
    int se = context_self_extend_layer(ctx);
    if (se >= 0) { /* both kinds of positions the chunk's last query reads */
        int g = ctx->layers[se].self_extend_group, w = ctx->layers[se].self_extend_window;
        int far = 0, lo = -1, hi = -1;
        for (int c = 0; c < ctx->cache.n_used; c++) {
            int p = ctx->cache.pos[c];
            if (last - p < w) continue;
            far++, lo = lo < 0 || p < lo ? p : lo, hi = p > hi ? p : hi;
        }
        fprintf(t, " self-extend G=%d W=%d: q=%d reads %d-%d at their positions", g, w, last,
                last - w + 1 > 0 ? last - w + 1 : 0, last);
        if (far)
            fprintf(t, ", %d cell%s at %d-%d grouped to %d-%d with q at %d", far, far == 1 ? "" : "s",
                    lo, hi, lo / g, hi / g, last / g + w - w / g);
    }
    fputc('\n', t);
}

static void trace_chunk(Output *o, const Context *ctx, const Tokenizer *tok, const int *ids, int n,
                        int pos0) {
    generate_trace_chunk(trace_begin(o), ctx, tok, ids, n, pos0);
}

int generate_make_room(Context *ctx, int keep, ContextShiftMode shift, const ShiftReport *report,
                       PosencError *err) {
    KVCache *kv = &ctx->cache;
    if (kv->n_used < kv->n_ctx) return 0;
    if (shift == CONTEXT_SHIFT_OFF) return 1;
    int discard = context_shift_discard(ctx, keep);
    int first_pos = kv->pos[keep], last_pos = kv->pos[keep + discard - 1];
    if (report->dump) cache_dump(report->dump, ctx, report->tok, "before a context shift");
    if (context_shift(ctx, keep, discard, shift, err)) return -1;
    if (report->trace)
        fprintf(report->trace, "[shift] kept %d, discarded positions %d-%d, moved %d cells by -%d (%s)\n",
                keep, first_pos, last_pos, kv->n_used - keep, discard, context_shift_action(ctx, shift));
    if (report->dump) {
        char when[128];
        snprintf(when, sizeof when, "after it (kept %d, discarded positions %d-%d, moved %d cells by -%d, %s)",
                 keep, first_pos, last_pos, kv->n_used - keep, discard, context_shift_action(ctx, shift));
        cache_dump(report->dump, ctx, report->tok, when);
    }
    return 0;
}

static int make_room(Context *ctx, const Tokenizer *tok, Output *o, PosencError *err) {
    const GenerateOptions *opt = o->opt;
    ShiftReport report = {.tok = tok, .dump = opt->dump_cache};
    if (opt->trace && ctx->cache.n_used == ctx->cache.n_ctx && opt->shift != CONTEXT_SHIFT_OFF)
        report.trace = trace_begin(o);
    if (report.dump && report.trace == NULL && opt->trace_shares_out && o->mid_line) trace_begin(o);
    return generate_make_room(ctx, opt->keep, opt->shift, &report, err);
}

/* llama.cpp's group attention before a forward call at `next`: the
 * position the call takes now, its edits on the trace. */
static int group(Context *ctx, Output *o, int next) {
    FILE *trace = NULL;
    GroupAttention *ga = o->opt->group_attention;
    if (o->opt->trace && next >= ga->grouped + ga->window) trace = trace_begin(o);
    return group_attention_compress(ctx, ga, next, trace);
}

/* The prompt in chunks of the context's largest, each after group
 * attention's edits (llama.cpp's between its batches of -b tokens); the
 * last chunk's logits. */
static const float *prefill_grouped(Context *ctx, Output *o, const Tokenizer *tok, const int *ids,
                                    int n, int pos) {
    const float *logits = NULL;
    for (int done = 0; done < n;) {
        int chunk = n - done < ctx->state.max_tokens ? n - done : ctx->state.max_tokens;
        pos = group(ctx, o, pos);
        if (o->opt->trace) trace_chunk(o, ctx, tok, ids + done, chunk, pos);
        logits = context_forward(ctx, ids + done, chunk, pos, 0);
        done += chunk, pos += chunk;
    }
    return logits;
}

/* Samples `needed` tokens after the prefilled prompt (fewer if BOS or an
 * end-of-generation token comes);
 * every sampled token but the last is fed back. */
static int decode_loop(Context *ctx, const Tokenizer *tok, Sampler *sampler, const float *logits,
                       int token, int needed, Output *o, FILE *out, GenerateStats *st,
                       double t_start, PosencError *err) {
    for (;;) {
        if (o->opt->interrupted && *o->opt->interrupted) {
            st->interrupted = 1;
            return 0;
        }
        int next = sampler_sample(sampler, logits);
        if (st->n_generated++ == 0) st->first_token_s = time_now_s() - t_start;
        if (next == tok->bos_id || tokenizer_is_eog(tok, next)) return 0;
        sampler_accept(sampler, next);
        emit(out, o, tok, token, next);
        if (o->opt->on_step)
            report_step(ctx, tok, o->opt, st->n_generated - 1, token, next, logits);
        token = next;
        if (st->n_generated >= needed) return 0;
        int full = ctx->cache.n_used == ctx->cache.n_ctx;
        int room = make_room(ctx, tok, o, err);
        if (room < 0) return -1;
        if (room > 0) {
            st->stopped_full = 1;
            return 0;
        }
        st->n_shifts += full;
        int pos = ctx->cache.pos[ctx->cache.n_used - 1] + 1;
        if (o->opt->group_attention) pos = group(ctx, o, pos);
        if (o->opt->trace) trace_chunk(o, ctx, tok, &token, 1, pos);
        logits = context_step(ctx, &token, 1, pos, 0, err);
        if (!logits) return -1;
    }
}

int generate_encode_prompt(const Tokenizer *tok, const char *prompt, int **ids, int *n_ids,
                           PosencError *err) {
    const char *text = prompt ? prompt : "";
    if (tokenizer_encode_alloc(tok, text, strlen(text), 1, 0, ids, n_ids, err)) return -1;
    if (*n_ids > 0) return 0;
    free(*ids);
    *ids = NULL;
    posenc_error(err, "the prompt encodes to no tokens and the vocabulary has no BOS to start from");
    return posenc_error_prefix(err, tok->source);
}

int generate_text(Context *ctx, const Tokenizer *tok, Sampler *sampler,
                  const GenerateOptions *opt, FILE *out, GenerateStats *st, PosencError *err) {
    double t_start = time_now_s();
    memset(st, 0, sizeof *st);
    Output o = {.opt = opt};
    int *ids = NULL, n_prompt = 0, rc = -1, n_ctx = ctx->cache.n_ctx, pos0 = opt->pos_offset;
    if (generate_encode_prompt(tok, opt->prompt, &ids, &n_prompt, err)) goto out;
    if (opt->shift != CONTEXT_SHIFT_OFF && context_shift_check_keep(n_ctx, opt->keep, err)) goto out;
    if (n_prompt > n_ctx) {
        posenc_error(err, "prompt is %d tokens but the context holds %d (raise --ctx or shorten "
                          "the prompt)", n_prompt, n_ctx);
        goto out;
    }
    if (context_check_tokens(ctx, ids, n_prompt, pos0, err)) goto out;
    int steps = opt->steps <= 0 ? n_ctx : opt->steps;

    /* `steps` counts the tokens of the text, prompt included; a leading BOS
     * is not text (so with BOS this is llama2.c's count of positions). */
    int first = ids[0] == tok->bos_id, n_text = n_prompt - first;
    int echoed = n_text < steps ? n_text : steps;
    st->n_prompt_cut = n_text - echoed;
    for (int i = first; i < first + echoed; i++) emit(out, &o, tok, i ? ids[i - 1] : -1, ids[i]);
    if (n_text < steps) {
        if (opt->trace && !opt->group_attention) trace_chunk(&o, ctx, tok, ids, n_prompt, pos0);
        double t0 = time_now_s();
        const float *logits = opt->group_attention ? prefill_grouped(ctx, &o, tok, ids, n_prompt, pos0)
                                                   : context_prefill(ctx, ids, n_prompt, pos0);
        st->prefill_s = time_now_s() - t0;
        st->n_prompt = n_prompt;
        for (int i = 0; i < n_prompt; i++) sampler_accept(sampler, ids[i]);
        if (context_check_logits(ctx, logits, 1, ctx->cache.pos[ctx->cache.n_used - 1], err)) goto out;
        double t1 = time_now_s();
        if (decode_loop(ctx, tok, sampler, logits, ids[n_prompt - 1], steps - n_text, &o, out, st,
                        t_start, err))
            goto out;
        st->decode_s = time_now_s() - t1;
    }
    fputc('\n', out);
    fflush(out);
    if (opt->dump_cache) cache_dump(opt->dump_cache, ctx, tok, "at the end");
    rc = 0;
out:
    free(ids);
    return rc;
}
