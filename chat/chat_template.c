/* The built-in chat formats.  Each renders the conversation the way its
 * model family's own template does for plain system/user/assistant turns
 * (tests/chat/test_jinja.c checks every one against @huggingface/jinja). */
#include "chat/chat_template.h"

#include <string.h>

typedef struct {
    const char *name;
    const char *text;
} BuiltinTemplate;

static const BuiltinTemplate builtins[] = {
    /* <|im_start|>role\ncontent<|im_end|>\n: Qwen, SmolLM, Hermes, many fine-tunes */
    {"chatml",
     "{% for message in messages %}"
     "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    /* Llama 2 chat: [INST] turns, the system prompt in <<SYS>> inside the first */
    {"llama2",
     "{% if messages[0]['role'] == 'system' %}"
     "{% set system = messages[0]['content'] %}{% set turns = messages[1:] %}"
     "{% else %}{% set system = none %}{% set turns = messages %}{% endif %}"
     "{% for message in turns %}"
     "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
     "{{ raise_exception('llama2: turns must alternate user/assistant after the system prompt') }}"
     "{% endif %}"
     "{% set content = message['content'] %}"
     "{% if loop.first and system is not none %}"
     "{% set content = '<<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' + content %}{% endif %}"
     "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
     "{% else %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"
     "{% endfor %}"},
    /* Llama 3.x: header ids, contents trimmed, <|eot_id|> after each */
    {"llama3",
     "{{ bos_token }}"
     "{% for message in messages %}"
     "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
    /* Zephyr and TinyLlama-Chat: <|role|>\ncontent</s>\n */
    {"zephyr",
     "{% for message in messages %}"
     "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"},
    /* Gemma: user/model turns; a system prompt opens the first user turn (as Gemma 3 does) */
    {"gemma",
     "{{ bos_token }}"
     "{% if messages[0]['role'] == 'system' %}"
     "{% set prefix = messages[0]['content'] + '\\n\\n' %}{% set turns = messages[1:] %}"
     "{% else %}{% set prefix = '' %}{% set turns = messages %}{% endif %}"
     "{% for message in turns %}"
     "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
     "{{ '<start_of_turn>' + role + '\\n' + (prefix if loop.first else '') + message['content'] | trim + '<end_of_turn>\\n' }}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"},
    /* Phi-3 and Phi-3.5: <|role|>\ncontent<|end|>\n */
    {"phi3",
     "{% for message in messages %}"
     "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"},
    /* Mistral 7B Instruct: [INST] turns, a system prompt before the first user text */
    {"mistral",
     "{{ bos_token }}"
     "{% if messages[0]['role'] == 'system' %}"
     "{% set prefix = messages[0]['content'] + '\\n\\n' %}{% set turns = messages[1:] %}"
     "{% else %}{% set prefix = '' %}{% set turns = messages %}{% endif %}"
     "{% for message in turns %}"
     "{% if message['role'] == 'user' %}{{ '[INST] ' + (prefix if loop.first else '') + message['content'] + ' [/INST]' }}"
     "{% else %}{{ message['content'] + eos_token }}{% endif %}"
     "{% endfor %}"},
};

enum { N_BUILTINS = sizeof builtins / sizeof *builtins };

const char *chat_template_builtin_name(int i) { return i >= 0 && i < N_BUILTINS ? builtins[i].name : NULL; }

const char *chat_template_builtin(const char *name) {
    for (int i = 0; i < N_BUILTINS; i++)
        if (!strcmp(builtins[i].name, name)) return builtins[i].text;
    return NULL;
}
