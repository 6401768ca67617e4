/* The fuzz targets, one per kind of input posenc reads (fuzz/fuzz_KIND.c),
 * and what they share.  Each target is a function of one input; built with
 * -DPOSENC_LIBFUZZER (make fuzz-build, clang) it is also libFuzzer's entry
 * point, and built without it tests/test_fuzz_regressions.c replays the
 * committed inputs of tests/fixtures/fuzz/KIND/ through the same function.
 * The loaders take paths, so an input is written to a memfd and handed over
 * as a file name; the targets then call the library as run.c and the modes
 * do.  Every target returns 0 (libFuzzer's convention); a broken property
 * aborts. */
#ifndef POSENC_FUZZ_H
#define POSENC_FUZZ_H
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* Separates the two files of a two-file input (GPT-2's vocab.json and
 * merges.txt, llama2.c's checkpoint and tokenizer.bin); it is in
 * fuzz/gguf.dict so mutations can make and move it. */
#define FUZZ_SPLIT "\n#posenc-fuzz-split#\n"

int fuzz_gguf_model(const uint8_t *data, size_t size);
int fuzz_gguf_vocab(const uint8_t *data, size_t size);
int fuzz_llama2c(const uint8_t *data, size_t size);
int fuzz_spm(const uint8_t *data, size_t size);
int fuzz_gpt2(const uint8_t *data, size_t size);
int fuzz_hf_json(const uint8_t *data, size_t size);
int fuzz_text(const uint8_t *data, size_t size);
int fuzz_sampler(const uint8_t *data, size_t size);
int fuzz_jinja(const uint8_t *data, size_t size);
int fuzz_api(const uint8_t *data, size_t size);
/* fuzz_text needs the shared models' tokenizers: loads them from
 * models_dir once (0), or -1 with err. */
int fuzz_text_init(const char *models_dir, PosencError *err);
/* fuzz_api's slot: stories260K from models_dir (0), or -1 with err. */
int fuzz_api_init(const char *models_dir, PosencError *err);

#ifdef POSENC_LIBFUZZER
#define FUZZ_ENTRY_POINT(target)                                                           \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return target(data, size); }
#else
#define FUZZ_ENTRY_POINT(target)
#endif

/* Text every tokenizer target encodes besides the input's own bytes:
 * leading and repeated spaces, a literal U+2581, digits, a newline, a
 * composed and a fullwidth letter (NFKC), a zero-width space, an emoji, and
 * bytes that are not UTF-8. */
#define FUZZ_SAMPLE_TEXT                                                                   \
    "  Once upon a time,  caf\xC3\xA9 \xE2\x96\x81 \xEF\xBC\xA1 123\n\xE2\x80\x8B "           \
    "\xF0\x9F\x98\x80 \xFF\xC3 !"

/* Splits data at the first FUZZ_SPLIT: the part before it, and the rest
 * (empty when there is no separator). */
void fuzz_split(const uint8_t *data, size_t size, const uint8_t **a, size_t *na,
                const uint8_t **b, size_t *nb);

/* Replaces the contents of the file `name` (e.g. "tok.model", "vocab.json")
 * in this process's scratch directory with data, and returns its path.  The
 * file is a symlink to a memfd, so writing it costs no disk I/O and the
 * name's suffix still picks the tokenizer format as it does for a user. */
const char *fuzz_file(const char *name, const uint8_t *data, size_t size);
/* The scratch directory (holding the files above). */
const char *fuzz_dir(void);

/* Aborts (a crash the fuzzer reports) when a property of the library's
 * contract does not hold: a silent misbehaviour is a bug like a crash. */
#define FUZZ_ASSERT(cond)                                                                  \
    do {                                                                                   \
        if (!(cond)) fuzz_fail(__FILE__, __LINE__, #cond);                                 \
    } while (0)
__attribute__((noreturn)) void fuzz_fail(const char *file, int line, const char *what);

/* An error message the library returned: non-empty, one line. */
void fuzz_check_error(const PosencError *err);
/* What a mode printed from a file's contents: lines of valid UTF-8 without
 * control characters (strings from files are escaped; issue 18). */
void fuzz_check_printable(const char *s, size_t n);

/* Encodes text with t, checks every id is in the vocabulary and that the
 * bounded tokenizer_encode agrees with tokenizer_encode_alloc, then decodes
 * the ids (whole and token by token).  Returns the ids' count, or -1 when t
 * refused the text (with a well-formed error). */
int fuzz_encode_decode(const Tokenizer *t, const char *text, size_t len);
/* What every tokenizer target does with a tokenizer it loaded:
 * fuzz_encode_decode on FUZZ_SAMPLE_TEXT and on the first 256 bytes of
 * `own` (the input itself, so the fuzzer steers the text too). */
void fuzz_tokenizer_texts(const Tokenizer *t, const uint8_t *own, size_t n);
#endif
