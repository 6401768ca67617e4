/* The server's API (modes/serve_api.c) on requests: the input's first line
 * is "METHOD PATH", the rest the body, answered by one slot of stories260K
 * (64 cells) that keeps its cache from one input to the next, as a server
 * keeps it between requests, with the llama2 chat template for
 * /v1/chat/completions.  Whatever the request, the response is JSON with
 * a 2xx or 4xx status (the model's logits are finite: no 500), or for
 * "stream": true server-sent events, each JSON, ending with [DONE]; an
 * error status carries OpenAI's error object with a one-line message, and
 * the slot's cache never holds more cells than it has. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_parse.h"
#include "chat/chat_template.h"
#include "fuzz/fuzz.h"
#include "modes/serve_api.h"

static Model model;
static Tokenizer tok;
static Context ctx;
static JinjaTemplate *template;
static ChatFormat chat;
static ServeApi api;

int fuzz_api_init(const char *models_dir, PosencError *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/stories260K/stories260K.bin", models_dir);
    if (model_load(&model, path, err)) return -1;
    snprintf(path, sizeof path, "%s/stories260K/tok512.bin", models_dir);
    if (tokenizer_load(&tok, path, model.config.vocab_size, err)) return -1;
    ContextSize size = serve_context_size(64, TENSOR_F32);
    if (context_build_sized(&ctx, &model, &model.pe, &size, err)) return -1;
    const char *llama2 = chat_template_builtin("llama2");
    if (!(template = jinja_parse(llama2, strlen(llama2), err))) return -1;
    chat_format_init(&chat, template, NULL, &tok);
    ServeConfig cfg = {.tok = &tok, .chat = &chat, .model_id = "stories260K", .seed = 1,
                       .defaults = {.temperature = 1.0f, .top_p = 1.0f,
                                    .penalties = {.repeat = 1.0f, .last_n = 64}}};
    serve_api_init(&api, &ctx, 1, &cfg);
    return 0;
}

#ifdef POSENC_LIBFUZZER
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = getenv("POSENC_MODELS");
    PosencError err;
    if (fuzz_api_init(dir && *dir ? dir : "../shared/models", &err)) {
        fprintf(stderr, "fuzz_api needs the shared models (POSENC_MODELS): %s\n", err.msg);
        exit(1);
    }
    return 0;
}
#endif

int fuzz_api(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    const char *eol = memchr(text, '\n', size);
    size_t line = eol ? (size_t)(eol - text) : size;
    char request_line[256];
    snprintf(request_line, sizeof request_line, "%.*s", (int)(line < 255 ? line : 255), text);
    char *path = strchr(request_line, ' ');
    if (path) *path++ = 0;
    const char *body = eol ? eol + 1 : NULL;
    size_t len = eol ? size - line - 1 : 0;

    ServeResponse r;
    serve_handle(&api, request_line, path ? path : "", body, len, &r);
    FUZZ_ASSERT((r.status >= 200 && r.status < 300) || (r.status >= 400 && r.status < 500));
    JsonDoc doc;
    PosencError err;
    if (r.status == 200 && r.len >= 6 && memcmp(r.body, "data: ", 6) == 0) { /* a stream's events */
        const char *at = r.body, *end = r.body + r.len;
        int done = 0;
        while (at < end) {
            FUZZ_ASSERT(!done && end - at > 6 && memcmp(at, "data: ", 6) == 0);
            const char *next = memmem(at, (size_t)(end - at), "\n\n", 2);
            FUZZ_ASSERT(next != NULL);
            if (next - at == 12 && memcmp(at + 6, "[DONE]", 6) == 0) done = 1;
            else {
                FUZZ_ASSERT(json_parse(&doc, at + 6, (size_t)(next - at - 6), &err) == 0);
                json_free(&doc);
            }
            at = next + 2;
        }
        FUZZ_ASSERT(done);
        serve_response_free(&r);
        FUZZ_ASSERT(ctx.cache.n_used >= 0 && ctx.cache.n_used <= ctx.cache.n_ctx);
        return 0;
    }
    FUZZ_ASSERT(json_parse(&doc, r.body, r.len, &err) == 0);
    if (r.status >= 400) {
        const char *msg = json_get_string(json_get(&doc.root, "error"), "message");
        FUZZ_ASSERT(msg && *msg && !strchr(msg, '\n'));
    }
    json_free(&doc);
    serve_response_free(&r);
    FUZZ_ASSERT(ctx.cache.n_used >= 0 && ctx.cache.n_used <= ctx.cache.n_ctx);
    return 0;
}

FUZZ_ENTRY_POINT(fuzz_api)
