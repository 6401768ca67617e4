/* --logits-out: the log-probabilities behind every scored (-m ppl) or
 * generated token as JSON lines, so two runs can be compared offline
 * (tools/ppl_stats_reference.py reads them).  One line per prediction:
 *   {"variant":"rope","i":17,"pos":16,"token":42,"logprob":-1.23456789,
 *    "top":[[42,-1.23456789],[7,-2.5],...]}
 * logprob is log softmax(raw logits)[token] — no temperature, top-k or
 * top-p — with 9 significant digits (the logits are float32, good to ~7);
 * top lists the top_k most probable ids, most probable first, ties by
 * lower id, so its first id is the argmax. */
#ifndef POSENC_LOGPROBS_H
#define POSENC_LOGPROBS_H
#include <stdio.h>

typedef struct {
    FILE *out;
    int vocab, top_k;
    int *heap; /* (top_k) scratch for the selection */
} LogprobWriter;

/* The k (1..n) most probable ids of logits x[0..n) into heap[0..k), most
 * probable first, ties by lower id: O(n log k). */
void logprobs_select_top(int *heap, int k, const float *x, int n);

/* top_k: 0..vocab (0: no "top" list). */
void logprob_writer_init(LogprobWriter *w, FILE *out, int vocab, int top_k);
void logprob_writer_free(LogprobWriter *w);
/* One line: `token` predicted from `logits` (vocab) at position pos;
 * index is the token's place in the run (see docs/evaluation.md). */
void logprob_writer_row(LogprobWriter *w, const char *variant, long index, int pos,
                        const float *logits, int token);
#endif
