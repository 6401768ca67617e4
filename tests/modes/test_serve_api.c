/* The server's API without sockets (modes/serve_api.c) on stories260K:
 * routing (404, 405, 413), every kind of malformed request a 4xx with
 * OpenAI's error object naming the field, tokenize/detokenize, and
 * completions: a request whose prompt the slot's cache already holds gives
 * the same text and log-probabilities as from an empty cache (control: a
 * different prompt differs), echo's log-probabilities equal one prefill's
 * log-softmax (control: another token's is far), stop strings cut the text.
 * Chat completions: the reply equal to -m chat's session (chat_turn) on
 * the same conversation, turn after turn (control: another message
 * differs).  Streams: their events joined equal the whole response, stop
 * strings held back until decided.  Slots: two streams interleaved give
 * what each gives alone; a full queue is 429; a stream dropped mid-way
 * frees its slot, whose cache then serves exactly; stopping turns a
 * waiting request away (503) while the slot is still held.
 * The HTTP server around it: tests/cli/test_serve.c. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_parse.h"
#include "chat/chat_template.h"
#include "modes/perplexity.h"
#include "modes/serve_api.h"
#include "tests/common.h"

#define MAX_SLOTS 2

typedef struct {
    Model model;
    Tokenizer tok;
    Context ctx[MAX_SLOTS];
    int n_slots;
    JinjaTemplate *template;
    ChatFormat chat;
    ServeApi api;
} Server;

/* n_slots slots of 256 cells, no queue; with the llama2 chat template
 * (which stories260K's vocabulary writes) when `chat`. */
static int server_open_with(Server *s, int n_slots, int chat) {
    const char *models = tests_models_dir("the server's API on stories260K");
    if (!models) return 0;
    tests_load_model(&s->model, tests_model_path(models, "stories260K/stories260K.bin"));
    tests_load_tokenizer(&s->tok, tests_model_path(models, "stories260K/tok512.bin"), 512);
    ContextSize size = serve_context_size(256, TENSOR_F32);
    PosencError err;
    s->n_slots = n_slots;
    for (int i = 0; i < n_slots; i++)
        ck_assert_msg(context_build_sized(&s->ctx[i], &s->model, &s->model.pe, &size, &err) == 0, "%s", err.msg);
    s->template = NULL;
    if (chat) {
        const char *text = chat_template_builtin("llama2");
        s->template = jinja_parse(text, strlen(text), &err);
        ck_assert_msg(s->template != NULL, "%s", err.msg);
        chat_format_init(&s->chat, s->template, NULL, &s->tok);
    }
    ServeConfig cfg = {.tok = &s->tok, .chat = chat ? &s->chat : NULL, .model_id = "stories260K", .seed = 42,
                       .max_queue = 0, .defaults = {.temperature = 1.0f, .top_p = 1.0f,
                                    .penalties = {.repeat = 1.0f, .last_n = 64}}};
    serve_api_init(&s->api, s->ctx, n_slots, &cfg);
    return 1;
}

static int server_open(Server *s) { return server_open_with(s, 1, 0); }

static void server_close(Server *s) {
    serve_api_free(&s->api);
    for (int i = 0; i < s->n_slots; i++) context_free(&s->ctx[i]);
    if (s->template) {
        chat_format_free(&s->chat);
        jinja_free(s->template);
    }
    tokenizer_free(&s->tok);
    model_free(&s->model);
}

/* One request; the body is parsed (it must be JSON) into doc. */
static int request(Server *s, const char *method, const char *path, const char *body, JsonDoc *doc) {
    ServeResponse r;
    serve_handle(&s->api, method, path, body, body ? strlen(body) : 0, &r);
    PosencError err;
    ck_assert_msg(json_parse(doc, r.body, r.len, &err) == 0, "%s: %s", err.msg, r.body);
    int status = r.status;
    serve_response_free(&r);
    return status;
}

/* A refusal: the status and OpenAI's error object, whose message holds needle
 * and whose param is `param` (NULL: null). */
