/* Text through every kind of tokenizer: the shared models' llama2.c
 * tokenizer.bin, SentencePiece BPE (Llama 2: byte fallback, identity
 * normalization; TinyStories: nmt_nfkc charsmap) and unigram, and GPT-2.
 * Each encodes the input and decodes the ids; GPT-2's byte-level BPE,
 * llama2.c's byte fallback and Llama 2's SentencePiece (on valid UTF-8
 * without U+2581) must give the text back exactly.  The input's
 * bytes are also decoded as token ids, in and out of range, and printed as
 * -m tokenize prints them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"

static const char *const tokenizer_files[] = {
    "stories260K/tok512.bin",
    "llama2-tokenizer/tokenizer.model",
    "spm/tinystories-bpe-1k.model",
    "spm/tinystories-unigram-1k.model",
    "gpt2-tokenizer",
};
#define N_TOKENIZERS (int)(sizeof tokenizer_files / sizeof *tokenizer_files)
static Tokenizer tokenizers[N_TOKENIZERS];
static FILE *devnull;

int fuzz_text_init(const char *models_dir, PosencError *err) {
    for (int i = 0; i < N_TOKENIZERS; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", models_dir, tokenizer_files[i]);
        if (tokenizer_load(&tokenizers[i], path, 0, err)) return -1;
    }
    devnull = fopen("/dev/null", "w");
    return devnull ? 0 : posenc_error(err, "/dev/null: cannot open");
}

#ifdef POSENC_LIBFUZZER
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = getenv("POSENC_MODELS");
    PosencError err;
    if (fuzz_text_init(dir && *dir ? dir : "../shared/models", &err)) {
        fprintf(stderr, "fuzz_text needs the shared models (POSENC_MODELS): %s\n", err.msg);
        exit(1);
    }
    return 0;
}
#endif

/* decode(encode(text)) == prefix + text, for tokenizers that lose nothing. */
static void check_round_trip(const Tokenizer *t, const char *text, size_t len,
                             const char *prefix) {
    int *ids, n;
    PosencError err;
    if (tokenizer_encode_alloc(t, text, len, 0, 0, &ids, &n, &err)) return;
    size_t dlen, plen = strlen(prefix);
    char *back = tokenizer_decode_text(t, ids, n, &dlen);
    FUZZ_ASSERT(dlen == plen + len && memcmp(back, prefix, plen) == 0 &&
                memcmp(back + plen, text, len) == 0);
    free(back);
    free(ids);
}

/* SentencePiece without normalization rules and with byte fallback (Llama
 * 2's) loses nothing of valid UTF-8 but the U+2581 it writes for spaces:
 * such text decodes back to itself, as it does with the library. */
static int spm_round_trips(const Tokenizer *t, const char *text, size_t len) {
    if (t->kind == TOKENIZER_GPT2 || t->kind == TOKENIZER_LLAMA2C || t->n_charsmap_units ||
        !t->byte_fallback || t->remove_extra_whitespaces || !t->escape_whitespaces ||
        memmem(text, len, "\xE2\x96\x81", 3))
        return 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = utf8_decode((const unsigned char *)text + i, len - i, &cp);
        if (k == 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

int fuzz_text(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    int *ids = malloc((size + 1) * sizeof(int));
    for (int i = 0; i < N_TOKENIZERS; i++) {
        const Tokenizer *t = &tokenizers[i];
        fuzz_encode_decode(t, text, size);
        if (t->kind == TOKENIZER_GPT2) check_round_trip(t, text, size, "");
        /* llama2.c prepends a space and keeps it when decoding without BOS */
        if (t->kind == TOKENIZER_LLAMA2C && size > 0) check_round_trip(t, text, size, " ");
        if (spm_round_trips(t, text, size)) check_round_trip(t, text, size, "");

        for (size_t k = 0; k < size; k++) ids[k] = (int)(data[k] * 257u % (unsigned)(t->vocab_size + 2)) - 1;
        size_t dlen;
        free(tokenizer_decode_text(t, ids, (int)size, &dlen));

        PosencError err;
        if (tokenize_text(t, text, size, devnull, (int)(size & 1), &err)) fuzz_check_error(&err);
    }
    free(ids);
    return 0;
}

FUZZ_ENTRY_POINT(fuzz_text)
