/* The HTTP server's API without the sockets: one request (method, path,
 * JSON body) in, one response (status, JSON body, or a stream of
 * server-sent events) out, so the whole API can be unit-tested and fuzzed
 * with no network (cli/mode_serve.c puts it behind libmicrohttpd).
 * OpenAI's shapes for /v1/completions, /v1/chat/completions and /v1/models,
 * llama-server's for /health, /tokenize and /detokenize (docs/server.md).
 * Every malformed request is a 4xx response carrying OpenAI's error object
 * {"error": {"message", "type", "param", "code"}}; nothing a client sends
 * ends the process.
 *
 * Slots: each is one Context whose cache holds the tokens of its last
 * request (prompt and generated text); a request takes the free slot that
 * shares the longest prefix with its prompt and computes only the rest, as
 * -m chat reuses its cache across turns.  Requests beyond the slots wait in
 * a bounded first-come first-served queue; past it they are refused (429).
 * Positional variants (--pe A,B): each has slots of its own, contexts of
 * the one model's weights built with its scheme, and a request names its
 * variant ("pe"); the default is the first.
 * The API is thread-safe: any number of threads may call serve_begin at
 * once, each request running on its own slot. */
#ifndef POSENC_SERVE_API_H
#define POSENC_SERVE_API_H
#include <pthread.h>
#include <stddef.h>

#include "model/context.h"
#include "model/sampler.h"
#include "modes/chat.h"
#include "tokenizer/tokenizer.h"

/* A request body larger than this is refused with 413 (libmicrohttpd stops
 * reading it there too): 8 MiB holds a prompt of about two million tokens,
 * far past any context this engine runs. */
#define SERVE_MAX_BODY (8u << 20)
/* OpenAI's limits: top log-probabilities per token, stop sequences. */
#define SERVE_MAX_LOGPROBS 20
#define SERVE_MAX_STOPS 4
/* A completion's max_tokens when neither the request nor -n gives one
 * (OpenAI's); a chat completion's is the rest of the context. */
#define SERVE_DEFAULT_MAX_TOKENS 16

/* What a request that omits a sampling field gets: the command line's
 * sampling flags (-t, -p, -k, --min-p, the penalties, -n). */
typedef struct {
    float temperature, top_p, min_p;
    int top_k;
    SamplerPenalties penalties;  /* repeat and last_n apply as given; a request's
                                    presence_penalty and frequency_penalty replace those */
    int max_tokens;              /* 0: SERVE_DEFAULT_MAX_TOKENS for completions, the rest
                                    of the context for chat; else at most the rest */
} ServeSampling;

typedef struct {
    const Tokenizer *tok;
    const ChatFormat *chat;      /* the chat template; NULL: /v1/chat/completions is refused */
    const char *model_id;        /* what /v1/models lists and responses name */
    ServeSampling defaults;
    unsigned long long seed;     /* a request without "seed" samples from a sequence
                                    started here (nonzero) */
    int max_queue;               /* requests that may wait for a slot; more get 429 */
    const char *const *variants; /* (n_variants) the positional variants' names, as --pe wrote them */
    int n_variants;
} ServeConfig;

typedef struct {
    Context *ctx;
    int *cached;                 /* (n_ctx) the tokens in the cache's cells 0..n_used-1 */
    int variant;                 /* the positional variant its context was built with */
    int busy;
} ServeSlot;

typedef struct {
    ServeConfig cfg;
    ServeSlot *slots;
    int n_slots;
    int threads;                 /* the OpenMP threads the contexts were sized for */
    pthread_mutex_t lock;        /* guards the slots' busy flags, the queue and the counters */
    pthread_cond_t changed;      /* a slot was freed or the queue moved */
    unsigned long *next_ticket;  /* (n_variants) each variant's queue: tickets taken, */
    unsigned long *serving;      /* and the next one served */
    unsigned long long next_seed;
    long n_requests;             /* generation requests accepted, for their ids */
    int stopping;                /* serve_api_stop: the queue turns requests away */
} ServeApi;

typedef struct {
    int status;            /* HTTP status */
    char *body;            /* JSON, malloc'd (serve_response_free); NULL for a stream */
    size_t len;
    int slot;              /* generation requests: the slot that ran it (-1: none) */
    int n_prompt;          /* generation requests: prompt tokens, and how many the cache already held */
    int n_reused;
    int n_generated;
} ServeResponse;

/* A streaming request running on its slot. */
typedef struct ServeStream ServeStream;

/* A slot's context: chunks of CONTEXT_PREFILL_CHUNK (at most n_ctx) with
 * every row's logits, which echo's log-probabilities need. */
ContextSize serve_context_size(int n_ctx, TensorType kv_type);

/* ctxs: n_slots empty contexts of one model and size (serve_context_size),
 * built on this thread (their scratch is sized for its OpenMP threads);
 * with variants, n_slots / n_variants each, variant by variant, in the
 * order of cfg->variants. */
void serve_api_init(ServeApi *api, Context *ctxs, int n_slots, const ServeConfig *cfg);
void serve_api_free(ServeApi *api);
/* The server is stopping: requests waiting for a slot, and any that come,
 * are refused (503) instead of waiting for the running ones to end. */
void serve_api_stop(ServeApi *api);

/* Answers one request.  body holds len bytes (not NUL-terminated; NULL when
 * len is 0).  Always fills r: 200 with the result, 4xx with an error object,
 * 429 when the queue is full, 503 once serve_api_stop was called, or 500
 * when the engine fails (non-finite
 * logits), which names the model file.  A generation request waits here
 * for a slot.  With "stream": true and no error, *stream is set (else
 * NULL), r->status is 200 and r->body NULL: the events come from
 * serve_stream_next, and the slot is held until serve_stream_free. */
void serve_begin(ServeApi *api, const char *method, const char *path, const char *body, size_t len,
                 ServeResponse *r, ServeStream **stream);
/* The stream's next bytes ("data: JSON\n\n" events, "data: [DONE]\n\n" the
 * last): 1 with *data (valid until the next call) and *len > 0, or 0 once
 * it has ended. */
int serve_stream_next(ServeStream *s, const char **data, size_t *len);
/* The counts of the request so far (its slot, prompt, reused, generated). */
const ServeResponse *serve_stream_counts(const ServeStream *s);
/* Ends the stream, finished or not (a client gone mid-stream): the slot is
 * free again and keeps what its cache holds. */
void serve_stream_free(ServeStream *s);

/* serve_begin, with a stream's events gathered into r->body (tests, fuzz). */
void serve_handle(ServeApi *api, const char *method, const char *path, const char *body, size_t len,
                  ServeResponse *r);
void serve_response_free(ServeResponse *r);
#endif
