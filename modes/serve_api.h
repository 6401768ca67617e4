/* The HTTP server's API without the sockets: one request (method, path,
 * JSON body) in, one response (status, JSON body) out, so the whole API can
 * be unit-tested and fuzzed with no network (cli/mode_serve.c puts it
 * behind libmicrohttpd).  OpenAI's shapes for /v1/completions and
 * /v1/models, llama-server's for /health, /tokenize and /detokenize
 * (docs/server.md).  Every malformed request is a 4xx response carrying
 * OpenAI's error object {"error": {"message", "type", "param", "code"}};
 * nothing a client sends ends the process.
 *
 * One slot: one Context whose cache holds the tokens of the last request
 * (prompt and generated text), and a new request reuses the longest common
 * prefix of its prompt with them, as -m chat reuses its cache across turns.
 * The caller serializes requests: the API is not thread-safe. */
#ifndef POSENC_SERVE_API_H
#define POSENC_SERVE_API_H
#include <stddef.h>

#include "model/context.h"
#include "tokenizer/tokenizer.h"

/* A request body larger than this is refused with 413 (libmicrohttpd stops
 * reading it there too): 8 MiB holds a prompt of about two million tokens,
 * far past any context this engine runs. */
#define SERVE_MAX_BODY (8u << 20)
/* OpenAI's limits: top log-probabilities per token, stop sequences. */
#define SERVE_MAX_LOGPROBS 20
#define SERVE_MAX_STOPS 4

typedef struct {
    Context *ctx;          /* the slot: built with serve_context_size */
    const Tokenizer *tok;
    const char *model_id;  /* what /v1/models lists and responses name */
    unsigned long long next_seed; /* a request without "seed" samples from this one (never 0),
                                     advanced per request */
    long n_requests;       /* completions served, for their ids */
    int *cached;           /* (n_ctx) the tokens in the cache's cells 0..n_used-1 */
} ServeApi;

typedef struct {
    int status;            /* HTTP status */
    char *body;            /* JSON, malloc'd (serve_response_free) */
    size_t len;
    int n_prompt;          /* completions: prompt tokens, and how many the cache already held */
    int n_reused;
    int n_generated;
} ServeResponse;

/* The slot's size: chunks of CONTEXT_PREFILL_CHUNK (at most n_ctx) with
 * every row's logits, which echo's log-probabilities need. */
ContextSize serve_context_size(int n_ctx, TensorType kv_type);

/* ctx empty, tok its model's vocabulary; seed nonzero. */
void serve_api_init(ServeApi *api, Context *ctx, const Tokenizer *tok, const char *model_id,
                    unsigned long long seed);
void serve_api_free(ServeApi *api);

/* Answers one request.  body holds len bytes (not NUL-terminated; NULL when
 * len is 0).  Always fills r: 200 with the result, 4xx with an error
 * object, or 500 when the engine fails (non-finite logits), which names the
 * model file. */
void serve_handle(ServeApi *api, const char *method, const char *path, const char *body,
                  size_t len, ServeResponse *r);
void serve_response_free(ServeResponse *r);
#endif
