#include "modes/serve_api.h"

#include <math.h>
#include <omp.h>
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
    json_write_string(f, api->cfg.model_id, strlen(api->cfg.model_id));
    fputs(",\"object\":\"model\",\"created\":0,\"owned_by\":\"posenc\",\"meta\":{\"pe\":", f);
    json_write_string(f, api->cfg.variants[0], strlen(api->cfg.variants[0]));
    fprintf(f, ",\"n_ctx\":%d,\"n_vocab\":%d,\"variants\":[", api->slots[0].ctx->cache.n_ctx, api->cfg.tok->vocab_size);
    for (int i = 0; i < api->cfg.n_variants; i++) {
        if (i) fputc(',', f);
        json_write_string(f, api->cfg.variants[i], strlen(api->cfg.variants[i]));
    }
    fprintf(f, "],\"slots\":%d}}]}", api->n_slots);
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
    if (tokenizer_encode_alloc(api->cfg.tok, content->string, content->len, add_special, 0, &ids, &n, &err))
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
    if (tokens->len && get_token_array(tokens, "tokens", api->cfg.tok->vocab_size, &ids, &n, e)) return -1;
    Body b;
    FILE *f = body_open(&b);
    fputs("{\"content\":", f);
    char *text;
    size_t len;
    FILE *text_out = open_memstream(&text, &len);
    if (!text_out) posenc_out_of_memory(1, 1, "a detokenized text");
    for (int i = 0; i < n; i++) write_token(api->cfg.tok, text_out, i ? ids[i - 1] : -1, ids[i]);
    fclose(text_out);
    json_write_string(f, text, len);
    fputc('}', f);
    body_close(&b, r, 200);
    free(text);
    free(ids);
    return 0;
}

/* ---- generation requests: /v1/completions, /v1/chat/completions ------------------------------ */
typedef struct {
    int chat;                 /* /v1/chat/completions: OpenAI's chat shapes, the reply ends at an end-of-turn token */
    int *prompt;              /* (n_prompt) malloc'd */
    int n_prompt;
    int max_tokens;
    float temperature, top_p, min_p;
    int top_k;
    SamplerPenalties penalties;
    unsigned long long seed;  /* the sampler's: never 0, which would stall its xorshift */
    int seed_given;
    char *stops[SERVE_MAX_STOPS]; /* malloc'd: a stream outlives the request's JSON */
    size_t stop_lens[SERVE_MAX_STOPS];
    int n_stops;
    int logprobs;             /* top entries per token; -1: no logprobs object */
    int echo;
    int stream, include_usage;
    int variant;              /* the positional variant ("pe"): its slots run the request */
} GenRequest;

static void gen_request_free(GenRequest *q) {
    free(q->prompt);
    for (int i = 0; i < q->n_stops; i++) free(q->stops[i]);
}

static int get_stops(const JsonValue *root, GenRequest *q, ApiError *e) {
    const JsonValue *v = json_get(root, "stop");
    if (!v || v->type == JSON_NULL) return 0;
    const JsonValue *list = v->type == JSON_ARRAY ? v->items : v;
    uint32_t n = v->type == JSON_ARRAY ? v->len : 1;
    if (n > SERVE_MAX_STOPS) return refuse(e, 400, "stop", "'stop' holds at most %d strings", SERVE_MAX_STOPS);
    for (uint32_t i = 0; i < n; i++)
        if (list[i].type != JSON_STRING || list[i].len == 0)
            return refuse(e, 400, "stop", "'stop' must be a non-empty string or an array of them");
    for (uint32_t i = 0; i < n; i++) {
        q->stops[i] = malloc_or_exit(list[i].len, "a stop string");
        memcpy(q->stops[i], list[i].string, list[i].len);
        q->stop_lens[i] = list[i].len;
        q->n_stops++;
    }
    return 0;
}

static int get_prompt(const ServeApi *api, const JsonValue *root, GenRequest *q, ApiError *e) {
    const Tokenizer *tok = api->cfg.tok;
    const JsonValue *v = json_get(root, "prompt");
    if (!v) return refuse(e, 400, "prompt", "'prompt' is required");
    if (v->type == JSON_ARRAY && v->len > 0 && v->items[0].type != JSON_NUMBER)
        return refuse(e, 400, "prompt", "one prompt per request: 'prompt' must be a string or an array of token ids");
    if (v->type == JSON_ARRAY) return get_token_array(v, "prompt", tok->vocab_size, &q->prompt, &q->n_prompt, e);
    if (v->type != JSON_STRING) return refuse(e, 400, "prompt", "'prompt' must be a string or an array of token ids");
    PosencError err;
    /* BOS first, as -m generate encodes its prompt */
    if (tokenizer_encode_alloc(tok, v->string, v->len, 1, 0, &q->prompt, &q->n_prompt, &err))
        return refuse(e, 400, "prompt", "%s", err.msg);
    if (q->n_prompt == 0) return refuse(e, 400, "prompt", "the prompt encodes to no tokens");
    return 0;
}

/* A message's content: a string, or OpenAI's array of text parts joined
 * (malloc'd, NUL-terminated: the template reads C strings). */
