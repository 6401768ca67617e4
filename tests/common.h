/* Shared helpers for the Check suites: running a suite, finding and loading
 * the shared models, files, comparisons, and running the ./run binary (and
 * Python) as a user would.  A helper that cannot do its job fails the test
 * with the reason, so callers need not check its result. */
#ifndef POSENC_TESTS_COMMON_H
#define POSENC_TESTS_COMMON_H
#include <check.h>
#include <stddef.h>

#include "model/context.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

/* Runs every test of `s` and returns the process exit status. */
int tests_run_suite(Suite *s);

/* ---- the shared models ------------------------------------------------------ */

/* Directory of the shared models ($POSENC_MODELS or ../shared/models), or
 * NULL after printing what is skipped.  Under CI=true a missing directory is
 * a hard failure: real-model tests must run there. */
const char *tests_models_dir(const char *what);

/* "<models_dir>/<rel>" in a static rotating buffer. */
const char *tests_model_path(const char *models_dir, const char *rel);

/* "<models_dir>/../text/<name>" (the same buffer): the shared texts sit beside
 * the models. */
const char *tests_text_path(const char *models_dir, const char *name);

/* Converts <models_dir>/<input> with tools/convert.py ($PYTHON) into a
 * temporary GGUF (removed at exit); extra args NULL-terminated.  Returns
 * the path, or NULL after printing why (missing python, converter error). */
const char *tests_convert(const char *models_dir, const char *input, const char *const *extra);

/* model_load, tokenizer_load and context_build (chunks of up to n_ctx
 * tokens), failing the test with the engine's error. */
void tests_load_model(Model *m, const char *path);
void tests_load_tokenizer(Tokenizer *t, const char *path, int expected_vocab);
void tests_build_context(Context *ctx, const Model *m, const PeParams *pe, int n_ctx);

/* The model in gguf decoded as a team (TEAM_ALWAYS) at 2 and 3 threads
 * against the per-step path on one thread (TEAM_NEVER): ids[0..n) decoded
 * one at a time must give the same bits in every row (both run the same steps on
 * the same rows: the tolerance is 0), and the team must have run (its
 * barriers counted).  By default (TEAM_WHEN_LARGE) it runs only where the
 * model's matrices are worth sharing.  Control: the team's rows after
 * ids[0] is changed differ. */
void tests_check_team_decode(const char *gguf, const int *ids, int n, const char *name);

/* The PE zoo's model for `scheme` (zoo/<scheme>), converted and loaded. */
void tests_load_zoo(Model *m, const char *models_dir, const char *scheme);

/* tools/arch_reference.py's tiny random checkpoint of `family` (its HF
 * model_type: qwen2, gpt_neox, bloom, gpt_bigcode, phi, mpt, gemma; seed
 * 11; `tied`: with a tied head) generated into build/arch/<name> and
 * converted with tools/convert.py; returns build/arch/<name>.gguf (static
 * rotating buffer).  tests_load_family loads it (name models-<family>). */
const char *tests_make_family(const char *family, int tied, const char *name);
void tests_load_family(Model *m, const char *family);

/* tools/hf_tiny.py's checkpoint of `name` (one of its cases: the same bits
 * transformers ran for tests/fixtures/hf_golden/<name>.json) generated into
 * build/hf/<name> and converted with tools/convert.py; returns
 * build/hf/<name>.gguf (static rotating buffer). */
const char *tests_make_hf_case(const char *name);

/* The models the cache suites run on, one per architecture family and
 * positional scheme: stories260K (llama, RoPE native), the six PE-zoo
 * models (gpt2; sinusoidal, learned, rope, alibi, none, t5), converted to
 * GGUF, and one tiny random checkpoint of every other family (qwen2,
 * gptneox and phi2 with partial rotary, bloom, starcoder, mpt, gemma with
 * its head size apart from dim / heads), a llama with a sliding window
 * (mistral), and two models whose layers differ in where position lives:
 * Gemma 3 (local theta 10000 with a window of 8, one global layer at 1e6,
 * linear x8) and Command R7B (3 sliding RoPE layers, 1 global NoPE), and
 * gpt-oss (learned sinks in every softmax, a sliding and a full layer,
 * untruncated YaRN, experts). */
