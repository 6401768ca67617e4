/* -m tokenize. */
#include <stdlib.h>
#include <string.h>

#include "base/gguf.h"
#include "cli/common.h"
#include "cli/modes.h"

/* Tokenizing needs no weights: -z, else the model file's own vocabulary
 * (a GGUF, read without its weights, or tokenizer.bin beside a .bin). */
int run_tokenize(const Options *o) {
    Tokenizer tok;
    PosencError err;
    char buf[1024];
    if (o->tokenizer_path || !o->model_path) {
        load_tokenizer(o, NULL, &tok);
    } else {
        int is_gguf = gguf_file_has_magic(o->model_path, &err);
        if (is_gguf < 0) cli_die("%s", err.msg);
        const char *path = is_gguf ? o->model_path : default_tokenizer(o->model_path, buf, sizeof buf);
        if (tokenizer_load(&tok, path, 0, &err)) cli_die("%s", err.msg);
        apply_special(o, &tok);
    }
    int rc;
    if (o->text_file) {
        FILE *in = open_text_file(o->text_file);
        rc = tokenize_stream(&tok, in, stdout, o->pieces, &err);
        fclose(in);
    } else {
        const char *text = o->prompt ? o->prompt : "";
        rc = tokenize_text(&tok, text, strlen(text), stdout, o->pieces, &err);
    }
    if (rc && ferror(stdout)) cli_die("%s", err.msg); /* writing the ids failed, not the text */
                                      if (rc && o->text_file) cli_die("-f %s: %s", o->text_file, err.msg);
    if (rc) cli_die("-i: %s", err.msg);
    tokenizer_free(&tok);
    return EXIT_SUCCESS;
}
