#include "model/generate.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

void write_piece(FILE *out, const char *piece, size_t len) {
    if (len == 0) return;
    if (len == 1 && !(isprint((unsigned char)piece[0]) || isspace((unsigned char)piece[0])))
        return;
    fwrite(piece, 1, len, out);
}

static void emit(FILE *out, const Tokenizer *tok, int prev, int token) {
    size_t len;
    const char *piece = tokenizer_decode(tok, prev, token, &len);
    write_piece(out, piece, len);
    fflush(out);
}

static void trace_step(const Context *ctx, int pos_q) {
    char ranges[256];
    kv_cache_format_positions(&ctx->cache, ranges, sizeof ranges);
    fprintf(stderr, "[pos] q=%d cache=%s (%d/%d cells)\n", pos_q, ranges, ctx->cache.n_used,
            ctx->cache.n_ctx);
}

/* Makes room for one more token, or tells the caller to stop (returns 1). */
static int make_room(Context *ctx, const GenerateOptions *opt, PosencError *err) {
    KVCache *kv = &ctx->cache;
    if (kv->n_used < kv->n_ctx) return 0;
    if (opt->shift == CONTEXT_SHIFT_OFF) return 1;
    int discard = context_shift_discard(ctx, opt->keep);
    int first_pos = kv->pos[opt->keep], last_pos = kv->pos[opt->keep + discard - 1];
    if (context_shift(ctx, opt->keep, discard, opt->shift, err)) return -1;
    if (opt->trace)
        fprintf(stderr, "[shift] kept %d, discarded positions %d-%d, moved %d cells by -%d (%s)\n",
                opt->keep, first_pos, last_pos, kv->n_used - opt->keep, discard,
                context_shift_action(ctx, opt->shift));
    return 0;
}

/* Samples `needed` tokens after the prefilled prompt (fewer if BOS comes);
 * every sampled token but the last is fed back. */
static int decode_loop(Context *ctx, const Tokenizer *tok, Sampler *sampler, const float *logits,
                       int token, int needed, const GenerateOptions *opt, FILE *out,
                       int *n_decoded, PosencError *err) {
    for (int made = 0;;) {
        int next = sampler_sample(sampler, logits);
        if (next == tok->bos_id) return 0;
        emit(out, tok, token, next);
        token = next;
        if (++made >= needed) return 0;
        int room = make_room(ctx, opt, err);
        if (room < 0) return -1;
        if (room > 0) {
            fprintf(stderr, "note: context full (%d tokens); stopping (--no-shift)\n",
                    ctx->cache.n_ctx);
            return 0;
        }
        int pos = ctx->cache.pos[ctx->cache.n_used - 1] + 1;
        if (context_check_chunk(ctx, &token, 1, pos, err)) return -1;
        if (opt->trace) trace_step(ctx, pos);
        logits = context_forward(ctx, &token, 1, pos, 0);
        if (context_check_logits(ctx, logits, 1, pos, err)) return -1;
        (*n_decoded)++;
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
                  const GenerateOptions *opt, FILE *out, PosencError *err) {
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
    for (int i = first; i < first + echoed; i++) emit(out, tok, i ? ids[i - 1] : -1, ids[i]);
    int n_decoded = 0;
    double t0 = time_now_s(), t1 = t0;
    if (n_text < steps) {
        if (opt->trace) trace_step(ctx, pos0 + n_prompt - 1);
        const float *logits = context_prefill(ctx, ids, n_prompt, pos0);
        if (context_check_logits(ctx, logits, 1, pos0 + n_prompt - 1, err)) goto out;
        t1 = time_now_s();
        if (decode_loop(ctx, tok, sampler, logits, ids[n_prompt - 1], steps - n_text, opt, out,
                        &n_decoded, err))
            goto out;
    }
    fputc('\n', out);
    fflush(out);
    if (opt->verbose_stats && n_decoded > 0)
        fprintf(stderr, "prefill: %d tokens at %.1f tok/s; decode: %d tokens at %.1f tok/s\n",
                n_prompt, n_prompt / (t1 - t0), n_decoded, n_decoded / (time_now_s() - t1));
    rc = 0;
out:
    free(ids);
    return rc;
}
