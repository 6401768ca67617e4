#include "modes/cache_dump.h"

#include <math.h>
#include <stdlib.h>

#include "modes/generate.h"

/* The angle of the first rotation pair of KV head 0 in a layer's key (its
 * grouped key: Self-Extend's second store). */
static double first_pair_angle(const Context *ctx, int layer, int cell, float *key, int grouped) {
    const PeParams *p = &ctx->layers[layer].pe.params;
    if (grouped) kv_cache_load_grouped(&ctx->cache, layer, cell, 1, key);
    else kv_cache_load_keys(&ctx->cache, layer, cell, 1, key);
    int rope_dim = p->rope_dim > 0 ? p->rope_dim : ctx->layers[layer].pe.head_size;
    int partner = p->rope_pairing == PE_ROPE_NEOX ? rope_dim / 2 : 1;
    return atan2((double)key[partner], (double)key[0]);
}

void cache_dump(FILE *out, const Context *ctx, const Tokenizer *tok, const char *when) {
    const KVCache *kv = &ctx->cache;
    /* the key angles of the first rotating layer */
    int rope_layer = -1;
    for (int l = 0; l < ctx->model->config.n_layers && rope_layer < 0; l++)
        if (ctx->layers[l].pe.params.kind == PE_ROPE) rope_layer = l;
    int rope = rope_layer >= 0;
    int next = 0; /* the position the next token takes */
    for (int i = 0; i < kv->n_used; i++) next = kv->pos[i] >= next ? kv->pos[i] + 1 : next;
    int layers = 0, window = context_narrowest_window(ctx, &layers);
    int first_seen = model_window_first(window, next);
    fprintf(out, "[cache] %s: %d of %d cells", when, kv->n_used, kv->n_ctx);
    if (rope)
        fprintf(out, "; layer %d's key-angle turns %.6g rad per position", rope_layer,
                (double)ctx->layers[rope_layer].pe.inv_freq[0]);
    if (window) {
        fprintf(out, "; window %d", window);
        if (layers < ctx->model->config.n_layers)
            fprintf(out, " (%d of %d layers)", layers, ctx->model->config.n_layers);
        fprintf(out, ": the next token (position %d) sees positions %d-%d", next, first_seen, next);
    }
    int se = context_self_extend_layer(ctx), g = se >= 0 ? ctx->layers[se].self_extend_group : 0;
    if (g) /* its grouped keys beside the others, at pos / G */
        fprintf(out, "; Self-Extend G=%d W=%d: a key W or more positions before a query reads at "
                     "`grouped` (layer %d's key there: g-angle), the query at pos/G + %d",
                g, ctx->layers[se].self_extend_window, se,
                ctx->layers[se].self_extend_window - ctx->layers[se].self_extend_window / g);
    int sinks = 0;
    for (int l = 0; l < ctx->model->config.n_layers; l++) sinks += ctx->layers[l].sinks != NULL;
    if (sinks) /* the trained sink is in no cell, unlike a kept one (--keep): it never shifts */
        fprintf(out, "; learned sinks in %d of %d layers: a logit per head joins every softmax "
                     "and is held in no cell (a kept cell, --keep, is a token a shift never drops)",
                sinks, ctx->model->config.n_layers);
    fputc('\n', out);
    fprintf(out, "[cache] %5s %6s %6s %s%s piece\n", "cell", "pos", "token", rope ? " key-angle" : "",
            g ? " grouped    g-angle" : "");
    float *key = rope ? malloc_or_exit((size_t)kv->kv_dim * sizeof *key, "a cached key") : NULL;
    for (int c = 0; c < kv->n_used; c++) {
        int token = kv->token[c];
        fprintf(out, "[cache] %5d %6d %6d ", c, kv->pos[c], token);
        if (rope) fprintf(out, "%+10.4f ", first_pair_angle(ctx, rope_layer, c, key, 0));
        if (g) fprintf(out, "%7d %+10.4f ", kv->pos[c] / g, first_pair_angle(ctx, se, c, key, 1));
        if (token == tok->bos_id) {
            fputs("BOS", out);
        } else {
            size_t len;
            const char *piece = tokenizer_decode(tok, c ? kv->token[c - 1] : -1, token, &len);
            fputc('\'', out);
            generate_write_escaped(out, piece, len);
            fputc('\'', out);
        }
        if (kv->pos[c] < first_seen) fputs(" (out of the window)", out);
        fputc('\n', out);
    }
    free(key);
}
