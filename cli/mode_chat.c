/* -m chat. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/gguf.h"
#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "cli/common.h"
#include "cli/modes.h"
#include "modes/cache_dump.h"
#include "modes/chat.h"

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
            FILE *f = open_text_file(o->chat_template);
            file_text = posenc_read_stream(f, &len, o->chat_template, &err);
            fclose(f);
            if (!file_text) cli_die("--chat-template: %s", err.msg);
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

static volatile sig_atomic_t chat_interrupted;
static void on_sigint(int sig) {
    (void)sig;
    chat_interrupted = 1;
}

/* Ctrl-C ends the reply; at the prompt it ends the chat (getline sees
 * EINTR: the handler is installed without SA_RESTART). */
static void catch_interrupts(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
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
    ChatOptions copt = {.template = template, .system_prompt = o->system_prompt, .stops = o->stops,
                        .n_stops = o->n_stops, .max_reply = o->steps,
                        .keep = cli_given(o, "--keep") ? o->keep : -1, .shift = shift_mode(o),
                        .trace = o->trace_positions ? stderr : NULL, .dump_cache = o->dump_cache ? stderr : NULL,
                        .interrupted = &chat_interrupted};
    ChatSession session;
    PosencError err;
    if (chat_session_init(&session, &ctx, &s.tok, &sampler, &copt, &err)) cli_die("%s", err.msg);
    catch_interrupts();
    int rc = o->prompt ? chat_turn(&session, o->prompt, stdout, &err) : 0;
    if (!rc) rc = chat_loop(&session, stdin, stdout, isatty(STDIN_FILENO), &err);
    if (rc) fprintf(stderr, "error: %s\n", err.msg);
    if (!rc && o->dump_cache) cache_dump(stderr, &ctx, &s.tok, "at the end");
    chat_session_free(&session);
    sampler_free(&sampler);
    context_free(&ctx);
    jinja_free(template);
    setup_close(&s);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
