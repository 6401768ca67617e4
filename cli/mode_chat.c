/* -m chat. */
#include <ctype.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/gguf.h"
#include "base/json_parse.h"
#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "cli/common.h"
#include "cli/modes.h"
#include "modes/cache_dump.h"
#include "modes/chat.h"

/* Whether s[0, n) is UTF-8 text without NUL bytes. */
static int is_utf8_text(const char *s, size_t n) {
    uint32_t cp;
    for (size_t i = 0, len; i < n; i += len)
        if (!(len = (size_t)utf8_decode((const unsigned char *)s + i, n - i, &cp)) || cp == 0)
            return 0;
    return 1;
}

/* A Hugging Face tokenizer_config.json's chat_template: a string, or a list
 * of {name, template} of which "default" is the one used (malloc'd). */
static char *template_from_config(const char *path, const char *json, size_t len) {
    JsonDoc doc;
    PosencError err;
    if (json_parse(&doc, json, len, &err)) cli_die("--chat-template: %s: %s", path, err.msg);
    const JsonValue *t = json_get(&doc.root, "chat_template");
    const char *text = t && t->type == JSON_STRING ? t->string : NULL;
    for (uint32_t i = 0; t && t->type == JSON_ARRAY && i < t->len; i++)
        if (json_is_string(json_get(&t->items[i], "name"), "default"))
            text = json_get_string(&t->items[i], "template");
    if (!text)
        cli_die("--chat-template: %s is JSON without a chat_template (a string, or a list holding "
                "one named \"default\")", path);
    char *copy = strdup(text);
    json_free(&doc);
    if (!copy) posenc_out_of_memory(strlen(text) + 1, 1, "the chat template");
    return copy;
}

/* --chat-template FILE: a Jinja template, or a tokenizer_config.json
 * holding one; anything but UTF-8 text is refused (malloc'd, *len set). */
static char *read_template_file(const char *path, size_t *len) {
    char *text = read_text_file("--chat-template", path, len);
    if (!is_utf8_text(text, *len))
        cli_die("--chat-template: %s is not UTF-8 text: give a Jinja template, a "
                "tokenizer_config.json or a built-in format (%s)", path, cli_template_names());
    /* a JSON object opens with '{' and a key or '}'; Jinja's '{' with '{', '%' or '#' */
    size_t i = 0;
    while (i < *len && isspace((unsigned char)text[i])) i++;
    size_t j = i + 1;
    while (j < *len && isspace((unsigned char)text[j])) j++;
    if (i < *len && text[i] == '{' && j < *len && (text[j] == '"' || text[j] == '}')) {
        char *inner = template_from_config(path, text, *len);
        free(text);
        *len = strlen(inner);
        return inner;
    }
    return text;
}

/* --chat-template NAME|FILE, else the GGUF's tokenizer.chat_template:
 * parsed, or one line naming where the template came from. */
static JinjaTemplate *load_chat_template(const Options *o, const Model *model) {
    PosencError err;
    const char *text = NULL, *source = NULL;
    char *file_text = NULL;
    size_t len = 0;
    if (o->chat_template) {
        text = chat_template_builtin(o->chat_template);
        source = "--chat-template";
        if (!text) {
            if (access(o->chat_template, R_OK) != 0)
                cli_die("--chat-template: '%s' is neither a built-in format (%s) nor a readable file",
                        o->chat_template, cli_template_names());
            file_text = read_template_file(o->chat_template, &len);
            text = file_text;
        } else {
            len = strlen(text);
        }
    } else if (model->gguf && gguf_find_kv(model->gguf, "tokenizer.chat_template")) {
        if (gguf_get_str(model->gguf, "tokenizer.chat_template", &text, &err)) cli_die("%s: %s", o->model_path, err.msg);
        len = strlen(text);
        source = "tokenizer.chat_template";
    } else {
        cli_die("%s has no chat template: name one with --chat-template (%s, or a Jinja file)", o->model_path,
                cli_template_names());
    }
    JinjaTemplate *t = jinja_parse(text, len, &err);
    free(file_text);
    if (!t) {
        if (o->chat_template) cli_die("--chat-template %s: %s", o->chat_template, err.msg);
        cli_die("%s: %s: %s (override it with --chat-template)", o->model_path, source, err.msg);
    }
    return t;
}


int run_chat(const Options *o) {
    Setup s;
    setup_open(&s, o, SETUP_TOKENIZER | SETUP_VARIANTS);
    if (cli_given(o, "--keep")) check_keep(o, s.n_ctx);
    check_positions(&s.model, &s.v.params[0], s.v.labels[0], s.n_ctx - 1);
    JinjaTemplate *template = load_chat_template(o, &s.model);
    Context ctx;
    build_context(&ctx, o, &s.model, &s.v.params[0], s.v.labels[0],
                  context_size_generate(s.n_ctx, kv_type(o)));
    Sampler sampler;
    build_sampler(o, s.model.config.vocab_size, &sampler);
    char template_name[1100];
    if (o->chat_template) snprintf(template_name, sizeof template_name, "--chat-template %s", o->chat_template);
    else snprintf(template_name, sizeof template_name, "%s's tokenizer.chat_template", o->model_path);
    ChatOptions copt = {.template = template, .template_name = template_name,
                        .system_prompt = o->system_prompt, .stops = o->stops,
                        .n_stops = o->n_stops, .max_reply = o->steps,
                        .keep = cli_given(o, "--keep") ? o->keep : -1, .shift = shift_mode(o),
                        .trace = o->trace_positions ? stderr : NULL, .dump_cache = o->dump_cache ? stderr : NULL,
                        .interrupted = &cli_interrupted};
    ChatSession session;
    PosencError err;
    if (chat_session_init(&session, &ctx, &s.tok, &sampler, &copt, &err)) cli_die("%s", err.msg);
    /* Ctrl-C ends the reply; at the prompt it ends the chat */
    catch_interrupts();
    int rc = o->prompt ? chat_turn(&session, o->prompt, stdout, &err) : 0;
    if (rc > 0) fprintf(stderr, "warning: turn skipped (-i): %s\n", err.msg);
    if (rc >= 0) rc = chat_loop(&session, stdin, stdout, isatty(STDIN_FILENO), &err);
    if (rc) fprintf(stderr, "error: %s\n", err.msg);
    if (!rc && o->dump_cache) cache_dump(stderr, &ctx, &s.tok, "at the end");
    chat_session_free(&session);
    sampler_free(&sampler);
    context_free(&ctx);
    jinja_free(template);
    setup_close(&s);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
