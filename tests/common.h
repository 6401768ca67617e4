/* Shared helpers for the Check suites: running a suite, finding the shared
 * models, and running the ./run binary as a user would. */
#ifndef POSENC_TESTS_COMMON_H
#define POSENC_TESTS_COMMON_H
#include <check.h>
#include <stddef.h>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

/* Runs every test of `s` and returns the process exit status. */
int tests_run_suite(Suite *s);

/* Directory of the shared models ($POSENC_MODELS or ../shared/models), or
 * NULL after printing what is skipped.  Under CI=true a missing directory is
 * a hard failure: real-model tests must run there. */
const char *tests_models_dir(const char *what);

/* "<models_dir>/<rel>" in a static rotating buffer. */
const char *tests_model_path(const char *models_dir, const char *rel);

/* Result of running the engine binary ($POSENC_RUN, default ./run). */
typedef struct {
    int status;   /* exit status, or 128+signal when killed */
    char *out;    /* stdout, NUL-terminated (malloc'd) */
    char *err;    /* stderr, NUL-terminated (malloc'd) */
} TestsRun;

/* Runs the engine with argv (NULL-terminated, without argv[0]). */
TestsRun tests_run_engine(const char *const *args);
/* The same with its address space limited to `bytes` (RLIMIT_AS), so that
 * what it allocates, touched or not, is bounded.  Not under ASan, whose
 * shadow memory needs terabytes of address space. */
TestsRun tests_run_engine_limited(const char *const *args, size_t bytes);
/* Runs $PYTHON (default /usr/bin/python3) with args, the same way. */
TestsRun tests_run_python(const char *const *args);
void tests_run_free(TestsRun *r);
/* Runs the engine and asserts a clean refusal: exit status 1 and exactly
 * one stderr line, starting "error: " and containing `needle`.  Returns the
 * run for further checks on stdout (free it with tests_run_free). */
TestsRun tests_expect_failure(const char *const *args, const char *needle);
/* The same, and nothing on stdout: the refusal came before any work. */
void tests_expect_error(const char *const *args, const char *needle);

/* Writes `n` bytes to a fresh temporary file and returns its path (static
 * rotating buffer); the file is removed at exit. */
const char *tests_write_temp(const void *data, size_t n, const char *suffix);

/* Converts <models_dir>/<input> with tools/convert.py ($PYTHON) into a
 * temporary GGUF (removed at exit); extra args NULL-terminated.  Returns
 * the path, or NULL after printing why (missing python, converter error). */
const char *tests_convert(const char *models_dir, const char *input, const char *const *extra);

/* "<models_dir>/../text/<name>": the shared texts sit beside the models. */
const char *tests_text_path(const char *models_dir, const char *name);

/* Offset just past the first GGUF string (u64 length + bytes) equal to s
 * in the n bytes at p; fails the test when there is none. */
size_t tests_gguf_string_end(const void *p, size_t n, const char *s);

/* Whole file into a NUL-terminated malloc'd buffer, or NULL. */
char *tests_read_file(const char *path, size_t *len);

/* The number after "key": in a flat JSON text; NAN if the key is absent or
 * not followed by a number. */
double tests_json_number(const char *json, const char *key);
/* The real models the cache suites run on, one per architecture family and
 * positional scheme: stories260K (llama, RoPE native) and the five PE-zoo
 * models (gpt2; sinusoidal, learned, rope, alibi, none), converted to GGUF. */
#define TESTS_N_MODELS 6
typedef struct {
    const char *name;
    Model model;
} TestsModel;
/* Loads them all; returns 0 (after the SKIP/CI handling of
 * tests_models_dir) when the shared models are absent. */
int tests_load_models(TestsModel *out, const char *what);
void tests_free_models(TestsModel *models);

/* llama2.c's own merge loop, the reference for its tokenizers: after each
 * merge, rescan every adjacent pair of ids[0..n) and merge the best-scoring
 * one (leftmost on ties), while any scores above -1e10.  Returns the new
 * count.  Quadratic in n. */
int tests_llama2c_rescan_merges(const Tokenizer *t, int *ids, int n);
#endif
