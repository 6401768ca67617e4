/* GGUF vocabulary (tokenizer.ggml.*, posenc.tokenizer.*; a --vocab-only
 * file or a model's), read as -z reads it, then a fixed text and the
 * input's own bytes encoded and decoded, and -m inspect's view of a
 * vocab-only file (text and JSON, the file's strings escaped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "modes/inspect.h"

static void inspect(const char *path, int json) {
    GgufFile g;
    PosencError err;
    FUZZ_ASSERT(gguf_open(&g, path, &err) == 0); /* the tokenizer just read it */
    char *text = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&text, &n);
    gguf_inspect_vocab(&g, out, json);
    fclose(out);
    fuzz_check_printable(text, n);
    free(text);
    gguf_close(&g);
}

int fuzz_gguf_vocab(const uint8_t *data, size_t size) {
    Tokenizer t;
    PosencError err = {{0}};
    const char *path = fuzz_file("vocab.gguf", data, size);
    if (tokenizer_load(&t, path, 0, &err)) {
        fuzz_check_error(&err);
        return 0;
    }
    fuzz_tokenizer_texts(&t, data, size);
    if (size >= 4 && memcmp(data, "GGUF", 4) == 0) { /* else read as another format */
        inspect(path, 0);
        inspect(path, 1);
    }
    tokenizer_free(&t);
    return 0;
}

FUZZ_ENTRY_POINT(fuzz_gguf_vocab)
