#include "modes/serve_api.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "base/json_parse.h"
#include "model/sampler.h"
#include "modes/generate.h"
#include "modes/logprobs.h"
#include "modes/perplexity.h"

/* A refused request: its HTTP status and OpenAI's error fields. */
typedef struct {
    int status;
    const char *type;   /* invalid_request_error, not_found_error, server_error */
    const char *param;  /* the request field at fault, or NULL */
    const char *code;   /* OpenAI's code where it has one, or NULL */
    PosencError msg;
} ApiError;

static int refuse(ApiError *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(ApiError *e, int status, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg.msg, sizeof e->msg.msg, fmt, ap);
    va_end(ap);
    e->status = status;
    e->type = status == 404 ? "not_found_error" : status >= 500 ? "server_error" : "invalid_request_error";
    e->param = param;
    e->code = NULL;
    return -1;
}

/* ---- the response body --------------------------------------------------------------- */
typedef struct {
    FILE *out;  /* a memstream onto body */
    char *body;
    size_t len;
} Body;

static FILE *body_open(Body *b) {
    b->body = NULL;
    b->len = 0;
    b->out = open_memstream(&b->body, &b->len);
    if (!b->out) posenc_out_of_memory(1, 1, "a response");
    return b->out;
}

static void body_close(Body *b, ServeResponse *r, int status) {
    fclose(b->out);
    r->status = status;
    r->body = b->body;
    r->len = b->len;
}

static void respond_error(ServeResponse *r, const ApiError *e) {
    Body b;
    FILE *f = body_open(&b);
    fputs("{\"error\":{\"message\":", f);
    json_write_string(f, e->msg.msg, strlen(e->msg.msg));
    fprintf(f, ",\"type\":\"%s\",\"param\":", e->type);
    if (e->param) json_write_string(f, e->param, strlen(e->param));
    else fputs("null", f);
    fputs(",\"code\":", f);
    if (e->code) json_write_string(f, e->code, strlen(e->code));
    else fputs("null", f);
    fputs("}}", f);
    body_close(&b, r, e->status);
}

/* ---- reading the request ---------------------------------------------------------------- */
static int parse_body(JsonDoc *doc, const char *body, size_t len, ApiError *e) {
    PosencError err;
    if (json_parse(doc, body, len, &err)) return refuse(e, 400, NULL, "the body is not JSON: %s", err.msg);
    if (doc->root.type != JSON_OBJECT) {
        json_free(doc);
        return refuse(e, 400, NULL, "the body must be a JSON object");
    }
    return 0;
}

/* Every member of the request must be one of `known` (NULL-terminated):
 * a misspelt field is an error, not a silent default. */
static int check_fields(const JsonValue *root, const char *const *known, ApiError *e) {
    for (uint32_t i = 0; i < root->len; i++) {
        const JsonValue *m = &root->items[i];
        int found = 0;
        for (const char *const *k = known; *k && !found; k++)
            found = strlen(*k) == m->key_len && memcmp(*k, m->key, m->key_len) == 0;
        if (!found) {
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)(m->key_len < 48 ? m->key_len : 48), m->key);
            return refuse(e, 400, NULL, "unknown field '%s'", posenc_escape(key).s);
        }
    }
    return 0;
}

/* A member that is absent or null keeps *out; otherwise it must be a
 * number in [lo, hi] (an integer where `integer`). */
static int get_number(const JsonValue *root, const char *key, double lo, double hi, int integer,
                      double *out, ApiError *e) {
    const JsonValue *v = json_get(root, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER || !(v->number >= lo && v->number <= hi) ||
        (integer && v->number != floor(v->number)))
        return refuse(e, 400, key, "'%s' must be %s in [%.17g, %.17g]", key,
                      integer ? "an integer" : "a number", lo, hi);
    *out = v->number;
    return 0;
}

static int get_int(const JsonValue *root, const char *key, int lo, int hi, int *out, ApiError *e) {
    double x = *out;
    if (get_number(root, key, lo, hi, 1, &x, e)) return -1;
    *out = (int)x;
    return 0;
}