#define TESTS_N_MODELS 18
typedef struct {
    const char *name;
    Model model;
} TestsModel;
/* Loads them all; returns 0 (after the SKIP/CI handling of
 * tests_models_dir) when the shared models are absent. */
int tests_load_models(TestsModel *out, const char *what);
void tests_free_models(TestsModel *models);

/* ---- files -------------------------------------------------------------------- */

/* The whole file (a pipe too) in a NUL-terminated malloc'd buffer, its size
 * in *len when len is not NULL. */
char *tests_read_file(const char *path, size_t *len);

/* Writes n bytes to path, created or truncated. */
void tests_write_file(const char *path, const void *data, size_t n);

/* Temporaries, /tmp/posenc-test-XXXXXX: each is removed when the process
 * that made it exits.  A test (in fork mode, its own child process) keeps
 * them to its end; what the suite's process made (an unchecked fixture)
 * lasts for all its tests.  The path stays valid until then. */

/* Writes `n` bytes to a fresh temporary file, named with `suffix` (or
 * none when NULL), and returns its path. */
const char *tests_write_temp(const void *data, size_t n, const char *suffix);

/* A fresh empty temporary directory, removed with everything in it. */
const char *tests_temp_dir(void);

/* Removes the directory `dir` and everything in it. */
void tests_remove_dir(const char *dir);

/* spm_train with `options` (shell words) on the first 200 KB of the shared
 * TinyStories text; returns <dir>/<name>.model (static rotating buffer). */
const char *tests_train_spm(const char *models_dir, const char *dir, const char *name,
                            const char *options);

/* ---- comparisons and parsing ---------------------------------------------------- */

/* max |a[i] - b[i]| over n floats.  A NaN on either side makes it NaN,
 * which no tolerance (d <= tol) and no control (d > min) accepts. */
float tests_max_abs_diff(const float *a, const float *b, size_t n);

/* The number after "key": in a flat JSON text; NAN if the key is absent or
 * not followed by a number. */
double tests_json_number(const char *json, const char *key);

/* Offset just past the first GGUF string (u64 length + bytes) equal to s
 * in the n bytes at p; fails the test when there is none. */
size_t tests_gguf_string_end(const void *p, size_t n, const char *s);

/* The first bytes of s[0, n) for a failure message, bytes other than
 * printable ASCII (and the backslash) as \xNN (static rotating buffer). */
const char *tests_show_bytes(const char *s, size_t n);

/* An engine error as every layer states it: one line that starts with the
 * file it concerns, "<file>:", and mentions `needle` (unless NULL). */
void tests_expect_file_error(const char *msg, const char *file, const char *needle);

/* ---- running programs ------------------------------------------------------------ */

/* Result of running a program. */
typedef struct {
    int status;     /* exit status, or 128+signal when killed */
    char *out;      /* stdout, NUL-terminated (malloc'd) */
    char *err;      /* stderr, NUL-terminated (malloc'd) */
    size_t out_len; /* bytes of stdout (it may hold NULs) */
} TestsRun;

/* Runs `program` (looked up in PATH when it has no '/') with args
 * (NULL-terminated, without argv[0]) and stdin from the file `input`
 * (NULL: /dev/null), capturing both output streams. */
TestsRun tests_run_program(const char *program, const char *const *args, const char *input);
void tests_run_free(TestsRun *r);

