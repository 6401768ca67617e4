/* SentencePiece .model (the ModelProto protobuf: pieces, trainer and
 * normalizer specs, the precompiled charsmap), then text encoded and
 * decoded: a fixed line and the input's own first bytes. */
#include "fuzz/fuzz.h"

int fuzz_spm(const uint8_t *data, size_t size) {
    Tokenizer t;
    PosencError err = {{0}};
    if (tokenizer_load(&t, fuzz_file("tok.model", data, size), 0, &err)) {
        fuzz_check_error(&err);
        return 0;
    }
    FUZZ_ASSERT(t.kind == TOKENIZER_SPM_BPE || t.kind == TOKENIZER_SPM_UNIGRAM);
    fuzz_tokenizer_texts(&t, data, size);
    tokenizer_free(&t);
    return 0;
}

FUZZ_ENTRY_POINT(fuzz_spm)