static int get_float(const JsonValue *root, const char *key, float lo, float hi, float *out,
                     ApiError *e) {
    double x = *out;
    if (get_number(root, key, lo, hi, 0, &x, e)) return -1;
    *out = (float)x;
    return 0;
}

static int get_bool(const JsonValue *root, const char *key, int *out, ApiError *e) {
    int b = json_get_bool(root, key, *out);
    if (b < 0) return refuse(e, 400, key, "'%s' must be true or false", key);
    *out = b;
    return 0;
}

/* An array of token ids, each in the vocabulary (*ids malloc'd). */
static int get_token_array(const JsonValue *v, const char *key, int vocab, int **ids, int *n,
                           ApiError *e) {
    if (v->len == 0) return refuse(e, 400, key, "'%s' must hold at least one token id", key);
    int *out = malloc_or_exit((size_t)v->len * sizeof *out, "the request's token ids");
    for (uint32_t i = 0; i < v->len; i++) {
        const JsonValue *t = &v->items[i];
        if (t->type != JSON_NUMBER || t->number != floor(t->number) || t->number < 0 ||
            t->number >= vocab) {
            free(out);
            return refuse(e, 400, key, "'%s'[%u] is not a token id (an integer in [0, %d))", key, i, vocab);
        }
        out[i] = (int)t->number;
    }
    *ids = out;
    *n = (int)v->len;
    return 0;
}

/* ---- /health, /v1/models ------------------------------------------------------------------ */
static void handle_health(ServeResponse *r) {
    Body b;
    fputs("{\"status\":\"ok\"}", body_open(&b));
    body_close(&b, r, 200);
}

static void handle_models(const ServeApi *api, ServeResponse *r) {
    Body b;
    FILE *f = body_open(&b);
    fputs("{\"object\":\"list\",\"data\":[{\"id\":", f);
    json_write_string(f, api->model_id, strlen(api->model_id));
    fputs(",\"object\":\"model\",\"created\":0,\"owned_by\":\"posenc\",\"meta\":{\"pe\":", f);
    const char *pe = pe_kind_name(api->ctx->pe.params.kind);
    json_write_string(f, pe, strlen(pe));
    fprintf(f, ",\"n_ctx\":%d,\"n_vocab\":%d}}]}", api->ctx->cache.n_ctx, api->tok->vocab_size);
    body_close(&b, r, 200);
}

/* A token's bytes of the text as -m generate writes them (write_piece);
 * BOS writes none. */
static void write_token(const Tokenizer *tok, FILE *out, int prev, int token) {
    if (token == tok->bos_id) return;
    size_t len;
    const char *piece = tokenizer_decode(tok, prev, token, &len);
    write_piece(out, piece, len);
}