static char *message_content(const JsonValue *m, uint32_t i, ApiError *e) {
    const JsonValue *c = json_get(m, "content");
    size_t len = 0;
    if (c && c->type == JSON_STRING) len = c->len;
    else if (c && c->type == JSON_ARRAY) {
        for (uint32_t k = 0; k < c->len; k++) {
            const JsonValue *part = &c->items[k], *text = json_get(part, "text");
            if (part->type != JSON_OBJECT || !json_is_string(json_get(part, "type"), "text") || !text ||
                text->type != JSON_STRING) {
                refuse(e, 400, "messages", "messages[%u].content[%u] must be {\"type\": \"text\", \"text\": TEXT}", i, k);
                return NULL;
            }
            len += text->len;
        }
    } else {
        refuse(e, 400, "messages", "messages[%u].content must be a string or an array of text parts", i);
        return NULL;
    }
    char *out = malloc_or_exit(len + 1, "a chat message"), *at = out;
    if (c->type == JSON_STRING) memcpy(at, c->string, c->len), at += c->len;
    else
        for (uint32_t k = 0; k < c->len; k++) {
            const JsonValue *text = json_get(&c->items[k], "text");
            memcpy(at, text->string, text->len);
            at += text->len;
        }
    *at = 0;
    if (memchr(out, 0, len)) { /* a C string would end there: the template would see less */
        free(out);
        refuse(e, 400, "messages", "messages[%u].content contains a NUL character", i);
        return NULL;
    }
    return out;
}

/* The messages rendered by the chat template with its generation prompt
 * and encoded, as -m chat renders and encodes a turn (chat_format_*). */
static int get_messages(const ServeApi *api, const JsonValue *root, GenRequest *q, ApiError *e) {
    const JsonValue *v = json_get(root, "messages");
    if (!v) return refuse(e, 400, "messages", "'messages' is required");
    if (v->type != JSON_ARRAY || v->len == 0)
        return refuse(e, 400, "messages", "'messages' must be a non-empty array of {\"role\", \"content\"}");
    ChatMessage *messages = calloc_or_exit(v->len, sizeof *messages, "the chat messages");
    static const char *const known[] = {"role", "content", "name", NULL};
    int rc = 0;
    uint32_t n = 0;
    for (; n < v->len && !rc; n++) {
        const JsonValue *m = &v->items[n], *role = json_get(m, "role");
        if (m->type != JSON_OBJECT || !role || role->type != JSON_STRING || role->len == 0 ||
            memchr(role->string, 0, role->len)) {
            rc = refuse(e, 400, "messages", "messages[%u] must be an object with a 'role' string", n);
            break;
        }
        if (check_fields(m, known, e)) {
            e->param = "messages";
            rc = -1;
            break;
        }
        char *content = message_content(m, n, e);
        if (!content) {
            rc = -1;
            break;
        }
        char *r = malloc_or_exit(role->len + 1, "a chat role");
        memcpy(r, role->string, role->len);
        r[role->len] = 0;
        messages[n] = (ChatMessage){r, content};
    }
    if (!rc) {
        PosencError err;
        size_t len;
        char *text = chat_format_render(api->cfg.chat, messages, (int)n, 1, &len, &err);
        if (!text || chat_format_encode(api->cfg.chat, text, len, &q->prompt, &q->n_prompt, &err))
            rc = refuse(e, 400, "messages", "%s", err.msg);
        else if (q->n_prompt == 0)
            rc = refuse(e, 400, "messages", "the chat template renders the messages as no tokens");
        free(text);
    }
    for (uint32_t i = 0; i < n; i++) {
        free((char *)messages[i].role);
        free((char *)messages[i].content);
    }
    free(messages);
    return rc;
}

/* "pe": one of the variants the server was started with (--pe A,B,...);
 * absent or null: the first. */
