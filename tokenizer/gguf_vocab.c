/* The vocabulary inside a GGUF file (tokenizer.ggml.*, llama.cpp's keys):
 * "llama" is SentencePiece BPE, "t5" SentencePiece unigram, "gpt2"
 * byte-level BPE.  The arrays are read into a TokenizerSpec; the file's
 * mapping outlives nothing here because tokenizer_build copies. */
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "tokenizer/tokenizer.h"

static int optional_bool(const GgufFile *g, const char *key, int dflt, PosencError *err, int *out) {
    *out = dflt;
    return gguf_find_kv(g, key) ? gguf_get_bool(g, key, out, err) : 0;
}

static int optional_id(const GgufFile *g, const char *key, int n, PosencError *err, int *out) {
    *out = -1;
    if (!gguf_find_kv(g, key)) return 0;
    uint32_t v;
    if (gguf_get_u32(g, key, &v, err)) return -1;
    if (v >= (uint32_t)n) return posenc_error(err, "%s: %s = %u is outside the vocabulary of %d",
                                              g->path, key, v, n);
    *out = (int)v;
    return 0;
}

/* Array `key` of n elements, or NULL when absent; -1 when present but wrong. */
static int optional_array(const GgufFile *g, const char *key, size_t n, int ints,
                          const GgufArray **out, PosencError *err) {
    *out = NULL;
    if (!gguf_find_kv(g, key)) return 0;
    int rc = ints ? gguf_get_arr_int(g, key, out, err) : gguf_get_arr(g, key, GGUF_TYPE_FLOAT32, out, err);
    if (rc) return -1;
    if (n && (*out)->n != n)
        return posenc_error(err, "%s: %s has %zu entries for %zu tokens", g->path, key, (*out)->n, n);
    return 0;
}

static int spec_kind(const GgufFile *g, TokenizerKind *kind, PosencError *err) {
    const char *model;
    if (gguf_get_str(g, "tokenizer.ggml.model", &model, err)) return -1;
    if (!strcmp(model, "llama")) *kind = TOKENIZER_SPM_BPE;
    else if (!strcmp(model, "t5")) *kind = TOKENIZER_SPM_UNIGRAM;
    else if (!strcmp(model, "gpt2")) *kind = TOKENIZER_GPT2;
    else return posenc_error(err, "%s: tokenizer.ggml.model '%s' is not supported (llama|t5|gpt2)",
                             g->path, model);
    return 0;
}

int tokenizer_load_gguf(Tokenizer *t, const GgufFile *g, PosencError *err) {
    memset(t, 0, sizeof *t);
    TokenizerSpec spec = {0};
    const GgufArray *tokens, *scores, *types, *merges = NULL, *charsmap = NULL;
    if (!gguf_find_kv(g, "tokenizer.ggml.model"))
        return posenc_error(err, "%s: the file has no vocabulary (tokenizer.ggml.*); pass -z",
                            g->path);
    if (spec_kind(g, &spec.kind, err) ||
        gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, err))
        return -1;
    size_t n = tokens->n;
    if (n == 0 || n > (1u << 24)) return posenc_error(err, "%s: %zu tokens", g->path, n);
    if (optional_array(g, "tokenizer.ggml.scores", n, 0, &scores, err) ||
        optional_array(g, "tokenizer.ggml.token_type", n, 1, &types, err))
        return -1;
    if (spec.kind == TOKENIZER_GPT2 && gguf_find_kv(g, "tokenizer.ggml.merges") &&
        gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, err))
        return -1;
    if (gguf_find_kv(g, "tokenizer.ggml.precompiled_charsmap") &&
        gguf_get_arr_int(g, "tokenizer.ggml.precompiled_charsmap", &charsmap, err))
        return -1;

    spec.n_pieces = (int)n;
    const char **pieces = mallocCheck(n * sizeof(char *));
    uint32_t *lens = mallocCheck(n * sizeof(uint32_t));
    float *score_v = scores ? mallocCheck(n * sizeof(float)) : NULL;
    uint8_t *type_v = types ? mallocCheck(n) : NULL;
    int has_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        GgufString s = gguf_arr_str(tokens, i);
        pieces[i] = s.ptr;
        lens[i] = (uint32_t)s.len;
        if (score_v) score_v[i] = gguf_arr_f32(scores, i);
        if (type_v) {
            int64_t ty = gguf_arr_int(types, i);
            type_v[i] = ty >= TOKEN_NORMAL && ty <= TOKEN_BYTE ? (uint8_t)ty : 0;
            has_bytes |= ty == TOKEN_BYTE;
        }
    }
    const char **merge_v = NULL;
    uint8_t *charsmap_v = NULL;
    if (merges) {
        /* merges are "left right" C strings for the builder */
        merge_v = mallocCheck(merges->n * sizeof(char *) + 1);
        for (size_t i = 0; i < merges->n; i++) {
            GgufString s = gguf_arr_str(merges, i);
            char *m = mallocCheck(s.len + 1);
            memcpy(m, s.ptr, s.len);
            m[s.len] = '\0';
            merge_v[i] = m;
        }
        spec.n_merges = (int)merges->n;
        spec.merges = merge_v;
    }
    if (charsmap) {
        charsmap_v = mallocCheck(charsmap->n + 1);
        for (size_t i = 0; i < charsmap->n; i++) charsmap_v[i] = (uint8_t)gguf_arr_int(charsmap, i);
        spec.charsmap = charsmap_v;
        spec.charsmap_size = charsmap->n;
    }
    spec.pieces = pieces;
    spec.piece_lens = lens;
    spec.scores = score_v;
    spec.types = type_v;
    spec.escape_whitespaces = 1;
    spec.byte_fallback = has_bytes;
    int is_spm = spec.kind != TOKENIZER_GPT2;
    int rc = optional_id(g, "tokenizer.ggml.bos_token_id", (int)n, err, &spec.bos_id) ||
             optional_id(g, "tokenizer.ggml.eos_token_id", (int)n, err, &spec.eos_id) ||
             optional_bool(g, "tokenizer.ggml.add_space_prefix", is_spm, err, &spec.add_dummy_prefix) ||
             optional_bool(g, "tokenizer.ggml.remove_extra_whitespaces",
                           spec.kind == TOKENIZER_SPM_UNIGRAM, err, &spec.remove_extra_whitespaces)
                 ? -1 : 0;
    if (rc == 0 && tokenizer_build(t, &spec, err)) {
        char inner[sizeof err->msg];
        memcpy(inner, err->msg, sizeof inner);
        rc = posenc_error(err, "%s: vocabulary: %s", g->path, inner);
    }
    for (int i = 0; i < spec.n_merges; i++) free((void *)merge_v[i]);
    free(merge_v);
    free(charsmap_v);
    free(pieces);
    free(lens);
    free(score_v);
    free(type_v);
    return rc;
}
