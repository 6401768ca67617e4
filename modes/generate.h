/* Text generation: the prompt is prefilled as one chunk, then tokens are
 * decoded one at a time; when the cache is full a context shift makes room
 * (or generation stops, with CONTEXT_SHIFT_OFF).  Output follows llama2.c
 * byte for byte: the prompt is echoed, `steps` counts prompt tokens too,
 * BOS ends the text. */
#ifndef POSENC_GENERATE_H
#define POSENC_GENERATE_H
#include <signal.h>
#include <stdio.h>

#include "model/context.h"
#include "model/sampler.h"
#include "model/shift.h"
#include "tokenizer/tokenizer.h"

/* One generated token, for a caller that reports steps (--json,
 * --logits-out). */
typedef struct {
    int step;            /* 0 for the first token after the prompt */
    int pos;             /* position of the token whose logits chose it */
    int token;
    const char *piece;   /* its text as decoded after the previous token */
    size_t piece_len;
    const float *logits; /* (vocab) the raw logits it was sampled from */
} GenerateStep;

typedef struct {
    const char *prompt;
    int steps;          /* total tokens including the prompt; <= 0: the context size */
    int pos_offset;     /* position of the first token */
    int keep;           /* cells a context shift never discards (attention sinks) */
    ContextShiftMode shift;
    FILE *trace;        /* NULL, or one line per forward call (the chunk's positions
                           and text, the cache's positions) and per context shift */
    int trace_shares_out; /* trace and out reach the same file or terminal: a trace
                             line first ends the text's line, so the two never mix */
    void (*on_step)(const GenerateStep *step, void *user); /* per generated token, or NULL */
    void *step_user;
    FILE *dump_cache;   /* NULL, or the cache as a table before and after every shift and at
                           the end (modes/cache_dump.h) */
    volatile sig_atomic_t *interrupted; /* set (by a SIGINT handler) to end the text; or NULL */
    GroupAttention *group_attention; /* llama.cpp's group attention (model/shift.h): its edits
                                        before the prompt's every chunk and every token, in
                                        place of context shifts (shift is then OFF); or NULL */
} GenerateOptions;

/* Where the time went, for the summary line the caller prints. */
typedef struct {
    int n_prompt;            /* tokens prefilled (BOS included) */
    int n_generated;         /* tokens sampled */
    double prefill_s;        /* the prompt's forward pass */
    double first_token_s;    /* from the start of generate_text to the first sampled
                                token: tokenizing, prefill and one sample */
    double decode_s;         /* every later token: sample, forward, shift */
    int stopped_full;        /* the context filled and shifting is off */
    int n_shifts;            /* context shifts made room for the text */
    int n_prompt_cut;        /* prompt tokens past -n, not shown and not run */
    int interrupted;         /* *interrupted ended the text early */
} GenerateStats;

/* The prompt's ids, BOS first when the vocabulary has one (*ids malloc'd).
 * -1 with a line naming the vocabulary's file when the prompt cannot be
 * encoded or encodes to nothing at all. */
int generate_encode_prompt(const Tokenizer *tok, const char *prompt, int **ids, int *n_ids,
                           PosencError *err);

/* Writes the text to out.  Returns 0, or -1 with a one-line reason. */
int generate_text(Context *ctx, const Tokenizer *tok, Sampler *sampler,
                  const GenerateOptions *opt, FILE *out, GenerateStats *stats, PosencError *err);

/* Token text for a trace or table line: newline as \n, quote and
 * backslash escaped, other control bytes as \xNN. */
void generate_write_escaped(FILE *out, const char *s, size_t n);

/* One --trace-positions line before a forward call: the chunk's positions
 * and text, then the cache it attends to (which the chunk will join). */
void generate_trace_chunk(FILE *trace, const Context *ctx, const Tokenizer *tok, const int *ids,
                          int n, int pos0);

/* Where a context shift is reported: a --trace-positions line (trace),
 * the cache table before and after it (dump); either may be NULL. */
typedef struct {
    const Tokenizer *tok;
    FILE *trace;
    FILE *dump;
} ShiftReport;

/* Makes room for one more token when the cache is full: a context shift
 * keeping `keep` cells.  0: there is room; 1: full and shifting is off;
 * -1 with err. */
int generate_make_room(Context *ctx, int keep, ContextShiftMode shift, const ShiftReport *report,
                       PosencError *err);

/* Writes a decoded piece, skipping lone bytes that are neither printable
 * nor whitespace (stray control bytes from byte-fallback tokens). */
void write_piece(FILE *out, const char *piece, size_t len);
#endif
