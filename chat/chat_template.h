/* Chat templates by name: the prompt formats posenc knows without a
 * template in the model file, written in the Jinja subset of chat/jinja.h.
 * A GGUF's tokenizer.chat_template or a template file is preferred; these
 * serve models that carry none (llama2.c checkpoints, older GGUFs). */
#ifndef POSENC_CHAT_TEMPLATE_H
#define POSENC_CHAT_TEMPLATE_H

/* The template text of a built-in format, or NULL when name is none. */
const char *chat_template_builtin(const char *name);

/* The i-th built-in name (for help and error messages), NULL past the last. */
const char *chat_template_builtin_name(int i);
#endif
