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

int generate_text(Context *ctx, const Tokenizer *tok, Sampler *sampler,
                  const GenerateOptions *opt, FILE *out, PosencError *err) {
    const char *prompt = opt->prompt ? opt->prompt : "";
    size_t plen = strlen(prompt);
    int *ids = mallocCheck((plen + 3) * sizeof(int));
    int n_prompt = 0;
    if (tokenizer_encode(tok, prompt, plen, 1, 0, ids, &n_prompt, err)) goto fail;
    if (n_prompt < 1) {
        posenc_error(err, "the prompt encodes to no tokens and the vocabulary has no BOS");
        goto fail;
    }
    int n_ctx = ctx->cache.n_ctx;
    if (n_prompt > n_ctx) {
        posenc_error(err, "prompt is %d tokens but the context holds %d (raise --ctx or shorten "
                          "the prompt)", n_prompt, n_ctx);
        goto fail;
    }
    int steps = opt->steps <= 0 || opt->steps > n_ctx ? n_ctx : opt->steps;
    int pos0 = opt->pos_offset;
    if (context_check_chunk(ctx, ids, n_prompt, pos0, err)) goto fail;

    /* Echo the prompt (what llama2.c prints while it feeds it). */
    int echoed = n_prompt - 1 < steps ? n_prompt - 1 : steps;
    for (int i = 1; i <= echoed; i++) emit(out, tok, ids[i - 1], ids[i]);
    if (n_prompt - 1 >= steps) goto done;

    double t0 = time_now_s();
    const float *logits = context_forward(ctx, ids, n_prompt, pos0, 0);
    double t1 = time_now_s();
    int token = ids[n_prompt - 1], n_decoded = 0;
    for (int pos = n_prompt;; pos++) {
        int next = sampler_sample(sampler, logits);
        if (next == tok->bos_id) break;
        emit(out, tok, token, next);
        token = next;
        if (pos >= steps) break;
        if (context_check_chunk(ctx, &token, 1, pos0 + pos, err)) goto fail;
        logits = context_forward(ctx, &token, 1, pos0 + pos, 0);
        n_decoded++;
    }
    double t2 = time_now_s();
    if (opt->verbose_stats)
        fprintf(stderr, "prefill: %d tokens at %.1f tok/s; decode: %d tokens at %.1f tok/s\n",
                n_prompt, n_prompt / (t1 - t0 + 1e-12), n_decoded,
                n_decoded / (t2 - t1 + 1e-12));
done:
    fputc('\n', out);
    free(ids);
    return 0;
fail:
    free(ids);
    return -1;
}
