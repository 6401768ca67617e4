/* -m tokenize. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/gguf.h"
#include "cli/common.h"
#include "cli/modes.h"

/* Tokenizing needs no weights: -z, else the model file's own vocabulary
 * (a GGUF, read without its weights, or tokenizer.bin beside a .bin). */
int run_tokenize(const Options *o) {
    Tokenizer tok;
    PosencError err;
    char buf[1024];
    if (!o->prompt && !o->text_file && isatty(STDIN_FILENO))
        cli_die("-m tokenize needs a text: -i TEXT, -f FILE, or lines on stdin");
    if (o->json && o->pieces) cli_die("--pieces and --json: --json prints the ids and the pieces");
    if (o->tokenizer_path || !o->model_path) {
        load_tokenizer(o, NULL, &tok);
    } else {
        int is_gguf = gguf_file_has_magic(o->model_path, &err);
        if (is_gguf < 0) cli_die("%s", err.msg);
        const char *path = is_gguf ? o->model_path : default_tokenizer(o->model_path, buf, sizeof buf);
        if (tokenizer_load(&tok, path, 0, &err)) cli_die("%s", err.msg);
        apply_special(o, &tok);
    }
    TokenizeFormat format = o->json ? TOKENIZE_JSON : o->pieces ? TOKENIZE_PIECES : TOKENIZE_IDS;
    int rc;
    if (o->prompt) {
        rc = tokenize_text(&tok, o->prompt, strlen(o->prompt), stdout, format, &err);
    } else {
        FILE *in = o->text_file ? open_text_file("-f", o->text_file) : stdin;
        rc = tokenize_stream(&tok, in, stdout, format, &err);
        if (in != stdin) fclose(in);
    }
    if (rc && ferror(stdout)) cli_die("%s", err.msg); /* writing the ids failed, not the text */
    if (rc && o->prompt) cli_die("-i: %s", err.msg);
    if (rc) cli_die("%s %s: %s", o->text_file ? "-f" : "stdin", o->text_file ? o->text_file : "",
                    err.msg);
    tokenizer_free(&tok);
    return EXIT_SUCCESS;
}
