/* llama2.c: a .bin checkpoint and a tokenizer.bin, the two files of one
 * input split at FUZZ_SPLIT.  The checkpoint is loaded as run loads it (by
 * magic) and runs one token; the tokenizer is loaded against the
 * checkpoint's vocabulary when there is one, else alone, and encodes text. */
#include "fuzz/fuzz.h"
#include "fuzz/model_run.h"

int fuzz_llama2c(const uint8_t *data, size_t size) {
    const uint8_t *bin, *tok;
    size_t nbin, ntok;
    fuzz_split(data, size, &bin, &nbin, &tok, &ntok);
    Model m;
    PosencError err = {{0}};
    int vocab = 0;
    if (model_load(&m, fuzz_file("model.bin", bin, nbin), &err) == 0) {
        vocab = m.config.vocab_size;
        fuzz_forward_one(&m, (unsigned)size);
        model_free(&m);
    } else {
        fuzz_check_error(&err);
    }
    Tokenizer t;
    if (tokenizer_load(&t, fuzz_file("tokenizer.bin", tok, ntok), vocab, &err) == 0) {
        FUZZ_ASSERT(t.kind == TOKENIZER_LLAMA2C);
        fuzz_tokenizer_texts(&t, tok, ntok);
        tokenizer_free(&t);
    } else {
        fuzz_check_error(&err);
    }
    return 0;
}

FUZZ_ENTRY_POINT(fuzz_llama2c)
