/* Passkey retrieval, as Position Interpolation, YaRN, LongRoPE and
 * Self-Extend measure a context extension (the test of Mohtashami & Jaggi
 * 2023): a haystack of filler text hides a key of digits at a depth, the
 * question at its end is followed by the key, and the key's tokens are
 * scored in the same forward pass as the haystack.  A case retrieves the
 * key exactly when every key token is the most probable one (the lowest id
 * on a tie); its key log-probability is the sum of theirs, a smooth measure
 * that still moves where exact retrieval is 0.
 *
 * A haystack is built from text and tokenized whole, so its tokens are what
 * the model would read in that text:
 *
 *   intro · filler[a, a+c1) · needle · filler[a+c1, a+c) · question
 *
 * with {key} in the needle and at the end of the question replaced by the
 * key.  The filler is read from offset a (seeded, just after whitespace) and
 * repeated when too short; c is the most filler whose sequence (BOS,
 * haystack, question, key) has at most `length` tokens; c1 is depth x c,
 * moved forward to just after whitespace so no word is cut.  The scored
 * tokens are those the key adds: the tokens of the text with the key that
 * differ from those of the text without it. */
#ifndef POSENC_MODES_PASSKEY_H
#define POSENC_MODES_PASSKEY_H

#include <stdint.h>
#include <stdio.h>

#include "base/util.h"
#include "model/context.h"
#include "model/shift.h"
#include "modes/chat.h"
#include "tokenizer/tokenizer.h"

#define PASSKEY_MAX_DIGITS 20

/* The texts a haystack is made of; {key} is replaced by the key. */
typedef struct {
    const char *intro;    /* before the filler (may be empty) */
    const char *needle;   /* holds {key} at least once */
    const char *question; /* ends with {key}: the text before it ends the prompt.  A {reply}
                             in it marks where a chat's user turn ends and the reply begins;
                             plain text drops it */
    int digits;           /* of the key, 1..PASSKEY_MAX_DIGITS */
} PasskeyFormat;

/* How a prompt becomes the model's tokens: plain text, BOS first when the
 * vocabulary has one; or, with a chat format, the user's turn (a system
 * message first when given) rendered by the template with its generation
 * prompt, its special tokens as their ids, then the start of the reply. */
typedef struct {
    const Tokenizer *tok;
    const ChatFormat *chat;     /* NULL: plain text */
    const char *system_prompt;  /* chat: or NULL */
} PasskeyEncoder;

/* The passkey papers' texts (Landmark Attention's, as Position Interpolation
 * and LongLoRA use them) and their filler sentence. */
extern const PasskeyFormat passkey_default_format;
extern const char passkey_default_filler[];

/* 0, or -1 with the reason naming the template ("the needle has no {key}"). */
int passkey_check_format(const PasskeyFormat *f, PosencError *err);

/* One haystack as the model's tokens. */
typedef struct {
    int length;       /* the cell it belongs to: tokens asked for (a --haystacks line's field) */
    double depth;     /* the cell's depth, 0..1: the share of the filler before the needle */
    int trial;
    char key[PASSKEY_MAX_DIGITS + 1];
    int *ids;         /* (n_ids) BOS when the vocabulary adds one, the prompt, the key */
    int n_ids;
    int key_start;    /* ids[key_start, n_ids) are scored; >= 1 */
} PasskeyCase;

/* The haystack of (length, depth, trial) under `seed`: the same case
 * whatever other cells a run asks for.  -1 with the reason when even no
 * filler at all is longer than `length` (the needle, question and key take
 * the room), or the text cannot be encoded. */
int passkey_build(const PasskeyEncoder *enc, const char *filler, const PasskeyFormat *f, int length,
                  double depth, int trial, uint64_t seed, PasskeyCase *out, PosencError *err);
/* A haystack given as text: the prompt (a chat's user turn), then the key
 * (the start of the reply). */
int passkey_from_text(const PasskeyEncoder *enc, const char *prompt, const char *key, int length,
                      double depth, int trial, PasskeyCase *out, PosencError *err);
void passkey_case_free(PasskeyCase *c);

/* A haystacks file: one JSON object a line, {"length", "depth", "trial",
 * "prompt", "key"} (more members are allowed), depth in 0..1, the key's
 * digits as a string.  Blank lines are skipped.  -1 with the file, line and
 * reason on any malformed line. */
int passkey_read_haystacks(const char *path, const PasskeyEncoder *enc, PasskeyCase **cases, int *n,
                           PosencError *err);

typedef struct {
    int exact;          /* every key token was the argmax */
    double logprob;     /* sum of the key tokens' log-probabilities */
} PasskeyScore;

/* Scores one case from an empty cache at position 0: the prompt in
 * prefill chunks, then the key's tokens in one chunk with every row's
 * logits.  The context needs n_ids cells and n_ids - key_start logit rows.
 * ga: llama.cpp's group attention, its edits before every chunk as
 * llama.cpp makes them between batches (NULL: none).  -1 with the reason
 * (non-finite logits, a position the scheme refuses). */
int passkey_score(Context *ctx, const PasskeyCase *c, const GroupAttention *ga, PasskeyScore *out,
                  PosencError *err);

/* The results of one (length, depth) cell under one variant. */
typedef struct {
    int length;
    double depth;
    int trials;         /* scored */
    int exact;
    double logprob_sum;
    int skipped;        /* the variant cannot encode the length's positions: no result */
} PasskeyCell;

#endif