static int get_variant(const ServeApi *api, const JsonValue *root, GenRequest *q, ApiError *e) {
    const JsonValue *v = json_get(root, "pe");
    if (!v || v->type == JSON_NULL) return 0;
    for (int i = 0; v->type == JSON_STRING && i < api->cfg.n_variants; i++)
        if (strlen(api->cfg.variants[i]) == v->len && memcmp(api->cfg.variants[i], v->string, v->len) == 0) {
            q->variant = i;
            return 0;
        }
    char names[512] = "";
    for (int i = 0; i < api->cfg.n_variants; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", api->cfg.variants[i]);
    return refuse(e, 400, "pe", "'pe' must name a variant the server runs (--pe): %s", names);
}

static int parse_generation(const ServeApi *api, const JsonValue *root, int chat, GenRequest *q, ApiError *e) {
    static const char *const completion_fields[] = {
        "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "logprobs",
        "echo", "n", "stream", "stream_options", "presence_penalty", "frequency_penalty", "user", "pe", NULL};
    static const char *const chat_fields[] = {
        "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
        "seed", "stop", "logprobs", "top_logprobs", "n", "stream", "stream_options", "presence_penalty",
        "frequency_penalty", "user", "pe", NULL};
    const ServeSampling *d = &api->cfg.defaults;
    *q = (GenRequest){.chat = chat, .max_tokens = -1, .temperature = d->temperature, .top_p = d->top_p,
                      .min_p = d->min_p, .top_k = d->top_k, .penalties = d->penalties, .logprobs = -1};
    if (check_fields(root, chat ? chat_fields : completion_fields, e)) return -1;
    if (chat && !api->cfg.chat)
        return refuse(e, 400, "messages", "the server has no chat template: start it with --chat-template "
                                          "(the model has none)");
    const char *text_fields[] = {"model", "user"};
    for (int i = 0; i < 2; i++) {
        const JsonValue *v = json_get(root, text_fields[i]);
        if (v && v->type != JSON_STRING && v->type != JSON_NULL)
            return refuse(e, 400, text_fields[i], "'%s' must be a string", text_fields[i]);
    }
    if (get_variant(api, root, q, e)) return -1;
    int n = 1;
    double seed = -1, logprobs = -1, top_logprobs = 0;
    int chat_logprobs = 0;
    if (get_int(root, "n", 1, 1, &n, e) || get_bool(root, "stream", &q->stream, e) ||
        get_int(root, "max_tokens", 0, INT32_MAX, &q->max_tokens, e) ||
        (chat && get_int(root, "max_completion_tokens", 0, INT32_MAX, &q->max_tokens, e)) ||
        get_float(root, "temperature", 0, 2, &q->temperature, e) ||
        get_float(root, "top_p", 0, 1, &q->top_p, e) || get_int(root, "top_k", 0, INT32_MAX, &q->top_k, e) ||
        get_float(root, "min_p", 0, 1, &q->min_p, e) ||
        get_float(root, "presence_penalty", -2, 2, &q->penalties.presence, e) ||
        get_float(root, "frequency_penalty", -2, 2, &q->penalties.frequency, e) ||
        get_number(root, "seed", 0, 9007199254740991.0, 1, &seed, e) || /* 2^53 - 1: exact in JSON */
        (chat ? get_bool(root, "logprobs", &chat_logprobs, e) ||
                    get_number(root, "top_logprobs", 0, SERVE_MAX_LOGPROBS, 1, &top_logprobs, e)
              : get_number(root, "logprobs", 0, SERVE_MAX_LOGPROBS, 1, &logprobs, e) ||
                    get_bool(root, "echo", &q->echo, e)) ||
        get_stops(root, q, e))
        return -1;
    const JsonValue *opts = json_get(root, "stream_options");
    if (opts && opts->type != JSON_NULL) {
        static const char *const known[] = {"include_usage", NULL};
        if (opts->type != JSON_OBJECT || check_fields(opts, known, e) ||
            get_bool(opts, "include_usage", &q->include_usage, e)) {
            if (opts->type != JSON_OBJECT) refuse(e, 400, "stream_options", "'stream_options' must be an object");
            e->param = "stream_options";
            return -1;
        }
        if (!q->stream) return refuse(e, 400, "stream_options", "'stream_options' needs 'stream': true");
    }
    if (chat && json_get(root, "top_logprobs") && json_get(root, "top_logprobs")->type != JSON_NULL && !chat_logprobs)
        return refuse(e, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    /* "seed": 0 is a seed like any other: the sampler gets a constant past
     * 2^53 for it, which no other request's seed can be */
    q->seed_given = seed >= 0;
    q->seed = seed > 0 ? (unsigned long long)seed : 0x9E3779B97F4A7C15ull;
    q->logprobs = chat ? (chat_logprobs ? (int)top_logprobs : -1) : (int)logprobs;
    if (chat ? get_messages(api, root, q, e) : get_prompt(api, root, q, e)) return -1;
    int n_ctx = api->slots[0].ctx->cache.n_ctx;
    if (q->n_prompt > n_ctx) {
        refuse(e, 400, chat ? "messages" : "prompt", "the prompt is %d tokens but the context holds %d",
               q->n_prompt, n_ctx);
        e->code = "context_length_exceeded";
        return -1;
    }
    int room = n_ctx - q->n_prompt;
    if (q->max_tokens > room) {
        refuse(e, 400, "max_tokens", "the prompt (%d tokens) and max_tokens (%d) exceed the context (%d)",
               q->n_prompt, q->max_tokens, n_ctx);
        e->code = "context_length_exceeded";
        return -1;
    }
    if (q->max_tokens < 0) { /* not given: the command line's, else the endpoint's, within the room */
        q->max_tokens = d->max_tokens > 0 ? d->max_tokens : chat ? room : SERVE_DEFAULT_MAX_TOKENS;
        if (q->max_tokens > room) q->max_tokens = room;
    }
    PosencError err;
    if (context_check_tokens(api->slots[0].ctx, q->prompt, q->n_prompt, 0, &err))
        return refuse(e, 400, chat ? "messages" : "prompt", "%s", err.msg);
    return 0;
}

/* One token of the logprobs: its log-probability (NaN: none, the prompt's
 * first token) and the most probable tokens in its place. */
typedef struct {
    int token, prev;               /* prev: the token before it, whose text it follows (-1: none) */
    size_t text_offset, text_len;  /* its bytes of the response's text */
    double logprob;
    int n_top;
    int top_ids[SERVE_MAX_LOGPROBS];
    double top_logprobs[SERVE_MAX_LOGPROBS];
} TokenLogprob;

struct ServeStream {
    ServeApi *api;
    ServeSlot *slot;
    GenRequest q;
    ServeResponse counts;
    long id;
    long long created;
    Sampler sampler;
    FILE *text;          /* a memstream onto text_buf: the echoed prompt, then the generated text */
    char *text_buf;
    size_t text_len;
    size_t text_start;   /* where the generated text starts */
    size_t text_end;     /* where a stop string cut it; SIZE_MAX: nowhere */
    TokenLogprob *lp;    /* (cap_lp) when logprobs were asked for */
    int n_lp, cap_lp;
    const float *logits; /* the last forward call's row that chooses the next token */
    int token;           /* the last token: generated tokens are fed when the next one is wanted */
    int pending;         /* token is not in the cache yet */
    const char *finish;  /* NULL while generating */
    /* streaming: what the events have carried so far */
    int started, finished_sent, done;
    size_t released;     /* bytes of text */
    int lp_released;     /* entries of lp */
    char *event;         /* the last event, malloc'd */
    size_t event_len;
    PosencError err;     /* the engine's failure, with failed */
    int failed;
};

/* Appends the token's bytes to the text as -m generate writes them
 * (write_piece); returns its entry when logprobs were asked for, else NULL. */
static TokenLogprob *emit_token(ServeStream *g, int prev, int token) {
    size_t start = (size_t)ftell(g->text);
    write_token(g->api->cfg.tok, g->text, prev, token);
    if (g->q.logprobs < 0) return NULL;
    if (g->n_lp == g->cap_lp) {
        g->cap_lp = g->cap_lp ? 2 * g->cap_lp : 64;
        TokenLogprob *grown = realloc(g->lp, (size_t)g->cap_lp * sizeof *grown);
        if (!grown) posenc_out_of_memory((size_t)g->cap_lp, sizeof *grown, "the log-probabilities");
        g->lp = grown;
    }
    TokenLogprob *t = &g->lp[g->n_lp++];
    *t = (TokenLogprob){.token = token, .prev = prev, .text_offset = start,
                        .text_len = (size_t)ftell(g->text) - start, .logprob = NAN};
    return t;
}

/* The token's log-probability under the raw logits (no temperature, top-k
 * or top-p, as --logits-out) and the n_top most probable ones, most
 * probable first, ties by lower id. */
static void score_token(TokenLogprob *t, const float *logits, int vocab, int n_top) {
    double norm = ppl_log_normalizer(logits, vocab);
    t->logprob = (double)logits[t->token] - norm;
    int n = n_top < vocab ? n_top : vocab;
    if (n > 0) logprobs_select_top(t->top_ids, n, logits, vocab);
    t->n_top = n;
    for (int i = 0; i < n; i++) t->top_logprobs[i] = (double)logits[t->top_ids[i]] - norm;
}

/* Runs tokens at the slot's next cells, recording them as cached;
 * `all_logits` returns every row's (the chunk must fit max_tokens). */
static const float *feed(ServeSlot *slot, const int *tokens, int n, int all_logits, PosencError *err) {
    KVCache *kv = &slot->ctx->cache;
    int first = kv->n_used;
    const float *logits = context_step(slot->ctx, tokens, n, first, all_logits, err);
    if (logits) memcpy(slot->cached + first, tokens, (size_t)n * sizeof *tokens);
    return logits;
}

/* ---- slots and the queue ----------------------------------------------------------------------------- */
static int common_prefix(const ServeSlot *slot, const int *prompt, int n) {
    int i = 0, used = slot->ctx->cache.n_used;
    while (i < n && i < used && prompt[i] == slot->cached[i]) i++;
    return i;
}

/* Waits for a free slot of the request's variant in turn (each variant's
 * queue first come first served) and takes the one sharing the longest
 * prefix with the prompt (the lowest index among equals); NULL (429) when
 * no slot is free and the queues together hold max_queue. */
static ServeSlot *acquire_slot(ServeApi *api, const GenRequest *q, ApiError *e) {
    pthread_mutex_lock(&api->lock);
    int v = q->variant, free_slots = 0;
    unsigned long waiting = 0;
    for (int i = 0; i < api->n_slots; i++) free_slots += !api->slots[i].busy && api->slots[i].variant == v;
    for (int i = 0; i < api->cfg.n_variants; i++) waiting += api->next_ticket[i] - api->serving[i];
    if (!free_slots && waiting >= (unsigned long)api->cfg.max_queue) {
        pthread_mutex_unlock(&api->lock);
        refuse(e, 429, NULL, "the slots of '%s' are busy and %lu requests wait: the queue is full, try again later",
               api->cfg.variants[v], waiting);
        e->type = "rate_limit_error";
        e->code = "queue_full";
        return NULL;
    }
    unsigned long ticket = api->next_ticket[v]++;
    ServeSlot *best = NULL;
    for (;;) {
        if (api->stopping) { /* leave the queue: the tickets behind move up */
            api->serving[v]++;
            pthread_cond_broadcast(&api->changed);
            pthread_mutex_unlock(&api->lock);
            refuse(e, 503, NULL, "the server is stopping");
            return NULL;
        }
        if (ticket == api->serving[v]) {
            int best_len = -1;
            for (int i = 0; i < api->n_slots; i++) {
                ServeSlot *s = &api->slots[i];
                int len = s->busy || s->variant != v ? -1 : common_prefix(s, q->prompt, q->n_prompt);
                if (len > best_len) best = s, best_len = len;
            }
            if (best_len >= 0) break;
        }
        pthread_cond_wait(&api->changed, &api->lock);
    }
    best->busy = 1;
    api->serving[v]++;
    pthread_cond_broadcast(&api->changed);
    pthread_mutex_unlock(&api->lock);
    return best;
}

static void release_slot(ServeApi *api, ServeSlot *slot) {
    pthread_mutex_lock(&api->lock);
    slot->busy = 0;
    pthread_cond_broadcast(&api->changed);
    pthread_mutex_unlock(&api->lock);
}

/* ---- generating ---------------------------------------------------------------------------------------- */
/* The first occurrence of a stop string in text[from..len), or -1. */
static long find_stop(const GenRequest *q, const char *text, size_t len, size_t from) {
    long best = -1;
    for (int i = 0; i < q->n_stops; i++) {
        const char *hit = memmem(text + from, len - from, q->stops[i], q->stop_lens[i]);
        if (hit && (best < 0 || hit - text < best)) best = hit - text;
    }
    return best;
}

/* Bytes at the end of the generated text that could begin a stop string:
 * a stream holds them back until the next token shows whether they do. */
static size_t stop_hold(const GenRequest *q, const char *text, size_t len, size_t start) {
    size_t held = 0;
    for (int i = 0; i < q->n_stops; i++)
        for (size_t n = q->stop_lens[i] - 1; n > held; n--)
            if (n <= len - start && memcmp(text + len - n, q->stops[i], n) == 0) {
                held = n;
                break;
            }
    return held;
}

/* The prompt after the cached prefix the slot shares (all of it with echo,
 * whose log-probabilities need every row's logits); 0, or -1 + g->err. */
static int prefill(ServeStream *g) {
    const GenRequest *q = &g->q;
    ServeSlot *slot = g->slot;
    KVCache *kv = &slot->ctx->cache;
    int vocab = g->api->cfg.tok->vocab_size, n = q->n_prompt;
    int reuse = q->echo ? 0 : common_prefix(slot, q->prompt, n);
    if (reuse == n) reuse = n - 1; /* the last token runs again: its logits choose the first */
    if (reuse < kv->n_used) kv_cache_remove(kv, reuse, kv->n_used - reuse);
    g->counts.n_prompt = n;
    g->counts.n_reused = reuse;
    int n_top = q->logprobs > 0 ? q->logprobs : 0;
    for (int i = 0; q->echo && i < n; i++) emit_token(g, i ? q->prompt[i - 1] : -1, q->prompt[i]);
    for (int done = reuse; done < n;) {
        int max = slot->ctx->state.max_tokens, chunk = n - done < max ? n - done : max;
        const float *logits = feed(slot, q->prompt + done, chunk, q->echo, &g->err);
        if (!logits) return -1;
        for (int j = 0; q->echo && g->lp && j < chunk; j++) /* row j predicts token done + j + 1 */
            if (done + j + 1 < n) score_token(&g->lp[done + j + 1], logits + (size_t)j * vocab, vocab, n_top);
        g->logits = q->echo ? logits + (size_t)(chunk - 1) * vocab : logits;
        done += chunk;
    }
    for (int i = 0; i < n; i++) sampler_accept(&g->sampler, q->prompt[i]);
    fflush(g->text);
    g->text_start = g->text_len;
    g->token = q->prompt[n - 1];
    return 0;
}

/* One token, sampled as -m generate samples (chat: as -m chat, until an
 * end-of-turn token): 1 while more may follow, 0 when the text has ended
 * (g->finish), -1 + g->err when the engine failed. */
static int step(ServeStream *g) {
    const GenRequest *q = &g->q;
    const Tokenizer *tok = g->api->cfg.tok;
    if (g->counts.n_generated >= q->max_tokens) {
        g->finish = "length";
        return 0;
    }
    if (g->pending) {
        g->logits = feed(g->slot, &g->token, 1, 0, &g->err);
        if (!g->logits) return -1;
        g->pending = 0;
    }
    int next = sampler_sample(&g->sampler, g->logits);
    if (next == tok->bos_id || (q->chat ? tokenizer_ends_turn(tok, next) : tokenizer_is_eog(tok, next))) {
        g->finish = "stop";
        return 0;
    }
    sampler_accept(&g->sampler, next);
    size_t before = (size_t)ftell(g->text);
    TokenLogprob *t = emit_token(g, g->token, next);
    if (t) score_token(t, g->logits, tok->vocab_size, q->logprobs);
    g->counts.n_generated++;
    g->token = next;
    g->pending = 1;
    fflush(g->text);
    if (q->n_stops) {
        size_t max_stop = 0;
        for (int i = 0; i < q->n_stops; i++) max_stop = q->stop_lens[i] > max_stop ? q->stop_lens[i] : max_stop;
        size_t from = before - g->text_start >= max_stop ? before - max_stop + 1 : g->text_start;
        long stop = find_stop(q, g->text_buf, g->text_len, from);
        if (stop >= 0) { /* the text ends before the stop string, as OpenAI's */
            g->text_end = (size_t)stop;
            while (g->n_lp > 0 && g->lp[g->n_lp - 1].text_offset >= g->text_end) g->n_lp--;
            g->finish = "stop";
            return 0;
        }
    }
    if (g->counts.n_generated == q->max_tokens) {
        g->finish = "length";
        return 0;
    }
    return 1;
}

/* ---- writing the responses ---------------------------------------------------------------------------- */
static size_t text_length(const ServeStream *g) { return g->text_len < g->text_end ? g->text_len : g->text_end; }

/* A candidate's text in a token's place: after the token before it. */
static const char *candidate_text(const ServeStream *g, const TokenLogprob *t, int id, size_t *len) {
    *len = 0;
    return id == g->api->cfg.tok->bos_id ? "" : tokenizer_decode(g->api->cfg.tok, t->prev, id, len);
}

/* OpenAI's legacy logprobs object of entries [from, to). */
static void write_legacy_logprobs(FILE *f, const ServeStream *g, int from, int to) {
    fputs("{\"tokens\":[", f);
    for (int i = from; i < to; i++) {
        if (i > from) fputc(',', f);
        json_write_string(f, g->text_buf + g->lp[i].text_offset, g->lp[i].text_len);
    }
    fputs("],\"token_logprobs\":[", f);
    for (int i = from; i < to; i++) {
        if (i > from) fputc(',', f);
        json_write_number(f, g->lp[i].logprob);
    }
    fputs("],\"top_logprobs\":[", f);
    for (int i = from; i < to; i++) {
        const TokenLogprob *t = &g->lp[i];
        if (i > from) fputc(',', f);
        if (isnan(t->logprob)) {
            fputs("null", f);
            continue;
        }
        fputc('{', f);
        for (int k = 0; k < t->n_top; k++) {
            size_t len;
            const char *piece = candidate_text(g, t, t->top_ids[k], &len);
            if (k) fputc(',', f);
            json_write_string(f, piece, len);
            fputc(':', f);
            json_write_number(f, t->top_logprobs[k]);
        }
        fputc('}', f);
    }
    fputs("],\"text_offset\":[", f);
    for (int i = from; i < to; i++) fprintf(f, "%s%zu", i > from ? "," : "", g->lp[i].text_offset);
    fputs("]}", f);
}

/* One entry of a chat logprobs list: token, logprob and its UTF-8 bytes. */
static void write_chat_token(FILE *f, const char *text, size_t len, double logprob) {
    fputs("{\"token\":", f);
    json_write_string(f, text, len);
    fputs(",\"logprob\":", f);
    json_write_number(f, logprob);
    fputs(",\"bytes\":[", f);
    for (size_t i = 0; i < len; i++) fprintf(f, "%s%u", i ? "," : "", (unsigned char)text[i]);
    fputc(']', f);
}

/* OpenAI's chat logprobs object of entries [from, to). */
static void write_chat_logprobs(FILE *f, const ServeStream *g, int from, int to) {
    fputs("{\"content\":[", f);
    for (int i = from; i < to; i++) {
        const TokenLogprob *t = &g->lp[i];
        if (i > from) fputc(',', f);
        write_chat_token(f, g->text_buf + t->text_offset, t->text_len, t->logprob);
        fputs(",\"top_logprobs\":[", f);
        for (int k = 0; k < t->n_top; k++) {
            size_t len;
            const char *piece = candidate_text(g, t, t->top_ids[k], &len);
            if (k) fputc(',', f);
            write_chat_token(f, piece, len, t->top_logprobs[k]);
            fputc('}', f);
        }
        fputs("]}", f);
    }
    fputs("]}", f);
}

static void write_logprobs(FILE *f, const ServeStream *g, int from, int to) {
    if (g->q.logprobs < 0) fputs("null", f);
    else if (g->q.chat) write_chat_logprobs(f, g, from, to);
    else write_legacy_logprobs(f, g, from, to);
}

static void write_usage(FILE *f, const ServeStream *g) {
    fprintf(f, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}",
            g->counts.n_prompt, g->counts.n_generated, g->counts.n_prompt + g->counts.n_generated);
}

/* The head every response and event of a request shares. */
static void write_head(FILE *f, const ServeStream *g, const char *object) {
    fprintf(f, "{\"id\":\"%s-posenc-%ld\",\"object\":\"%s\",\"created\":%lld,\"model\":",
            g->q.chat ? "chatcmpl" : "cmpl", g->id, object, g->created);
    json_write_string(f, g->api->cfg.model_id, strlen(g->api->cfg.model_id));
}

static void write_response(const ServeStream *g, Body *b) {
    FILE *f = body_open(b);
    write_head(f, g, g->q.chat ? "chat.completion" : "text_completion");
    fputs(",\"choices\":[{\"index\":0,", f);
    if (g->q.chat) fputs("\"message\":{\"role\":\"assistant\",\"content\":", f);
    else fputs("\"text\":", f);
    json_write_string(f, g->text_buf, text_length(g));
    fputs(g->q.chat ? "}," : ",", f);
    fputs("\"logprobs\":", f);
    write_logprobs(f, g, 0, g->n_lp);
    fprintf(f, ",\"finish_reason\":\"%s\"}],", g->finish);
    write_usage(f, g);
    fputc('}', f);
}

/* One event of text[released..upto) and entries [lp_released, lp_to); the
 * finish reason when there is one. */
static void write_event(ServeStream *g, FILE *f, size_t upto, int lp_to, const char *finish) {
    fputs("data: ", f);
    write_head(f, g, g->q.chat ? "chat.completion.chunk" : "text_completion");
    fputs(",\"choices\":[{\"index\":0,", f);
    if (g->q.chat) {
        fputs("\"delta\":{", f);
        if (!g->started) fputs("\"role\":\"assistant\",", f);
        fputs("\"content\":", f);
        json_write_string(f, g->text_buf + g->released, upto - g->released);
        fputs("},", f);
    } else {
        fputs("\"text\":", f);
        json_write_string(f, g->text_buf + g->released, upto - g->released);
        fputc(',', f);
    }
    fputs("\"logprobs\":", f);
    if (lp_to > g->lp_released) write_logprobs(f, g, g->lp_released, lp_to);
    else fputs("null", f);
    fputs(",\"finish_reason\":", f);
    if (finish) fprintf(f, "\"%s\"", finish);
    else fputs("null", f);
    fputs("}]}\n\n", f);
    g->started = 1;
    g->released = upto;
    g->lp_released = lp_to;
}

/* The text a stream may send now: all of it once finished, else up to
 * what a stop string could still claim; with logprobs, whole tokens. */
static void releasable(const ServeStream *g, size_t *upto, int *lp_to) {
    size_t safe = text_length(g);
    if (!g->finish && g->q.n_stops) safe -= stop_hold(&g->q, g->text_buf, g->text_len, g->text_start);
    int to = g->lp_released;
    if (g->q.logprobs >= 0) {
        while (to < g->n_lp && (g->finish ? g->lp[to].text_offset <= safe
                                          : g->lp[to].text_offset + g->lp[to].text_len <= safe))
            to++;
        if (!g->finish) safe = to > 0 ? g->lp[to - 1].text_offset + g->lp[to - 1].text_len : g->released;
        if (safe < g->released) safe = g->released;
    }
    *upto = safe;
    *lp_to = to;
}

/* ---- the requests --------------------------------------------------------------------------------------- */
static ServeStream *start_generation(ServeApi *api, const JsonValue *root, int chat, ServeResponse *r, ApiError *e) {
    GenRequest q;
    if (parse_generation(api, root, chat, &q, e)) {
        gen_request_free(&q);
        return NULL;
    }
    ServeSlot *slot = acquire_slot(api, &q, e);
    if (!slot) {
        gen_request_free(&q);
        return NULL;
    }
    ServeStream *g = calloc_or_exit(1, sizeof *g, "a request");
    *g = (ServeStream){.api = api, .slot = slot, .q = q, .text_end = SIZE_MAX, .created = (long long)time(NULL),
                        .started = !q.chat /* a chat stream's first event names the role */};
    g->counts.slot = (int)(slot - api->slots);
    pthread_mutex_lock(&api->lock);
    unsigned long long seed = q.seed_given ? q.seed : api->next_seed;
    api->next_seed = api->next_seed * 6364136223846793005ull + 1442695040888963407ull;
    if (!api->next_seed) api->next_seed = 1;
    g->id = api->n_requests++;
    pthread_mutex_unlock(&api->lock);
    sampler_build(&g->sampler, api->cfg.tok->vocab_size, q.temperature, q.top_p, q.top_k, seed);
    sampler_set_min_p(&g->sampler, q.min_p);
    sampler_set_penalties(&g->sampler, q.penalties);
    g->text = open_memstream(&g->text_buf, &g->text_len);
    if (!g->text) posenc_out_of_memory(1, 1, "a completion's text");
    if (prefill(g)) {
        /* the cache's last chunk is suspect: the next request starts afresh */
        kv_cache_remove(&slot->ctx->cache, 0, slot->ctx->cache.n_used);
        refuse(e, 500, NULL, "%s", g->err.msg);
        *r = g->counts;
        serve_stream_free(g);
        return NULL;
    }
    return g;
}

void serve_stream_free(ServeStream *g) {
    if (!g) return;
    release_slot(g->api, g->slot);
    if (g->text) fclose(g->text);
    free(g->text_buf);
    free(g->lp);
    free(g->event);
    sampler_free(&g->sampler);
    gen_request_free(&g->q);
    free(g);
}

const ServeResponse *serve_stream_counts(const ServeStream *g) { return &g->counts; }

int serve_stream_next(ServeStream *g, const char **data, size_t *len) {
    if (g->done) return 0;
    omp_set_num_threads(g->api->threads);
    free(g->event);
    Body b;
    FILE *f = body_open(&b);
    for (;;) {
        if (g->finished_sent) {
            if (g->q.include_usage) { /* OpenAI's last chunk: no choices, the usage */
                fputs("data: ", f);
                write_head(f, g, g->q.chat ? "chat.completion.chunk" : "text_completion");
                fputs(",\"choices\":[],", f);
                write_usage(f, g);
                fputs("}\n\n", f);
            }
            fputs("data: [DONE]\n\n", f);
            g->done = 1;
            break;
        }
        if (g->failed) { /* the status has gone out: the error comes as an event, then [DONE] */
            ApiError e;
            ServeResponse er;
            refuse(&e, 500, NULL, "%s", g->err.msg);
            respond_error(&er, &e);
            fputs("data: ", f);
            fwrite(er.body, 1, er.len, f);
            fputs("\n\n", f);
            serve_response_free(&er);
            g->finished_sent = 1;
            break;
        }
        if (!g->finish && g->started && step(g) < 0) {
            /* the cache's last cells are suspect: the next request starts afresh */
            kv_cache_remove(&g->slot->ctx->cache, 0, g->slot->ctx->cache.n_used);
            g->failed = 1;
            continue;
        }
        size_t upto;
        int lp_to;
        releasable(g, &upto, &lp_to);
        if (g->finish) { /* the rest of the text with the finish reason */
            write_event(g, f, upto, lp_to, g->finish);
            g->finished_sent = 1;
            break;
        }
        if (upto > g->released || lp_to > g->lp_released || !g->started) {
            write_event(g, f, upto, lp_to, NULL);
            break;
        }
    }
    fclose(f);
    g->event = b.body;
    g->event_len = b.len;
    *data = g->event;
    *len = g->event_len;
    return 1;
}

/* A whole response: generation to the end, then the JSON. */
static int finish_generation(ServeStream *g, ServeResponse *r, ApiError *e) {
    int rc;
    while ((rc = step(g)) > 0) {}
    if (rc < 0) {
        kv_cache_remove(&g->slot->ctx->cache, 0, g->slot->ctx->cache.n_used);
        refuse(e, 500, NULL, "%s", g->err.msg);
    } else {
        Body b;
        write_response(g, &b);
        body_close(&b, r, 200);
    }
    int status = r->status;
    char *body = r->body;
    size_t len = r->len;
    *r = g->counts;
    r->status = status, r->body = body, r->len = len;
    serve_stream_free(g);
    return rc;
}

/* ---- the API ------------------------------------------------------------------------------------------ */
ContextSize serve_context_size(int n_ctx, TensorType kv_type) {
    int chunk = n_ctx < CONTEXT_PREFILL_CHUNK ? n_ctx : CONTEXT_PREFILL_CHUNK;
    return (ContextSize){.n_ctx = n_ctx, .max_tokens = chunk, .logit_rows = chunk, .kv_type = kv_type};
}

void serve_api_init(ServeApi *api, Context *ctxs, int n_slots, const ServeConfig *cfg) {
    *api = (ServeApi){.cfg = *cfg, .n_slots = n_slots, .threads = omp_get_max_threads(),
                      .next_seed = cfg->seed ? cfg->seed : 1};
    if (!cfg->n_variants) { /* one variant: the contexts' scheme */
        static const char *names[PE_COUNT];
        PeKind kind = ctxs[0].pe.params.kind;
        names[kind] = pe_kind_name(kind);
        api->cfg.variants = &names[kind];
        api->cfg.n_variants = 1;
    }
    int per_variant = n_slots / api->cfg.n_variants;
    api->slots = calloc_or_exit((size_t)n_slots, sizeof *api->slots, "the slots");
    for (int i = 0; i < n_slots; i++) {
        api->slots[i].ctx = &ctxs[i];
        api->slots[i].variant = i / per_variant;
        api->slots[i].cached = malloc_or_exit((size_t)ctxs[i].cache.n_ctx * sizeof(int), "a slot's tokens");
    }
    api->next_ticket = calloc_or_exit((size_t)api->cfg.n_variants, sizeof *api->next_ticket, "the queues");
    api->serving = calloc_or_exit((size_t)api->cfg.n_variants, sizeof *api->serving, "the queues");
    pthread_mutex_init(&api->lock, NULL);
    pthread_cond_init(&api->changed, NULL);
}

void serve_api_free(ServeApi *api) {
    for (int i = 0; i < api->n_slots; i++) free(api->slots[i].cached);
    free(api->slots);
    free(api->next_ticket);
    free(api->serving);
    api->slots = NULL;
    pthread_mutex_destroy(&api->lock);
    pthread_cond_destroy(&api->changed);
}

void serve_api_stop(ServeApi *api) {
    pthread_mutex_lock(&api->lock);
    api->stopping = 1;
    pthread_cond_broadcast(&api->changed);
    pthread_mutex_unlock(&api->lock);
}

void serve_response_free(ServeResponse *r) {
    free(r->body);
    r->body = NULL;
}

typedef enum { ROUTE_HEALTH, ROUTE_MODELS, ROUTE_TOKENIZE, ROUTE_DETOKENIZE, ROUTE_COMPLETIONS, ROUTE_CHAT } Route;
static const struct {
    const char *path, *method;
    Route route;
} routes[] = {
    {"/health", "GET", ROUTE_HEALTH},          {"/v1/models", "GET", ROUTE_MODELS},
    {"/tokenize", "POST", ROUTE_TOKENIZE},     {"/detokenize", "POST", ROUTE_DETOKENIZE},
    {"/v1/completions", "POST", ROUTE_COMPLETIONS}, {"/v1/chat/completions", "POST", ROUTE_CHAT},
};

void serve_begin(ServeApi *api, const char *method, const char *path, const char *body, size_t len,
                 ServeResponse *r, ServeStream **stream) {
    *r = (ServeResponse){.slot = -1};
    *stream = NULL;
    /* this thread's forward passes use the threads the contexts' scratch was sized for */
    omp_set_num_threads(api->threads);
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
            Route route = routes[found].route;
            if (route == ROUTE_TOKENIZE) rc = handle_tokenize(api, root, r, &e);
            else if (route == ROUTE_DETOKENIZE) rc = handle_detokenize(api, root, r, &e);
            else {
                ServeStream *g = start_generation(api, root, route == ROUTE_CHAT, r, &e);
                json_free(&doc);
                if (!g) rc = -1;
                else if (g->q.stream) {
                    g->counts.status = 200;
                    *r = g->counts;
                    *stream = g;
                    return;
                } else rc = finish_generation(g, r, &e);
                if (rc) respond_error(r, &e);
                return;
            }
            json_free(&doc);
        }
    }
    if (rc) respond_error(r, &e);
}

void serve_handle(ServeApi *api, const char *method, const char *path, const char *body, size_t len,
                  ServeResponse *r) {
    ServeStream *g;
    serve_begin(api, method, path, body, len, r, &g);
    if (!g) return;
    Body b;
    FILE *f = body_open(&b);
    const char *data;
    size_t n;
    while (serve_stream_next(g, &data, &n)) fwrite(data, 1, n, f);
    body_close(&b, r, 200);
    ServeResponse counts = g->counts;
    serve_stream_free(g);
    r->n_prompt = counts.n_prompt, r->n_reused = counts.n_reused, r->n_generated = counts.n_generated;
}