static void expect_refusal(Server *s, const char *method, const char *path, const char *body, int status,
                           const char *param, const char *needle) {
    JsonDoc doc;
    ck_assert_int_eq(request(s, method, path, body, &doc), status);
    const JsonValue *e = json_get(&doc.root, "error");
    ck_assert_msg(e && e->type == JSON_OBJECT, "no error object for %s", body ? body : path);
    const char *msg = json_get_string(e, "message");
    ck_assert_msg(msg && strstr(msg, needle), "'%s' lacks '%s'", msg ? msg : "(none)", needle);
    ck_assert(json_get_string(e, "type") != NULL);
    const JsonValue *p = json_get(e, "param");
    if (param) ck_assert_msg(json_is_string(p, param), "param is not %s for %s", param, body);
    else ck_assert(p && p->type == JSON_NULL);
    ck_assert(json_get(e, "code") != NULL);
    json_free(&doc);
}

START_TEST(test_refusals) {
    Server s;
    if (!server_open(&s)) return;
    const char *c = "/v1/completions";
    expect_refusal(&s, "GET", "/nope", NULL, 404, NULL, "no such endpoint");
    expect_refusal(&s, "GET", c, NULL, 405, NULL, "takes POST");
    expect_refusal(&s, "POST", "/health", "{}", 405, NULL, "takes GET");
    expect_refusal(&s, "POST", c, "{\"prompt\": ", 400, NULL, "not JSON");
    expect_refusal(&s, "POST", c, "[1]", 400, NULL, "JSON object");
    expect_refusal(&s, "POST", c, "{}", 400, "prompt", "required");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"bogus\":1}", 400, NULL, "unknown field 'bogus'");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"n\":2}", 400, "n", "'n'");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"max_tokens\":-1}", 400, "max_tokens", "integer");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"max_tokens\":1.5}", 400, "max_tokens", "integer");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"temperature\":\"hot\"}", 400, "temperature", "number");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"logprobs\":21}", 400, "logprobs", "[0, 20]");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"echo\":1}", 400, "echo", "true or false");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400, "stop", "at most 4");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"stop\":7}", 400, "stop", "string");
    expect_refusal(&s, "POST", c, "{\"prompt\":[1,512]}", 400, "prompt", "token id");
    expect_refusal(&s, "POST", c, "{\"prompt\":[]}", 400, "prompt", "at least one");
    expect_refusal(&s, "POST", c, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt", "one prompt");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"max_tokens\":300}", 400, "max_tokens", "exceed the context");
    expect_refusal(&s, "POST", "/tokenize", "{\"content\":3}", 400, "content", "string");
    expect_refusal(&s, "POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", 400,
                   "messages", "--chat-template");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"pe\":\"alibi\"}", 400, "pe", "(--pe): rope");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"pe\":7}", 400, "pe", "variant");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"stream_options\":{\"include_usage\":true}}", 400,
                   "stream_options", "'stream': true");
    expect_refusal(&s, "POST", "/detokenize", "{\"tokens\":[-1]}", 400, "tokens", "token id");
    /* a body past the limit is refused before it is read */
    ServeResponse r;
    serve_handle(&s.api, "POST", c, "{}", SERVE_MAX_BODY + 1, &r);
    ck_assert_int_eq(r.status, 413);
    serve_response_free(&r);
    /* and the slot still serves (control: the refusals above were not all 4xx for one reason) */
    JsonDoc doc;
    ck_assert_int_eq(request(&s, "GET", "/health", NULL, &doc), 200);
    ck_assert(json_is_string(json_get(&doc.root, "status"), "ok"));
    json_free(&doc);
    ck_assert_int_eq(request(&s, "POST", c, "{\"prompt\":\"a\",\"max_tokens\":2}", &doc), 200);
    json_free(&doc);
    server_close(&s);
}
END_TEST