/* Runs the engine binary ($POSENC_RUN, default ./run) with args. */
TestsRun tests_run_engine(const char *const *args);
/* The same with stdin from the file `input`. */
TestsRun tests_run_engine_input(const char *const *args, const char *input);
/* The engine binary's path ($POSENC_RUN, default ./run). */
const char *tests_engine_path(void);
/* The same with its address space limited to `bytes` (RLIMIT_AS), so that
 * what it allocates, touched or not, is bounded.  Not under ASan, whose
 * shadow memory needs terabytes of address space. */
TestsRun tests_run_engine_limited(const char *const *args, size_t bytes);
/* The engine, which must exit 0; free the run with tests_run_free. */
TestsRun tests_run_engine_ok(const char *const *args);
/* The same when only success matters. */
void tests_expect_success(const char *const *args);
/* Runs the engine and asserts a clean refusal: exit status 1 and exactly
 * one stderr line, starting "error: " and containing `needle`.  Returns the
 * run for further checks on stdout (free it with tests_run_free). */
TestsRun tests_expect_failure(const char *const *args, const char *needle);
/* The same, and nothing on stdout: the refusal came before any work. */
void tests_expect_error(const char *const *args, const char *needle);

/* Whether the suites run under CI (CI=true, which .ci/run exports): there a
 * missing prerequisite is a failure, never a skip. */
int tests_under_ci(void);
/* A prerequisite of `what` is missing (`why`): under CI the test fails
 * naming both; elsewhere one "SKIP: what (why)" line.  Returns 0, so a
 * caller can `return tests_prerequisite_missing(...)`. */
int tests_prerequisite_missing(const char *what, const char *why);
/* `program` as execvp finds it (looked up in PATH when it has no '/'), in
 * a static buffer, or NULL when there is no such executable. */
const char *tests_find_program(const char *program);

/* The node_modules directory of the npm references (tests/package.json),
 * installed by tools/ensure_npm.sh on first use; NULL after printing that
 * `what` is skipped (a failure under CI=true, where npm must work). */
const char *tests_npm_modules(const char *what);
/* build/llamacpp-KIND/<commit>: the files of models/ that `pathspec` (e.g.
 * "models/ggml-vocab-*") matches in the llama.cpp source node-llama-cpp
 * ships (llama/gitRelease.bundle), extracted with git the first time, models/
 * itself being the directory; NULL after tests_prerequisite_missing. */
const char *tests_llamacpp_models(const char *what, const char *kind, const char *pathspec);

/* The Python interpreter: $PYTHON, default /usr/bin/python3. */
const char *tests_python(void);
/* Whether it runs and imports NumPy (every tool the tests call needs
 * both); if not, tests_prerequisite_missing. */
int tests_python_available(const char *what);
/* Runs it with args, the same way as the engine. */
TestsRun tests_run_python(const char *const *args);
/* The same, and it must exit 0. */
TestsRun tests_run_python_ok(const char *const *args);
/* tests/modes/svg_facts.py on the charts (NULL-terminated paths): what a
 * reader sees, one fact a line (series, legends, panels, texts); it must
 * parse every file. */
TestsRun tests_svg_facts(const char *const *charts);
/* The negative control of every chart and page check: the first half of
 * `file`, written to `scratch`, does not parse, and the `checker` script
 * (tests/modes/svg_facts.py, html_facts.py) fails with a Python error. */
void tests_expect_cut_file_rejected(const char *file, const char *scratch, const char *checker);
/* tools/convert.py with args must refuse as its users are promised: exit
 * status 2, nothing on stdout, and one stderr line "convert.py: error: ..."
 * containing `needle`. */
void tests_expect_convert_error(const char *const *args, const char *needle);

/* llama2.c's own merge loop, the reference for its tokenizers: after each
 * merge, rescan every adjacent pair of ids[0..n) and merge the best-scoring
 * one (leftmost on ties), while any scores above -1e10.  Returns the new
 * count.  Quadratic in n. */
int tests_llama2c_rescan_merges(const Tokenizer *t, int *ids, int n);
#endif
