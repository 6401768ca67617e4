/* -m chat. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/common.h"
#include "cli/modes.h"
#include "modes/cache_dump.h"
#include "modes/chat.h"

int run_chat(const Options *o) {
    Setup s;
    setup_open(&s, o, SETUP_TOKENIZER | SETUP_VARIANTS);
    if (cli_given(o, "--keep")) check_keep(o, s.n_ctx);
    check_positions(&s.model, &s.v.params[0], s.v.labels[0], s.n_ctx - 1);
    JinjaTemplate *template = load_chat_template(o, &s.model);
    JsonDoc kwargs_doc;
    const JsonValue *kwargs = load_template_kwargs(o, &kwargs_doc);
    Context ctx;
    build_context(&ctx, o, &s.model, &s.v.params[0], s.v.labels[0],
                  context_size_generate(s.n_ctx, kv_type(o)));
    Sampler sampler;
    build_sampler(o, s.model.config.vocab_size, &sampler);
    char template_name[1100];
    if (o->chat_template) snprintf(template_name, sizeof template_name, "--chat-template %s", o->chat_template);
    else snprintf(template_name, sizeof template_name, "%s's tokenizer.chat_template", o->model_path);
    ChatOptions copt = {.template = template, .template_name = template_name, .template_kwargs = kwargs,
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
    if (kwargs) json_free(&kwargs_doc);
    setup_close(&s);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
