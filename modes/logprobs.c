#include "modes/logprobs.h"

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "modes/perplexity.h"
#include "base/util.h"

void logprob_writer_init(LogprobWriter *w, FILE *out, int vocab, int top_k) {
    w->out = out;
    w->vocab = vocab;
    w->top_k = top_k;
    w->heap = malloc_or_exit((size_t)(top_k > 0 ? top_k : 1) * sizeof(int), "the top-k heap");
}

void logprob_writer_free(LogprobWriter *w) {
    free(w->heap);
    w->heap = NULL;
}

/* Ranking of the top list: higher logit first, then lower id. */
static int ranks_before(const float *x, int a, int b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
}

/* Restores the heap below node i: every parent ranks after its children,
 * so heap[0] is the lowest-ranked id kept. */
static void sift_down(int *heap, int n, int i, const float *x) {
    for (;;) {
        int low = i, l = 2 * i + 1, r = l + 1;
        if (l < n && ranks_before(x, heap[low], heap[l])) low = l;
        if (r < n && ranks_before(x, heap[low], heap[r])) low = r;
        if (low == i) return;
        int t = heap[i];
        heap[i] = heap[low];
        heap[low] = t;
        i = low;
    }
}

void logprobs_select_top(int *heap, int k, const float *x, int n) {
    for (int i = 0; i < k; i++) heap[i] = i;
    for (int i = k / 2 - 1; i >= 0; i--) sift_down(heap, k, i, x);
    for (int i = k; i < n; i++)
        if (ranks_before(x, i, heap[0])) {
            heap[0] = i;
            sift_down(heap, k, 0, x);
        }
    /* Heap sort: repeatedly move the lowest-ranked to the end. */
    for (int m = k - 1; m > 0; m--) {
        int t = heap[0];
        heap[0] = heap[m];
        heap[m] = t;
        sift_down(heap, m, 0, x);
    }
}

void logprob_writer_row(LogprobWriter *w, const char *variant, long index, int pos,
                        const float *logits, int token) {
    double lse = ppl_log_normalizer(logits, w->vocab);
    fputs("{\"variant\":", w->out);
    json_write_string(w->out, variant, strlen(variant));
    fprintf(w->out, ",\"i\":%ld,\"pos\":%d,\"token\":%d,\"logprob\":%.9g", index, pos, token,
            logits[token] - lse);
    if (w->top_k > 0) {
        logprobs_select_top(w->heap, w->top_k, logits, w->vocab);
        fputs(",\"top\":[", w->out);
        for (int j = 0; j < w->top_k; j++)
            fprintf(w->out, "%s[%d,%.9g]", j ? "," : "", w->heap[j], logits[w->heap[j]] - lse);
        fputc(']', w->out);
    }
    fputs("}\n", w->out);
}
