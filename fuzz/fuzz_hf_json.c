/* A Hugging Face tokenizer.json and its tokenizer_config.json (the two files
 * of one input split at FUZZ_SPLIT; "{}" when there is no second part), read
 * as -z tokenizer.json reads them: the JSON reader, the model, normalizer
 * (the Unigram charsmap's base64 too), pre-tokenizer and added-token checks; then text encoded and decoded with special tokens off
 * and on. */
#include "fuzz/fuzz.h"

int fuzz_hf_json(const uint8_t *data, size_t size) {
    const uint8_t *json, *config;
    size_t njson, nconfig;
    fuzz_split(data, size, &json, &njson, &config, &nconfig);
    const char *path = fuzz_file("tokenizer.json", json, njson);
    if (nconfig) fuzz_file("tokenizer_config.json", config, nconfig);
    else fuzz_file("tokenizer_config.json", (const uint8_t *)"{}", 2);
    Tokenizer t;
    PosencError err = {{0}};
    if (tokenizer_load(&t, path, 0, &err)) {
        fuzz_check_error(&err);
        return 0;
    }
    /* byte-level BPE, the character-level BPE with byte fallback of Gemma 3, or Unigram */
    FUZZ_ASSERT(t.kind == TOKENIZER_GPT2 || t.kind == TOKENIZER_HF_BPE ||
                t.kind == TOKENIZER_HF_UNIGRAM);
    fuzz_tokenizer_texts(&t, json, njson);
    FUZZ_ASSERT(tokenizer_set_parse_special(&t, 1) == 0);
    fuzz_tokenizer_texts(&t, json, njson);
    tokenizer_free(&t);
    return 0;
}

FUZZ_ENTRY_POINT(fuzz_hf_json)
