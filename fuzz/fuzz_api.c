/* The server's API (modes/serve_api.c) on requests: the input's first line
 * is "METHOD PATH", the rest the body, answered by one slot of stories260K
 * (64 cells) that keeps its cache from one input to the next, as a server
 * keeps it between requests.  Whatever the request, the response is JSON
 * with a 2xx or 4xx status (the model's logits are finite: no 500), an
 * error status carries OpenAI's error object with a one-line message, and
 * the slot's cache never holds more cells than it has. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_parse.h"
#include "fuzz/fuzz.h"
#include "modes/serve_api.h"

static Model model;
static Tokenizer tok;
static Context ctx;
static ServeApi api;

int fuzz_api_init(const char *models_dir, PosencError *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/stories260K/stories260K.bin", models_dir);
    if (model_load(&model, path, err)) return -1;
    snprintf(path, sizeof path, "%s/stories260K/tok512.bin", models_dir);
    if (tokenizer_load(&tok, path, model.config.vocab_size, err)) return -1;
    ContextSize size = serve_context_size(64, TENSOR_F32);
    if (context_build_sized(&ctx, &model, &model.pe, &size, err)) return -1;
    serve_api_init(&api, &ctx, &tok, "stories260K", 1);
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
