/* GPT-2 vocab.json and merges.txt, the two files of one input split at
 * FUZZ_SPLIT, read as -z DIR reads them; then text encoded and decoded. */
#include "fuzz/fuzz.h"

int fuzz_gpt2(const uint8_t *data, size_t size) {
    const uint8_t *vocab, *merges;
    size_t nvocab, nmerges;
    fuzz_split(data, size, &vocab, &nvocab, &merges, &nmerges);
    fuzz_file("vocab.json", vocab, nvocab);
    fuzz_file("merges.txt", merges, nmerges);
    Tokenizer t;
    PosencError err = {{0}};
    if (tokenizer_load(&t, fuzz_dir(), 0, &err)) {
        fuzz_check_error(&err);
        return 0;
    }
    FUZZ_ASSERT(t.kind == TOKENIZER_GPT2);
    fuzz_tokenizer_texts(&t, merges, nmerges);
    tokenizer_free(&t);
    return 0;
}

FUZZ_ENTRY_POINT(fuzz_gpt2)
