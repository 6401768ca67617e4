/* The server's API without sockets (modes/serve_api.c) on stories260K:
 * routing (404, 405, 413), every kind of malformed request a 4xx with
 * OpenAI's error object naming the field, tokenize/detokenize, and
 * completions: a request whose prompt the slot's cache already holds gives
 * the same text and log-probabilities as from an empty cache (control: a
 * different prompt differs), echo's log-probabilities equal one prefill's
 * log-softmax (control: another token's is far), stop strings cut the text.
 * The HTTP server around it: tests/cli/test_serve.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_parse.h"
#include "modes/perplexity.h"
#include "modes/serve_api.h"
#include "tests/common.h"

typedef struct {
    Model model;
    Tokenizer tok;
    Context ctx;
    ServeApi api;
} Server;

static int server_open(Server *s) {
    const char *models = tests_models_dir("the server's API on stories260K");
    if (!models) return 0;
    tests_load_model(&s->model, tests_model_path(models, "stories260K/stories260K.bin"));
    tests_load_tokenizer(&s->tok, tests_model_path(models, "stories260K/tok512.bin"), 512);
    ContextSize size = serve_context_size(256, TENSOR_F32);
    PosencError err;
    ck_assert_msg(context_build_sized(&s->ctx, &s->model, &s->model.pe, &size, &err) == 0, "%s", err.msg);
    serve_api_init(&s->api, &s->ctx, &s->tok, "stories260K", 42);
    return 1;
}

static void server_close(Server *s) {
    serve_api_free(&s->api);
    context_free(&s->ctx);
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
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"stream\":true}", 400, "stream", "not supported");
    expect_refusal(&s, "POST", c, "{\"prompt\":[1,512]}", 400, "prompt", "token id");
    expect_refusal(&s, "POST", c, "{\"prompt\":[]}", 400, "prompt", "at least one");
    expect_refusal(&s, "POST", c, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt", "one prompt");
    expect_refusal(&s, "POST", c, "{\"prompt\":\"a\",\"max_tokens\":300}", 400, "max_tokens", "exceed the context");
    expect_refusal(&s, "POST", "/tokenize", "{\"content\":3}", 400, "content", "string");
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

int main(void) {
    Suite *s = suite_create("serve_api");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_tokenize_round_trip);
    tcase_add_test(tc, test_cache_reuse_is_exact);
    tcase_add_test(tc, test_echo_logprobs);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