START_TEST(test_tokenize_round_trip) {
    Server s;
    if (!server_open(&s)) return;
    JsonDoc doc;
    ck_assert_int_eq(request(&s, "POST", "/tokenize", "{\"content\":\"Once\"}", &doc), 200);
    ck_assert(json_get(&doc.root, "tokens")->items[0].number != s.tok.bos_id); /* add_special: off */
    json_free(&doc);
    /* with BOS, whose text starts the decoding (no dummy-prefix space) */
    ck_assert_int_eq(request(&s, "POST", "/tokenize",
                             "{\"content\":\"Once upon a time, a cat.\",\"add_special\":true}", &doc), 200);
    const JsonValue *tokens = json_get(&doc.root, "tokens");
    ck_assert(tokens && tokens->type == JSON_ARRAY && tokens->len > 3);
    ck_assert_int_eq((int)tokens->items[0].number, s.tok.bos_id);
    char body[4096] = "{\"tokens\":[";
    for (uint32_t i = 0; i < tokens->len; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s%d", i ? "," : "", (int)tokens->items[i].number);
    strcat(body, "]}");
    json_free(&doc);
    ck_assert_int_eq(request(&s, "POST", "/detokenize", body, &doc), 200);
    ck_assert_str_eq(json_get_string(&doc.root, "content"), "Once upon a time, a cat.");
    json_free(&doc);
    ck_assert_int_eq(request(&s, "GET", "/v1/models", NULL, &doc), 200);
    const JsonValue *data = json_get(&doc.root, "data");
    ck_assert(data && data->len == 1 && json_is_string(json_get(&data->items[0], "id"), "stories260K"));
    json_free(&doc);
    server_close(&s);
}
END_TEST

/* The completion's text and its logprobs' values, for comparing requests. */
static char *completion(Server *s, const char *body, double *logprobs, int max) {
    JsonDoc doc;
    ck_assert_int_eq(request(s, "POST", "/v1/completions", body, &doc), 200);
    const JsonValue *choice = &json_get(&doc.root, "choices")->items[0];
    char *text = strdup(json_get_string(choice, "text"));
    const JsonValue *lp = json_get(choice, "logprobs");
    for (int i = 0; logprobs && i < max; i++) {
        const JsonValue *v = &json_get(lp, "token_logprobs")->items[i];
        logprobs[i] = v->type == JSON_NUMBER ? v->number : NAN;
    }
    json_free(&doc);
    return text;
}

START_TEST(test_cache_reuse_is_exact) {
    Server s;
    if (!server_open(&s)) return;
    const char *body = "{\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":0,\"logprobs\":2}";
    double first[20], again[20];
    char *a = completion(&s, body, first, 20);
    /* the cache now holds the prompt and 19 generated tokens: all but one reused */
    ServeResponse r;
    serve_handle(&s.api, "POST", "/v1/completions", body, strlen(body), &r);
    ck_assert_int_eq(r.n_reused, r.n_prompt - 1);
    serve_response_free(&r);
    char *b = completion(&s, body, again, 20);
    ck_assert_str_eq(a, b);
    for (int i = 0; i < 20; i++) ck_assert_msg(fabs(first[i] - again[i]) < 1e-5, "%d: %g vs %g", i, first[i], again[i]);
    /* control: another prompt continues otherwise */
    char *c = completion(&s, "{\"prompt\":\"The dog\",\"max_tokens\":20,\"temperature\":0}", NULL, 0);
    ck_assert_str_ne(a, c);
    /* a stop string ends the text before it (finish_reason stop) */
    char stop_body[256];
    char cut[5] = {0};
    memcpy(cut, a + 5, 4);
    snprintf(stop_body, sizeof stop_body,
             "{\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":0,\"stop\":[\"zzzz\",\"%s\"]}", cut);
    char *d = completion(&s, stop_body, NULL, 0);
    ck_assert_msg(strlen(d) <= 5 && strncmp(a, d, strlen(d)) == 0, "'%s' vs '%s' cut at '%s'", d, a, cut);
    free(a), free(b), free(c), free(d);
    server_close(&s);
}
END_TEST

START_TEST(test_echo_logprobs) {
    Server s;
    if (!server_open(&s)) return;
    double lp[8];
    free(completion(&s, "{\"prompt\":[1,403,407,261,378,395,302,347],\"max_tokens\":0,\"echo\":true,\"logprobs\":1}",
                    lp, 8));
    ck_assert(isnan(lp[0]));
    /* one prefill of the same tokens from an empty context */
    int ids[8] = {1, 403, 407, 261, 378, 395, 302, 347};
    Context ctx;
    tests_build_context(&ctx, &s.model, &s.model.pe, 8);
    const float *logits = context_forward(&ctx, ids, 8, 0, 1);
    for (int i = 1; i < 8; i++) {
        double want = -ppl_token_nll(logits + (size_t)(i - 1) * 512, 512, ids[i]);
        ck_assert_msg(fabs(lp[i] - want) < 1e-5, "token %d: %.9g vs %.9g", i, lp[i], want);
        /* control: another token's log-probability is far */
        double other = -ppl_token_nll(logits + (size_t)(i - 1) * 512, 512, (ids[i] + 1) % 512);
        ck_assert(fabs(lp[i] - other) > 1e-3);
    }
    context_free(&ctx);
    server_close(&s);
}
END_TEST


/* ---- chat, streams, slots ---------------------------------------------------------------------- */
/* The events of an SSE body: each "data: " line's JSON, until [DONE],
 * which must come last.  Returns the joined text (chat: the deltas'
 * content) and how many events there were; *finish the last finish_reason. */
static double stream_logprobs[1024];
static int n_stream_logprobs;

static char *stream_text(const char *body, int chat, char *finish, int *n_events) {
    n_stream_logprobs = 0;
    size_t cap = 4096, len = 0;
    char *text = calloc(cap, 1);
    *n_events = 0;
    const char *at = body;
    int done = 0;
    while (*at) {
        ck_assert_msg(!done, "an event after [DONE]: %s", at);
        ck_assert_msg(strncmp(at, "data: ", 6) == 0, "not an event: %.40s", at);
        const char *end = strstr(at, "\n\n");
        ck_assert(end != NULL);
        if (strncmp(at + 6, "[DONE]", 6) == 0) {
            done = 1;
            at = end + 2;
            continue;
        }
        JsonDoc doc;
        PosencError err;
        ck_assert_msg(json_parse(&doc, at + 6, (size_t)(end - at - 6), &err) == 0, "%s", err.msg);
        const JsonValue *choices = json_get(&doc.root, "choices");
        if (choices && choices->len) {
            const JsonValue *c = &choices->items[0];
            const char *piece = chat ? json_get_string(json_get(c, "delta"), "content") : json_get_string(c, "text");
            if (piece) {
                size_t n = strlen(piece);
                while (len + n + 1 > cap) text = realloc(text, cap *= 2);
                memcpy(text + len, piece, n + 1);
                len += n;
            }
            const JsonValue *lp = json_get(json_get(c, "logprobs"), "token_logprobs");
            for (uint32_t k = 0; lp && k < lp->len && n_stream_logprobs < 1024; k++)
                stream_logprobs[n_stream_logprobs++] = lp->items[k].type == JSON_NUMBER ? lp->items[k].number : NAN;
            const char *f = json_get_string(c, "finish_reason");
            if (f) snprintf(finish, 16, "%s", f);
        }
        json_free(&doc);
        (*n_events)++;
        at = end + 2;
    }
    ck_assert_msg(done, "no [DONE]");
    return text;
}

static char *chat_reply(Server *s, const char *body) {
    JsonDoc doc;
    ck_assert_int_eq(request(s, "POST", "/v1/chat/completions", body, &doc), 200);
    const JsonValue *choice = &json_get(&doc.root, "choices")->items[0];
    ck_assert(json_is_string(json_get(json_get(choice, "message"), "role"), "assistant"));
    char *text = strdup(json_get_string(json_get(choice, "message"), "content"));
    json_free(&doc);
    return text;
}

START_TEST(test_chat_as_chat_mode) {
    Server s;
    if (!server_open_with(&s, 1, 1)) return;
    /* -m chat's session on a context of its own, greedy, 24 tokens a reply */
    Context ctx;
    tests_build_context(&ctx, &s.model, &s.model.pe, 256);
    Sampler sampler;
    sampler_build(&sampler, 512, 0.0f, 1.0f, 0, 1);
    ChatOptions opt = {.template = s.template, .max_reply = 24, .keep = -1, .shift = CONTEXT_SHIFT_OFF};
    ChatSession session;
    PosencError err;
    ck_assert_msg(chat_session_init(&session, &ctx, &s.tok, &sampler, &opt, &err) == 0, "%s", err.msg);
    char *turn[2];
    size_t turn_len[2];
    const char *user[2] = {"Hello there", "Tell me a story"};
    for (int i = 0; i < 2; i++) {
        FILE *out = open_memstream(&turn[i], &turn_len[i]);
        ck_assert_int_eq(chat_turn(&session, user[i], out, &err), 0);
        fclose(out);
        turn[i][--turn_len[i]] = 0; /* the newline after the reply */
    }
    char body[2048];
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":24,\"temperature\":0}", user[0]);
    char *a = chat_reply(&s, body);
    ck_assert_str_eq(a, turn[0]);
    /* the second turn: the conversation so far, the reply as an assistant message (as text parts) */
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"},{\"role\":\"assistant\",\"content\":"
             "[{\"type\":\"text\",\"text\":\"%s\"}]},{\"role\":\"user\",\"content\":\"%s\"}],"
             "\"max_tokens\":24,\"temperature\":0}",
             user[0], turn[0], user[1]);
    char *b = chat_reply(&s, body);
    ck_assert_str_eq(b, turn[1]);
    /* control: another first message gives another reply */
    char *c = chat_reply(&s, "{\"messages\":[{\"role\":\"user\",\"content\":\"Bye\"}],\"max_tokens\":24,\"temperature\":0}");
    ck_assert_str_ne(c, turn[0]);
    free(a), free(b), free(c), free(turn[0]), free(turn[1]);
    chat_session_free(&session);
    sampler_free(&sampler);
    context_free(&ctx);

    const char *cc = "/v1/chat/completions";
    expect_refusal(&s, "POST", cc, "{}", 400, "messages", "required");
    expect_refusal(&s, "POST", cc, "{\"messages\":[]}", 400, "messages", "non-empty");
    expect_refusal(&s, "POST", cc, "{\"messages\":[{\"content\":\"a\"}]}", 400, "messages", "'role'");
    expect_refusal(&s, "POST", cc, "{\"messages\":[{\"role\":\"user\",\"content\":3}]}", 400, "messages", "content");
    expect_refusal(&s, "POST", cc, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400,
                   "messages", "text");
    expect_refusal(&s, "POST", cc, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", 400, "messages", "NUL");
    expect_refusal(&s, "POST", cc, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"tool_calls\":[]}]}", 400,
                   "messages", "unknown field 'tool_calls'");
    expect_refusal(&s, "POST", cc, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"top_logprobs\":2}", 400,
                   "top_logprobs", "'logprobs': true");
    expect_refusal(&s, "POST", cc, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"echo\":true}", 400, NULL,
                   "unknown field 'echo'");
    expect_refusal(&s, "POST", cc, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":300}", 400,
                   "max_tokens", "exceed the context");
    /* the template's own refusal (llama2's: roles must alternate) */
    expect_refusal(&s, "POST", cc, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]}",
                   400, "messages", "chat template");
    server_close(&s);
}
END_TEST

