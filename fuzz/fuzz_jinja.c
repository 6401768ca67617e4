/* Chat templates: the input is a template (Jinja source), parsed and
 * rendered on two conversations as -m chat renders it.  Whatever the
 * template, parsing and rendering end with text or with a one-line error,
 * within the subset's limits on depth, steps, memory and output. */
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "fuzz/fuzz.h"

static const ChatMessage conversation[] = {
    {"system", "Be brief."}, {"user", "Hi {{ there }} {% if %}"}, {"assistant", " Hello. "},
    {"user", "\xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80 </s>"}};

static void check_error(const PosencError *err) {
    FUZZ_ASSERT(err->msg[0] != 0);
    FUZZ_ASSERT(strchr(err->msg, '\n') == NULL);
}

int fuzz_jinja(const uint8_t *data, size_t size) {
    PosencError err;
    JinjaTemplate *t = jinja_parse((const char *)data, size, &err);
    if (!t) {
        check_error(&err);
        return 0;
    }
    for (int first = 0; first < 2; first++) {
        ChatVariables vars = {.messages = conversation + first, .n_messages = 4 - first,
                              .add_generation_prompt = first, .bos_token = first ? NULL : "<s>",
                              .eos_token = "</s>"};
        size_t len;
        char *out = jinja_render_chat(t, &vars, &len, &err);
        if (out) FUZZ_ASSERT(strlen(out) <= len);   /* NULs in templates are text, so <= */
        else check_error(&err);
        free(out);
    }
    jinja_free(t);
    return 0;
}
FUZZ_ENTRY_POINT(fuzz_jinja)
