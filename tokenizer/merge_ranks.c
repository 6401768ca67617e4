/* BPE merges by rank (GPT2, HF_BPE): the spec's "left right" merges as an
 * open-addressing table keyed by the id pair, for bpe_merge. */
#include "tokenizer/tokenizer_impl.h"

static uint32_t merge_slot(uint64_t key, uint32_t mask) {
    key *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(key >> 32) & mask;
}

static uint64_t merge_key(int left, int right) {
    return ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
}

int merge_ranks_init(Tokenizer *t, const TokenizerSpec *spec, PosencError *err) {
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)spec->n_merges) slots *= 2;
    t->merge_mask = slots - 1;
    t->merge_keys = calloc_or_exit(slots, sizeof(uint64_t), "the merge table");
    t->merge_rank = malloc_or_exit(slots * sizeof(int), "the merge table");
    t->merge_result = malloc_or_exit(slots * sizeof(int), "the merge table");
    char *joined = malloc_or_exit(2 * (size_t)t->max_piece_len + 1, "a merge buffer");
    int rc = 0;
    for (int r = 0; r < spec->n_merges && rc == 0; r++) {
        const char *m = spec->merges[r], *sp = strchr(m, ' ');
        if (!sp || strchr(sp + 1, ' ') || sp == m || !sp[1]) {
            rc = posenc_error(err, "merge %d '%s' is not two tokens", r + 1, posenc_escape(m).s);
            break;
        }
        size_t la = (size_t)(sp - m), lb = strlen(sp + 1);
        int a = tokenizer_lookup(t, m, la), b = tokenizer_lookup(t, sp + 1, lb);
        int c = -1;
        if (a >= 0 && b >= 0) {
            memcpy(joined, m, la);
            memcpy(joined + la, sp + 1, lb);
            c = tokenizer_lookup(t, joined, la + lb);
        }
        if (c < 0) {
            rc = posenc_error(err, "merge %d '%s': %s is not in the vocabulary", r + 1,
                              posenc_escape(m).s,
                              a < 0 ? "its left token" : b < 0 ? "its right token"
                                                           : "the merged token");
            break;
        }
        uint64_t key = merge_key(a, b);
        uint32_t i = merge_slot(key, t->merge_mask);
        while (t->merge_keys[i] && t->merge_keys[i] != key) i = (i + 1) & t->merge_mask;
        t->merge_keys[i] = key; /* a repeated merge takes its last rank, as a dict would */
        t->merge_rank[i] = r;
        t->merge_result[i] = c;
    }
    free(joined);
    return rc;
}

void merge_ranks_free(Tokenizer *t) {
    free(t->merge_keys);
    free(t->merge_rank);
    free(t->merge_result);
}

int merge_ranks_pair(const void *ctx, const BpeSymbol *a, const BpeSymbol *b, double *priority,
                     int *result) {
    const Tokenizer *t = ctx;
    uint64_t key = merge_key(a->id, b->id);
    for (uint32_t i = merge_slot(key, t->merge_mask); t->merge_keys[i];
         i = (i + 1) & t->merge_mask) {
        if (t->merge_keys[i] != key) continue;
        *priority = -(double)t->merge_rank[i];
        *result = t->merge_result[i];
        return 1;
    }
    return 0;
}