/* ---- /tokenize, /detokenize (llama-server's shapes; the text as completions write it) ----------------------------------------------- */
static int handle_tokenize(const ServeApi *api, const JsonValue *root, ServeResponse *r, ApiError *e) {
    static const char *const known[] = {"content", "add_special", NULL};
    if (check_fields(root, known, e)) return -1;
    const JsonValue *content = json_get(root, "content");
    if (!content || content->type != JSON_STRING)
        return refuse(e, 400, "content", "'content' must be a string");
    int add_special = 0;
    if (get_bool(root, "add_special", &add_special, e)) return -1;
    int *ids, n;
    PosencError err;
    if (tokenizer_encode_alloc(api->tok, content->string, content->len, add_special, 0, &ids, &n, &err))
        return refuse(e, 400, "content", "%s", err.msg);
    Body b;
    FILE *f = body_open(&b);
    fputs("{\"tokens\":[", f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", ids[i]);
    fputs("]}", f);
    body_close(&b, r, 200);
    free(ids);
    return 0;
}

static int handle_detokenize(const ServeApi *api, const JsonValue *root, ServeResponse *r,
                             ApiError *e) {
    static const char *const known[] = {"tokens", NULL};
    if (check_fields(root, known, e)) return -1;
    const JsonValue *tokens = json_get(root, "tokens");
    if (!tokens || tokens->type != JSON_ARRAY) return refuse(e, 400, "tokens", "'tokens' must be an array of token ids");
    int *ids = NULL, n = 0;
    if (tokens->len && get_token_array(tokens, "tokens", api->tok->vocab_size, &ids, &n, e)) return -1;
    Body b;
    FILE *f = body_open(&b);
    fputs("{\"content\":", f);
    char *text;
    size_t len;
    FILE *text_out = open_memstream(&text, &len);
    if (!text_out) posenc_out_of_memory(1, 1, "a detokenized text");
    for (int i = 0; i < n; i++) write_token(api->tok, text_out, i ? ids[i - 1] : -1, ids[i]);
    fclose(text_out);
    json_write_string(f, text, len);
    fputc('}', f);
    body_close(&b, r, 200);
    free(text);
    free(ids);
    return 0;
}

/* ---- /v1/completions ------------------------------------------------------------------------------ */
typedef struct {
    int *prompt;  /* (n_prompt) malloc'd */
    int n_prompt;
    int max_tokens;
    float temperature, top_p, min_p, presence_penalty, frequency_penalty;
    int top_k;
    unsigned long long seed;  /* 0: not given */
    const char *stops[SERVE_MAX_STOPS];  /* point into the request's JSON */
    size_t stop_lens[SERVE_MAX_STOPS];
    int n_stops;
    int logprobs;  /* top entries per token; -1: no logprobs object */
    int echo;
} CompletionRequest;

static int get_stops(const JsonValue *root, CompletionRequest *q, ApiError *e) {
    const JsonValue *v = json_get(root, "stop");
    if (!v || v->type == JSON_NULL) return 0;
    const JsonValue *list = v->type == JSON_ARRAY ? v->items : v;
    uint32_t n = v->type == JSON_ARRAY ? v->len : 1;
    if (n > SERVE_MAX_STOPS) return refuse(e, 400, "stop", "'stop' holds at most %d strings", SERVE_MAX_STOPS);
    for (uint32_t i = 0; i < n; i++) {
        if (list[i].type != JSON_STRING || list[i].len == 0)
            return refuse(e, 400, "stop", "'stop' must be a non-empty string or an array of them");
        q->stops[i] = list[i].string;
        q->stop_lens[i] = list[i].len;
    }
    q->n_stops = (int)n;
    return 0;
}

static int get_prompt(const ServeApi *api, const JsonValue *root, CompletionRequest *q, ApiError *e) {
    const JsonValue *v = json_get(root, "prompt");
    if (!v) return refuse(e, 400, "prompt", "'prompt' is required");
    if (v->type == JSON_ARRAY && v->len > 0 && v->items[0].type != JSON_NUMBER)
        return refuse(e, 400, "prompt", "one prompt per request: 'prompt' must be a string or an array of token ids");
    if (v->type == JSON_ARRAY)
        return get_token_array(v, "prompt", api->tok->vocab_size, &q->prompt, &q->n_prompt, e);
    if (v->type != JSON_STRING) return refuse(e, 400, "prompt", "'prompt' must be a string or an array of token ids");
    PosencError err;
    /* BOS first, as -m generate encodes its prompt */
    if (tokenizer_encode_alloc(api->tok, v->string, v->len, 1, 0, &q->prompt, &q->n_prompt, &err))
        return refuse(e, 400, "prompt", "%s", err.msg);
    if (q->n_prompt == 0) return refuse(e, 400, "prompt", "the prompt encodes to no tokens");
    return 0;
}

static int parse_completion(const ServeApi *api, const JsonValue *root, CompletionRequest *q, ApiError *e) {
    static const char *const known[] = {"model", "prompt", "max_tokens", "temperature", "top_p", "top_k",
                                        "min_p", "seed", "stop", "logprobs", "echo", "n", "stream",
                                        "presence_penalty", "frequency_penalty", "user", NULL};
    /* OpenAI's defaults, and posenc's sampler off where OpenAI has no such knob */
    *q = (CompletionRequest){.max_tokens = 16, .temperature = 1.0f, .top_p = 1.0f, .logprobs = -1};
    if (check_fields(root, known, e)) return -1;
    const JsonValue *model = json_get(root, "model");
    if (model && model->type != JSON_STRING && model->type != JSON_NULL)
        return refuse(e, 400, "model", "'model' must be a string");
    const JsonValue *user = json_get(root, "user");
    if (user && user->type != JSON_STRING && user->type != JSON_NULL)
        return refuse(e, 400, "user", "'user' must be a string");
    int n = 1, stream = 0;
    double seed = 0, logprobs = -1;
    if (get_int(root, "n", 1, 1, &n, e) || get_bool(root, "stream", &stream, e) ||
        get_int(root, "max_tokens", 0, INT32_MAX, &q->max_tokens, e) ||
        get_float(root, "temperature", 0, 2, &q->temperature, e) ||
        get_float(root, "top_p", 0, 1, &q->top_p, e) || get_int(root, "top_k", 0, INT32_MAX, &q->top_k, e) ||
        get_float(root, "min_p", 0, 1, &q->min_p, e) ||
        get_float(root, "presence_penalty", -2, 2, &q->presence_penalty, e) ||
        get_float(root, "frequency_penalty", -2, 2, &q->frequency_penalty, e) ||
        get_number(root, "seed", 0, 9007199254740991.0, 1, &seed, e) || /* 2^53 - 1: exact in JSON */
        get_number(root, "logprobs", 0, SERVE_MAX_LOGPROBS, 1, &logprobs, e) ||
        get_bool(root, "echo", &q->echo, e) || get_stops(root, q, e))
        return -1;
    if (stream) return refuse(e, 400, "stream", "'stream' is not supported yet");
    q->seed = (unsigned long long)seed;
    q->logprobs = (int)logprobs;
    if (get_prompt(api, root, q, e)) return -1;
    int n_ctx = api->ctx->cache.n_ctx;
    if (q->n_prompt > n_ctx) {
        refuse(e, 400, "prompt", "the prompt is %d tokens but the context holds %d", q->n_prompt, n_ctx);
        e->code = "context_length_exceeded";
        return -1;
    }
    if (q->max_tokens > n_ctx - q->n_prompt) {
        refuse(e, 400, "max_tokens", "the prompt (%d tokens) and max_tokens (%d) exceed the context (%d)",
               q->n_prompt, q->max_tokens, n_ctx);
        e->code = "context_length_exceeded";
        return -1;
    }
    PosencError err;
    if (context_check_tokens(api->ctx, q->prompt, q->n_prompt, 0, &err))
        return refuse(e, 400, "prompt", "%s", err.msg);
    return 0;
}

/* One token of the logprobs object: its log-probability (NaN: none, the
 * prompt's first token) and the most probable tokens in its place. */
typedef struct {
    int token, prev;               /* prev: the token before it, whose text it follows (-1: none) */
    size_t text_offset, text_len;  /* its bytes of the response's text */
    double logprob;
    int n_top;
    int top_ids[SERVE_MAX_LOGPROBS];
    double top_logprobs[SERVE_MAX_LOGPROBS];
} TokenLogprob;

/* What a completion builds: the text and, when asked, a TokenLogprob per
 * token of it. */
typedef struct {
    const ServeApi *api;
    const CompletionRequest *q;
    FILE *text;          /* a memstream onto text_buf */
    char *text_buf;
    size_t text_len;
    TokenLogprob *lp;    /* (cap_lp) */
    int n_lp, cap_lp;
} Completion;

/* Appends the token's bytes to the text as -m generate writes them
 * (write_piece); returns its entry when logprobs were asked for, else NULL. */
static TokenLogprob *emit_token(Completion *c, int prev, int token) {
    size_t start = (size_t)ftell(c->text);
    write_token(c->api->tok, c->text, prev, token);
    if (c->q->logprobs < 0) return NULL;
    if (c->n_lp == c->cap_lp) {
        c->cap_lp = c->cap_lp ? 2 * c->cap_lp : 64;
        TokenLogprob *grown = realloc(c->lp, (size_t)c->cap_lp * sizeof *grown);
        if (!grown) posenc_out_of_memory((size_t)c->cap_lp, sizeof *grown, "the log-probabilities");
        c->lp = grown;
    }
    TokenLogprob *t = &c->lp[c->n_lp++];
    *t = (TokenLogprob){.token = token, .prev = prev, .text_offset = start, .text_len = (size_t)ftell(c->text) - start,
                        .logprob = NAN};
    return t;
}

/* The token's log-probability under the raw logits (no temperature, top-k
 * or top-p, as --logits-out) and the q->logprobs most probable ones, most
 * probable first, ties by lower id. */
static void score_token(TokenLogprob *t, const float *logits, int vocab, int n_top) {
    double norm = ppl_log_normalizer(logits, vocab);
    t->logprob = (double)logits[t->token] - norm;
    int n = n_top < vocab ? n_top : vocab;
    if (n > 0) logprobs_select_top(t->top_ids, n, logits, vocab);
    t->n_top = n;
    for (int i = 0; i < n; i++) t->top_logprobs[i] = (double)logits[t->top_ids[i]] - norm;
}

/* Runs tokens at the next cells, recording them as cached; `all_logits`
 * returns every row's (the chunk must fit max_tokens). */
static const float *feed(ServeApi *api, const int *tokens, int n, int all_logits, PosencError *err) {
    KVCache *kv = &api->ctx->cache;
    int first = kv->n_used;
    const float *logits = context_step(api->ctx, tokens, n, first, all_logits, err);
    if (logits) memcpy(api->cached + first, tokens, (size_t)n * sizeof *tokens);
    return logits;
}

/* The first occurrence of a stop string in text[from..len), or -1. */
static long find_stop(const CompletionRequest *q, const char *text, size_t len, size_t from) {
    long best = -1;
    for (int i = 0; i < q->n_stops; i++) {
        const char *hit = memmem(text + from, len - from, q->stops[i], q->stop_lens[i]);
        if (hit && (best < 0 || hit - text < best)) best = hit - text;
    }
    return best;
}

static void write_completion(const ServeApi *api, const Completion *c, const char *finish,
                             const ServeResponse *counts, Body *b) {
    FILE *f = body_open(b);
    fprintf(f, "{\"id\":\"cmpl-posenc-%ld\",\"object\":\"text_completion\",\"created\":%lld,\"model\":",
            api->n_requests, (long long)time(NULL));
    json_write_string(f, api->model_id, strlen(api->model_id));
    fputs(",\"choices\":[{\"index\":0,\"text\":", f);
    json_write_string(f, c->text_buf, c->text_len);
    fputs(",\"logprobs\":", f);
    if (c->q->logprobs < 0) {
        fputs("null", f);
    } else {
        fputs("{\"tokens\":[", f);
        for (int i = 0; i < c->n_lp; i++) {
            if (i) fputc(',', f);
            json_write_string(f, c->text_buf + c->lp[i].text_offset, c->lp[i].text_len);
        }
        fputs("],\"token_logprobs\":[", f);
        for (int i = 0; i < c->n_lp; i++) {
            if (i) fputc(',', f);
            json_write_number(f, c->lp[i].logprob);
        }
        fputs("],\"top_logprobs\":[", f);
        for (int i = 0; i < c->n_lp; i++) {
            const TokenLogprob *t = &c->lp[i];
            if (i) fputc(',', f);
            if (isnan(t->logprob)) {
                fputs("null", f);
                continue;
            }
            fputc('{', f);
            for (int k = 0; k < t->n_top; k++) {
                size_t len = 0;
                int id = t->top_ids[k];
                /* the candidate's text in this place: after the token before it */
                const char *piece = id == api->tok->bos_id ? "" : tokenizer_decode(api->tok, t->prev, id, &len);
                if (k) fputc(',', f);
                json_write_string(f, piece, len);
                fputc(':', f);
                json_write_number(f, t->top_logprobs[k]);
            }
            fputc('}', f);
        }
        fputs("],\"text_offset\":[", f);
        for (int i = 0; i < c->n_lp; i++) fprintf(f, "%s%zu", i ? "," : "", c->lp[i].text_offset);
        fputs("]}", f);
    }
    fprintf(f, ",\"finish_reason\":\"%s\"}],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"
               "\"total_tokens\":%d}}",
            finish, counts->n_prompt, counts->n_generated, counts->n_prompt + counts->n_generated);
}

/* The prompt after the cached prefix it shares (all of it with echo, whose
 * log-probabilities need every row's logits), then the text: sampled as
 * -m generate samples, until max_tokens, an end-of-generation token or a
 * stop string. */
static int run_completion(ServeApi *api, const CompletionRequest *q, ServeResponse *r, ApiError *e) {
    Context *ctx = api->ctx;
    KVCache *kv = &ctx->cache;
    const Tokenizer *tok = api->tok;
    int vocab = tok->vocab_size, n = q->n_prompt;
    int reuse = 0;
    if (!q->echo)
        while (reuse < n && reuse < kv->n_used && q->prompt[reuse] == api->cached[reuse]) reuse++;
    if (reuse == n) reuse = n - 1; /* the last token runs again: its logits choose the first */
    if (reuse < kv->n_used) kv_cache_remove(kv, reuse, kv->n_used - reuse);
    r->n_prompt = n;
    r->n_reused = reuse;

    Completion c = {.api = api, .q = q};
    c.text = open_memstream(&c.text_buf, &c.text_len);
    if (!c.text) posenc_out_of_memory(1, 1, "a completion's text");
    Sampler sampler;
    unsigned long long seed = q->seed ? q->seed : api->next_seed;
    sampler_build(&sampler, vocab, q->temperature, q->top_p, q->top_k, seed);
    sampler_set_min_p(&sampler, q->min_p);
    if (q->presence_penalty != 0 || q->frequency_penalty != 0) /* llama-server's window of 64 */
        sampler_set_penalties(&sampler, (SamplerPenalties){.repeat = 1.0f, .last_n = 64,
                                                           .presence = q->presence_penalty,
                                                           .frequency = q->frequency_penalty});
    api->next_seed = api->next_seed * 6364136223846793005ull + 1442695040888963407ull;
    if (!api->next_seed) api->next_seed = 1;
    api->n_requests++;

    PosencError err;
    const float *logits = NULL;
    int rc = -1, n_top = q->logprobs > 0 ? q->logprobs : 0;
    for (int i = 0; q->echo && i < n; i++) emit_token(&c, i ? q->prompt[i - 1] : -1, q->prompt[i]);
    for (int done = reuse; done < n;) {
        int chunk = n - done < ctx->state.max_tokens ? n - done : ctx->state.max_tokens;
        logits = feed(api, q->prompt + done, chunk, q->echo, &err);
        if (!logits) goto engine_failed;
        for (int j = 0; q->echo && c.lp && j < chunk; j++) /* row j predicts token done + j + 1 */
            if (done + j + 1 < n) score_token(&c.lp[done + j + 1], logits + (size_t)j * vocab, vocab, n_top);
        if (q->echo) logits += (size_t)(chunk - 1) * vocab;
        done += chunk;
    }
    for (int i = 0; i < n; i++) sampler_accept(&sampler, q->prompt[i]);

    const char *finish = "length";
    size_t text_start = (size_t)ftell(c.text), text_end = SIZE_MAX;
    size_t max_stop = 0;
    for (int i = 0; i < q->n_stops; i++) max_stop = q->stop_lens[i] > max_stop ? q->stop_lens[i] : max_stop;
    int token = q->prompt[n - 1];
    while (r->n_generated < q->max_tokens) {
        int next = sampler_sample(&sampler, logits);
        if (next == tok->bos_id || tokenizer_is_eog(tok, next)) {
            finish = "stop";
            break;
        }
        sampler_accept(&sampler, next);
        size_t before = (size_t)ftell(c.text);
        TokenLogprob *t = emit_token(&c, token, next);
        if (t) score_token(t, logits, vocab, n_top);
        r->n_generated++;
        token = next;
        if (q->n_stops) {
            fflush(c.text);
            size_t from = before - text_start >= max_stop ? before - max_stop + 1 : text_start;
            long stop = find_stop(q, c.text_buf, c.text_len, from);
            if (stop >= 0) { /* the text ends before the stop string, as OpenAI's */
                text_end = (size_t)stop;
                while (c.n_lp > 0 && c.lp[c.n_lp - 1].text_offset >= text_end) c.n_lp--;
                finish = "stop";
                break;
            }
        }
        if (r->n_generated == q->max_tokens) break;
        logits = feed(api, &next, 1, 0, &err);
        if (!logits) goto engine_failed;
    }
    fclose(c.text);
    c.text = NULL;
    if (c.text_len > text_end) c.text_len = text_end;
    Body b;
    write_completion(api, &c, finish, r, &b);
    body_close(&b, r, 200);
    rc = 0;
    goto out;
engine_failed:
    /* the cache's last chunk is suspect: the next request starts afresh */
    kv_cache_remove(kv, 0, kv->n_used);
    refuse(e, 500, NULL, "%s", err.msg);
out:
    if (c.text) fclose(c.text);
    free(c.text_buf);
    free(c.lp);
    sampler_free(&sampler);
    return rc;
}

static int handle_completion(ServeApi *api, const JsonValue *root, ServeResponse *r, ApiError *e) {
    CompletionRequest q;
    int rc = parse_completion(api, root, &q, e);
    if (!rc) rc = run_completion(api, &q, r, e);
    free(q.prompt);
    return rc;
}

/* ---- the API ------------------------------------------------------------------------------------------ */
ContextSize serve_context_size(int n_ctx, TensorType kv_type) {
    int chunk = n_ctx < CONTEXT_PREFILL_CHUNK ? n_ctx : CONTEXT_PREFILL_CHUNK;
    return (ContextSize){.n_ctx = n_ctx, .max_tokens = chunk, .logit_rows = chunk, .kv_type = kv_type};
}

void serve_api_init(ServeApi *api, Context *ctx, const Tokenizer *tok, const char *model_id,
                    unsigned long long seed) {
    *api = (ServeApi){.ctx = ctx, .tok = tok, .model_id = model_id, .next_seed = seed ? seed : 1};
    api->cached = malloc_or_exit((size_t)ctx->cache.n_ctx * sizeof *api->cached, "the slot's tokens");
}

void serve_api_free(ServeApi *api) {
    free(api->cached);
    api->cached = NULL;
}

void serve_response_free(ServeResponse *r) {
    free(r->body);
    r->body = NULL;
}

typedef enum { ROUTE_HEALTH, ROUTE_MODELS, ROUTE_TOKENIZE, ROUTE_DETOKENIZE, ROUTE_COMPLETIONS } Route;
static const struct {
    const char *path, *method;
    Route route;
} routes[] = {
    {"/health", "GET", ROUTE_HEALTH},          {"/v1/models", "GET", ROUTE_MODELS},
    {"/tokenize", "POST", ROUTE_TOKENIZE},     {"/detokenize", "POST", ROUTE_DETOKENIZE},
    {"/v1/completions", "POST", ROUTE_COMPLETIONS},
};

void serve_handle(ServeApi *api, const char *method, const char *path, const char *body,
                  size_t len, ServeResponse *r) {
    *r = (ServeResponse){0};
    ApiError e;
    int found = -1;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0] && found < 0; i++)
        if (strcmp(path, routes[i].path) == 0) found = (int)i;
    int rc;
    if (found < 0) rc = refuse(&e, 404, NULL, "no such endpoint: %s", posenc_escape(path).s);
    else if (strcmp(method, routes[found].method) != 0)
        rc = refuse(&e, 405, NULL, "%s takes %s, not %s", routes[found].path, routes[found].method,
                    posenc_escape(method).s);
    else if (len > SERVE_MAX_BODY)
        rc = refuse(&e, 413, NULL, "the body is %zu bytes; the limit is %u", len, SERVE_MAX_BODY);
    else if (routes[found].route == ROUTE_HEALTH) rc = (handle_health(r), 0);
    else if (routes[found].route == ROUTE_MODELS) rc = (handle_models(api, r), 0);
    else {
        JsonDoc doc;
        rc = parse_body(&doc, body ? body : "", len, &e);
        if (!rc) {
            const JsonValue *root = &doc.root;
            switch (routes[found].route) {
            case ROUTE_TOKENIZE: rc = handle_tokenize(api, root, r, &e); break;
            case ROUTE_DETOKENIZE: rc = handle_detokenize(api, root, r, &e); break;
            default: rc = handle_completion(api, root, r, &e); break;
            }
            json_free(&doc);
        }
    }
    if (rc) respond_error(r, &e);
}