/* A stream's joined events equal the whole response: text, finish reason
 * and, with logprobs, the log-probabilities' entries. */
static void expect_stream_equal(Server *s, const char *path, const char *whole_body, int chat) {
    ServeResponse whole, streamed;
    serve_handle(&s->api, "POST", path, whole_body, strlen(whole_body), &whole);
    ck_assert_int_eq(whole.status, 200);
    char body[2048];
    snprintf(body, sizeof body, "%.*s,\"stream\":true}", (int)strlen(whole_body) - 1, whole_body);
    serve_handle(&s->api, "POST", path, body, strlen(body), &streamed);
    ck_assert_int_eq(streamed.status, 200);
    JsonDoc doc;
    PosencError err;
    ck_assert(json_parse(&doc, whole.body, whole.len, &err) == 0);
    const JsonValue *choice = &json_get(&doc.root, "choices")->items[0];
    const char *want = chat ? json_get_string(json_get(choice, "message"), "content") : json_get_string(choice, "text");
    char finish[16] = "";
    int n_events;
    char *got = stream_text(streamed.body, chat, finish, &n_events);
    ck_assert_str_eq(got, want);
    ck_assert_str_eq(finish, json_get_string(choice, "finish_reason"));
    ck_assert_int_eq(streamed.n_generated, whole.n_generated);
    ck_assert_msg(n_events > 2, "%d events for %s: not a stream", n_events, body);
    free(got);
    json_free(&doc);
    serve_response_free(&whole);
    serve_response_free(&streamed);
}

