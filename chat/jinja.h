/* A Jinja subset for chat templates: the language Hugging Face chat
 * templates are written in, as far as the templates of Llama 2/3.x, Qwen2.5/3,
 * Gemma 2/3, Phi-3.5, Mistral, DeepSeek-R1/V3, ChatML and Zephyr use it.
 *
 * The environment is the one Hugging Face renders chat templates with:
 * trim_blocks and lstrip_blocks on, one trailing newline of the template
 * dropped.  Where Jinja and @huggingface/jinja (the reference the tests
 * compare against) differ, docs/chat.md "Chat templates" says which is followed.
 *
 * Templates are untrusted input: parsing and rendering never crash, and a
 * template that is too deep, too long-running or too large in output is
 * refused.  A construct outside the subset is an error naming it and its
 * line, never a silently different prompt. */
#ifndef POSENC_JINJA_H
#define POSENC_JINJA_H
#include <stddef.h>

#include "base/util.h"

typedef struct JinjaTemplate JinjaTemplate;

/* Parses source[0..len).  NULL with "line N: ..." in err when the template
 * is not valid Jinja or uses a statement outside the subset. */
JinjaTemplate *jinja_parse(const char *source, size_t len, PosencError *err);
void jinja_free(JinjaTemplate *t);

/* The variables a chat template sees.  messages are {role, content} dicts;
 * bos_token and eos_token may be NULL (then undefined, as for a tokenizer
 * without them).  date_string, when not NULL, is defined too (Llama 3.x
 * templates print it; without it they call strftime_now). */
typedef struct {
    const char *role;
    const char *content;
} ChatMessage;

struct JsonValue;

typedef struct {
    const ChatMessage *messages;
    int n_messages;
    int add_generation_prompt;
    const char *bos_token;
    const char *eos_token;
    const char *date_string;
    const struct JsonValue *kwargs; /* a JSON object whose members are more variables
                                       (enable_thinking, tools: llama.cpp's
                                       --chat-template-kwargs), or NULL */
} ChatVariables;

/* Renders t: the text, NUL-terminated and malloc'd (*len excludes the NUL),
 * or NULL with "line N: ..." in err (raise_exception's message, an unknown
 * filter or method, a type error, a resource limit). */
char *jinja_render_chat(const JinjaTemplate *t, const ChatVariables *vars, size_t *len,
                        PosencError *err);
#endif
