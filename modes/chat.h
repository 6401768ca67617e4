/* Chat: a conversation rendered by the model's chat template, kept in one
 * KV cache.  Each turn renders the whole conversation, encodes it (the
 * template's special tokens become their ids), and prefills only what the
 * cache does not already hold: the longest common prefix of the new
 * transcript and the tokens seen so far stays, anything after it is
 * removed.  So the cache always holds the transcript the template defines,
 * never an approximation of it.  When the cache fills, the context shift
 * discards the oldest cells after `keep` (the system prompt's, by default). */
#ifndef POSENC_CHAT_H
#define POSENC_CHAT_H
#include <signal.h>
#include <stdio.h>

#include "chat/jinja.h"
#include "model/context.h"
#include "model/sampler.h"
#include "model/shift.h"
#include "tokenizer/tokenizer.h"

/* A chat template with the vocabulary it renders for: what turns messages
 * into the ids the model reads. */
typedef struct {
    const JinjaTemplate *template;
    const struct JsonValue *kwargs; /* more template variables (a JSON object), or NULL */
    const Tokenizer *tok;
    int *special;                   /* (n_special) ids whose text in a rendering is that token */
    int n_special;
} ChatFormat;

void chat_format_init(ChatFormat *f, const JinjaTemplate *template, const struct JsonValue *kwargs,
                      const Tokenizer *tok);
void chat_format_free(ChatFormat *f);
/* The messages as the template shows them to the model (malloc'd). */
char *chat_format_render(const ChatFormat *f, const ChatMessage *messages, int n,
                         int add_generation_prompt, size_t *len, PosencError *err);
/* A rendering's ids: the text between special tokens encoded without BOS,
 * each special token's text as its id (*ids malloc'd). */
int chat_format_encode(const ChatFormat *f, const char *text, size_t len, int **ids, int *n_ids,
                       PosencError *err);

typedef struct {
    const JinjaTemplate *template;
    const char *template_name;      /* where it came from, for messages ("--chat-template chatml") */
    const struct JsonValue *template_kwargs; /* more template variables, or NULL */
    const char *system_prompt;      /* NULL: none */
    const char *const *stops;       /* strings that end a reply (not shown), n_stops of them */
    int n_stops;
    int max_reply;                  /* tokens per reply; <= 0: no limit but the context */
    int keep;                       /* cells a shift keeps; < 0: the system prompt's */
    ContextShiftMode shift;
    FILE *trace;                    /* --trace-positions lines, or NULL */
    FILE *dump_cache;               /* --dump-cache tables at every shift, or NULL */
    volatile sig_atomic_t *interrupted; /* set (by a SIGINT handler) to end the reply; or NULL */
} ChatOptions;

typedef struct {
    Context *ctx;
    const Tokenizer *tok;
    Sampler *sampler;
    const ChatOptions *opt;
    ChatFormat format;              /* opt->template for tok */
    ChatMessage *messages;          /* (n_messages) the conversation; role and content malloc'd */
    int n_messages, cap_messages;
    int *seen;                      /* (n_seen) every transcript token fed, in order; the cache
                                       holds the first `keep` and a suffix of them */
    int n_seen, cap_seen;
    int keep;                       /* resolved: cells a shift keeps */
    const float *logits;            /* the last forward call's last logits */
    int reply_limit;                /* tokens per reply; <= 0: until an end-of-turn token */
} ChatSession;

/* Builds a session on an empty cache; resolves keep (the system prompt's
 * tokens when opt->keep < 0) and checks it against the context, and that
 * the vocabulary can encode the template's own text.  With no reply limit
 * and no end-of-turn token in the vocabulary, a reply ends after the
 * context's size (a note says so).  -1 + err. */
int chat_session_init(ChatSession *s, Context *ctx, const Tokenizer *tok, Sampler *sampler,
                      const ChatOptions *opt, PosencError *err);
void chat_session_free(ChatSession *s);

/* One turn: user_text joins the conversation, the reply streams to out and
 * joins it too.  1 + err: the turn is skipped, the conversation as it was
 * (its text cannot be encoded, the template refused it, or it does not fit
 * in the context); -1 + err: the session cannot go on. */
int chat_turn(ChatSession *s, const char *user_text, FILE *out, PosencError *err);

/* The conversation rendered as the template shows it to the model. */
char *chat_render(const ChatSession *s, int add_generation_prompt, size_t *len, PosencError *err);

/* Reads turns from in, one line each, until EOF (or an interrupt at the
 * prompt), answering each; with a terminal, prompts with "> ".  -1 + err. */
int chat_loop(ChatSession *s, FILE *in, FILE *out, int interactive, PosencError *err);
#endif