START_TEST(test_streams) {
    Server s;
    if (!server_open_with(&s, 1, 1)) return;
    const char *c = "/v1/completions";
    expect_stream_equal(&s, c, "{\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":0}", 0);
    expect_stream_equal(&s, c, "{\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":0,\"echo\":true,"
                               "\"logprobs\":2}", 0);
    expect_stream_equal(&s, c, "{\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"seed\":5}", 0);
    /* seed 0 is a seed: twice the same text (control: seed 1 differs) */
    char *z1 = completion(&s, "{\"prompt\":\"Once\",\"max_tokens\":20,\"seed\":0}", NULL, 0);
    char *z2 = completion(&s, "{\"prompt\":\"Once\",\"max_tokens\":20,\"seed\":0}", NULL, 0);
    char *o1 = completion(&s, "{\"prompt\":\"Once\",\"max_tokens\":20,\"seed\":1}", NULL, 0);
    ck_assert_str_eq(z1, z2);
    ck_assert_str_ne(z1, o1);
    free(z1), free(z2), free(o1);
    /* a stop string the text reaches token by token: held back, then cut */
    char *full = completion(&s, "{\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":0}", NULL, 0);
    char body[512];
    snprintf(body, sizeof body, "{\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":0,\"stop\":\"%.6s\",\"logprobs\":0}",
             full + 30);
    expect_stream_equal(&s, c, body, 0);
    const char *cc = "/v1/chat/completions";
    expect_stream_equal(&s, cc, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":20,\"temperature\":0,"
                                "\"logprobs\":true,\"top_logprobs\":3}", 1);
    /* the usage comes last when asked for */
    const char *usage = "{\"prompt\":\"Once\",\"max_tokens\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
    ServeResponse r;
    serve_handle(&s.api, "POST", c, usage, strlen(usage), &r);
    const char *u = strstr(r.body, "\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":3");
    ck_assert_msg(u && strstr(u, "data: [DONE]"), "%s", r.body);
    serve_response_free(&r);
    free(full);
    server_close(&s);
}
END_TEST

/* A stream's text and its log-probabilities' values, pulled event by event. */
typedef struct {
    ServeStream *g;
    char text[1 << 16];
} Pull;

static int pull_one(Pull *p) {
    const char *data;
    size_t n;
    if (!serve_stream_next(p->g, &data, &n)) return 0;
    size_t len = strlen(p->text);
    snprintf(p->text + len, sizeof p->text - len, "%.*s", (int)n, data);
    return 1;
}

START_TEST(test_slots) {
    Server s;
    if (!server_open_with(&s, 2, 0)) return;
    const char *c = "/v1/completions";
    const char *body[2] = {"{\"prompt\":\"Once upon a time\",\"max_tokens\":30,\"seed\":11,\"logprobs\":1,\"stream\":true}",
                           "{\"prompt\":\"The dog ran\",\"max_tokens\":30,\"seed\":12,\"logprobs\":1,\"stream\":true}"};
    /* each alone, one after the other */
    ServeResponse alone[2];
    for (int i = 0; i < 2; i++) serve_handle(&s.api, "POST", c, body[i], strlen(body[i]), &alone[i]);
    /* both at once on the two slots, their events interleaved */
    static Pull p[2];
    ServeResponse r[2];
    for (int i = 0; i < 2; i++) {
        serve_begin(&s.api, "POST", c, body[i], strlen(body[i]), &r[i], &p[i].g);
        ck_assert_ptr_nonnull(p[i].g);
    }
    ck_assert_int_ne(r[0].slot, r[1].slot);
    /* a third request finds both busy and no queue: 429 with OpenAI's error */
    JsonDoc doc;
    ck_assert_int_eq(request(&s, "POST", c, "{\"prompt\":\"a\",\"max_tokens\":1}", &doc), 429);
    ck_assert(json_is_string(json_get(json_get(&doc.root, "error"), "code"), "queue_full"));
    json_free(&doc);
    for (int more = 1; more;) {
        more = 0;
        for (int i = 0; i < 2; i++) more |= pull_one(&p[i]);
    }
    for (int i = 0; i < 2; i++) {
        /* the same text and log-probabilities (within 1e-5: the second
         * request reused the first's cache, computed in other chunks) */
        char f1[16], f2[16];
        int n1, n2;
        double lp[1024];
        char *a = stream_text(alone[i].body, 0, f1, &n1);
        int n_lp = n_stream_logprobs;
        memcpy(lp, stream_logprobs, sizeof lp);
        char *b = stream_text(p[i].text, 0, f2, &n2);
        ck_assert_str_eq(a, b);
        ck_assert_int_eq(n_lp, 30);
        ck_assert_int_eq(n_stream_logprobs, n_lp);
        for (int k = 0; k < n_lp; k++) ck_assert_msg(fabs(lp[k] - stream_logprobs[k]) < 1e-5, "%d: %g", k, lp[k]);
        free(a), free(b);
        serve_stream_free(p[i].g);
        serve_response_free(&alone[i]);
    }
    /* control: the two requests' texts differ, so a swap would show */
    ck_assert(strcmp(p[0].text + 200, p[1].text + 200) != 0);
    server_close(&s);
}
END_TEST

START_TEST(test_stream_dropped) {
    Server s;
    if (!server_open_with(&s, 1, 0)) return;
    const char *c = "/v1/completions";
    const char *body = "{\"prompt\":\"Once upon a time\",\"max_tokens\":40,\"temperature\":0,\"stream\":true}";
    ServeResponse r;
    ServeStream *g;
    serve_begin(&s.api, "POST", c, body, strlen(body), &r, &g);
    ck_assert_ptr_nonnull(g);
    const char *data;
    size_t n;
    for (int i = 0; i < 5; i++) ck_assert(serve_stream_next(g, &data, &n));
    /* the client goes away: the slot is free, its cache holds what was generated */
    serve_stream_free(g);
    ck_assert_int_gt(s.ctx[0].cache.n_used, 4);
    const char *whole = "{\"prompt\":\"Once upon a time\",\"max_tokens\":40,\"temperature\":0,\"logprobs\":1}";
    double reused[40], fresh[40];
    ServeResponse again;
    serve_handle(&s.api, "POST", c, whole, strlen(whole), &again);
    ck_assert_int_eq(again.status, 200);
    ck_assert_int_eq(again.n_reused, again.n_prompt - 1);
    serve_response_free(&again);
    char *a = completion(&s, whole, reused, 40);
    kv_cache_remove(&s.ctx[0].cache, 0, s.ctx[0].cache.n_used);
    char *b = completion(&s, whole, fresh, 40);
    ck_assert_str_eq(a, b);
    for (int i = 0; i < 40; i++) ck_assert_msg(fabs(reused[i] - fresh[i]) < 1e-5, "%d", i);
    free(a), free(b);
    server_close(&s);
}
END_TEST

typedef struct {
    Server *s;
    int status;
} Waiter;

static void *wait_for_slot(void *arg) {
    Waiter *w = arg;
    ServeResponse r;
    const char *body = "{\"prompt\":\"Once\",\"max_tokens\":2}";
    serve_handle(&w->s->api, "POST", "/v1/completions", body, strlen(body), &r);
    w->status = r.status;
    serve_response_free(&r);
    return NULL;
}

START_TEST(test_stop_empties_the_queue) {
    Server s;
    if (!server_open_with(&s, 1, 0)) return;
    s.api.cfg.max_queue = 1;
    const char *body = "{\"prompt\":\"Tom and\",\"max_tokens\":40,\"stream\":true}";
    ServeResponse r;
    ServeStream *g;
    serve_begin(&s.api, "POST", "/v1/completions", body, strlen(body), &r, &g);
    ck_assert_ptr_nonnull(g);
    Waiter w = {&s, 0};
    pthread_t t;
    pthread_create(&t, NULL, wait_for_slot, &w);
    /* the waiter is in the queue once it has taken its ticket */
    for (int i = 0; i < 2000; i++) {
        pthread_mutex_lock(&s.api.lock);
        int queued = s.api.next_ticket[0] == 2;
        pthread_mutex_unlock(&s.api.lock);
        if (queued) break;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    serve_api_stop(&s.api);
    pthread_join(t, NULL);
    /* it gave up while the stream still held the slot */
    ck_assert_int_eq(w.status, 503);
    const char *data;
    size_t n;
    ck_assert(serve_stream_next(g, &data, &n));
    serve_stream_free(g);
    server_close(&s);
}
END_TEST

int main(void) {
    Suite *s = suite_create("serve_api");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_tokenize_round_trip);
    tcase_add_test(tc, test_cache_reuse_is_exact);
    tcase_add_test(tc, test_echo_logprobs);
    tcase_add_test(tc, test_chat_as_chat_mode);
    tcase_add_test(tc, test_streams);
    tcase_add_test(tc, test_slots);
    tcase_add_test(tc, test_stream_dropped);
    tcase_add_test(tc, test_stop_empties_the_queue);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
