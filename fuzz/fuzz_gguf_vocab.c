/* GGUF vocabulary (tokenizer.ggml.*, posenc.tokenizer.*; a --vocab-only
 * file or a model's), read as -z reads it, then a fixed text and the
 * input's own bytes encoded and decoded. */
#include "fuzz/fuzz.h"

int fuzz_gguf_vocab(const uint8_t *data, size_t size) {
    Tokenizer t;
    PosencError err = {{0}};
    if (tokenizer_load(&t, fuzz_file("vocab.gguf", data, size), 0, &err)) {
        fuzz_check_error(&err);
        return 0;
    }
    fuzz_tokenizer_texts(&t, data, size);
    tokenizer_free(&t);
    return 0;
}

FUZZ_ENTRY_POINT(fuzz_gguf_vocab)
