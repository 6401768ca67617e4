#include "tests/common.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int tests_run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* ---- the shared models ------------------------------------------------------ */

const char *tests_models_dir(const char *what) {
    const char *dir = getenv("POSENC_MODELS");
    if (!dir || !*dir) dir = "../shared/models";
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return dir;
    char why[1200];
    snprintf(why, sizeof why, "models directory '%s' not found; set POSENC_MODELS", dir);
    tests_prerequisite_missing(what, why);
    return NULL;
}

int tests_under_ci(void) {
    const char *ci = getenv("CI");
    return ci && strcmp(ci, "true") == 0;
}

int tests_prerequisite_missing(const char *what, const char *why) {
    if (tests_under_ci()) {
        /* Outside a test (suite set-up) there is no test to fail: exit. */
        fprintf(stderr, "FATAL: %s must run under CI=true, but %s\n", what, why);
        fflush(stderr);
        exit(EXIT_FAILURE);
    }
    printf("SKIP: %s (%s)\n", what, why);
    fflush(stdout);
    return 0;
}

const char *tests_find_program(const char *program) {
    static char found[4096];
    if (strchr(program, '/'))
        return access(program, X_OK) == 0 ? program : NULL;
    const char *path = getenv("PATH");
    for (const char *p = path; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        snprintf(found, sizeof found, "%.*s/%s", (int)n, n ? p : ".", program);
        if (access(found, X_OK) == 0) return found;
        p += n + (colon != NULL);
    }
    return NULL;
}

const char *tests_model_path(const char *models_dir, const char *rel) {
    static char buf[8][1024];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", models_dir, rel);
    return p;
}

const char *tests_text_path(const char *models_dir, const char *name) {
    char rel[512];
    snprintf(rel, sizeof rel, "../text/%s", name);
    return tests_model_path(models_dir, rel);
}

const char *tests_convert(const char *models_dir, const char *input, const char *const *extra) {
    char in[1024];
    snprintf(in, sizeof in, "%s/%s", models_dir, input);
    const char *out = tests_write_temp("", 0, ".gguf");
    const char *args[16] = {"tools/convert.py", in, out};
    int n = 3;
    for (int i = 0; extra && extra[i]; i++) {
        ck_assert_int_lt(n, 15);
        args[n++] = extra[i];
    }
    args[n] = NULL;
    TestsRun r = tests_run_python(args);
    int ok = r.status == 0;
    if (!ok) fprintf(stderr, "tools/convert.py %s failed (status %d): %s", in, r.status, r.err);
    tests_run_free(&r);
    return ok ? out : NULL;
}

void tests_load_model(Model *m, const char *path) {
    PosencError err;
    ck_assert_msg(model_load(m, path, &err) == 0, "%s", err.msg);
}

void tests_load_tokenizer(Tokenizer *t, const char *path, int expected_vocab) {
    PosencError err;
    ck_assert_msg(tokenizer_load(t, path, expected_vocab, &err) == 0, "%s", err.msg);
}

void tests_build_context(Context *ctx, const Model *m, const PeParams *pe, int n_ctx) {
    PosencError err;
    ck_assert_msg(context_build(ctx, m, pe, n_ctx, n_ctx, &err) == 0, "%s", err.msg);
}

/* The logits of ids[0..n) decoded one at a time, n rows of the vocabulary,
 * at `threads` threads under `team`; *barriers, the team's. */
static float *decode_rows(const Model *m, const int *ids, int n, int threads, TeamPolicy team, long *barriers) {
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    Context ctx;
    tests_build_context(&ctx, m, &m->pe, n);
    ctx.team = team;
    size_t vocab = (size_t)m->config.vocab_size;
    float *rows = malloc(sizeof(float) * vocab * (size_t)n);
    ck_assert_ptr_nonnull(rows);
    for (int t = 0; t < n; t++) memcpy(rows + vocab * t, context_forward(&ctx, ids + t, 1, t, 0), vocab * sizeof(float));
    *barriers = ctx.stats.barriers + ctx.state.mm.stats.barriers;
    context_free(&ctx);
    omp_set_num_threads(saved);
    return rows;
}

void tests_check_team_decode(const char *gguf, const int *ids, int n, const char *name) {
    Model model;
    tests_load_model(&model, gguf);
    const Model *m = &model;
    size_t vocab = (size_t)m->config.vocab_size, bytes = sizeof(float) * vocab * (size_t)n;
    long barriers;
    float *steps = decode_rows(m, ids, n, 1, TEAM_NEVER, &barriers);
    ck_assert_int_eq(barriers, 0);
    for (int threads = 2; threads <= 3; threads++) {
        float *team = decode_rows(m, ids, n, threads, TEAM_ALWAYS, &barriers);
        ck_assert_msg(barriers > 0, "%s: no team ran at %d threads", name, threads);
        size_t first = 0;
        while (first < vocab * (size_t)n && !memcmp(&team[first], &steps[first], sizeof(float))) first++;
        ck_assert_msg(first == vocab * (size_t)n, "%s: at %d threads the team's logit %zu of token %zu is %.9g, the steps' %.9g",
                      name, threads, first % vocab, first / vocab, (double)team[first], (double)steps[first]);
        free(team);
    }
    /* the default runs a team where the matrices are worth sharing */
    const ModelConfig *c = &m->config;
    int large = (size_t)model_kv_dim(c) * c->dim >= PARALLEL_MIN_MACS;
    long by_default;
    free(decode_rows(m, ids, n, 2, TEAM_WHEN_LARGE, &by_default));
    ck_assert_msg((by_default > 0) == large, "%s: %ld barriers by default, at %d x %d", name, by_default,
                  model_kv_dim(c), c->dim);
    int *changed = malloc(sizeof(int) * (size_t)n);
    ck_assert_ptr_nonnull(changed);
    memcpy(changed, ids, sizeof(int) * (size_t)n);
    changed[0] = (ids[0] + 1) % m->config.vocab_size;
    float *control = decode_rows(m, changed, n, 2, TEAM_ALWAYS, &barriers);
    ck_assert_msg(memcmp(control, steps, bytes) != 0, "%s: control: another first token leaves the logits", name);
    printf("%-24s team decode at 2 and 3 threads: the steps' bits in %d rows (%ld barriers at 2; by default %s)\n",
           name, n, barriers, large ? "a team" : "per step, too small");
    free(control);
    free(changed);
    free(steps);
    model_free(&model);
}

void tests_load_zoo(Model *m, const char *models_dir, const char *scheme) {
    char rel[64];
    snprintf(rel, sizeof rel, "zoo/%s", scheme);
    const char *gguf = tests_convert(models_dir, rel, NULL);
    ck_assert_msg(gguf != NULL, "could not convert %s", rel);
    tests_load_model(m, gguf);
}

/* `tool` make SUBJECT build/<folder>/<name> [extra], then convert.py into
 * build/<folder>/<name>.gguf (static rotating buffer). */
static const char *make_and_convert(const char *tool, const char *subject, const char *folder,
                                    const char *name, const char *extra) {
    static char gguf[4][160];
    static int next;
    char dir[128], *out = gguf[next++ % 4];
    snprintf(dir, sizeof dir, "build/%s", folder);
    mkdir("build", 0755);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "build/%s/%s", folder, name);
    snprintf(out, sizeof gguf[0], "%s.gguf", dir);
    const char *make[] = {tool, "make", subject, dir, extra, NULL};
    const char *conv[] = {"tools/convert.py", dir, out, NULL};
    TestsRun a = tests_run_python_ok(make), b = tests_run_python_ok(conv);
    tests_run_free(&a);
    tests_run_free(&b);
    return out;
}

const char *tests_make_family(const char *family, int tied, const char *name) {
    return make_and_convert("tools/arch_reference.py", family, "arch", name,
                            tied ? "--tied" : NULL);
}

const char *tests_make_hf_case(const char *name) {
    return make_and_convert("tools/hf_tiny.py", name, "hf", name, NULL);
}

void tests_load_family(Model *m, const char *family) {
    char name[64];
    snprintf(name, sizeof name, "models-%s", family);
    tests_load_model(m, tests_make_family(family, 0, name));
}

int tests_load_models(TestsModel *out, const char *what) {
    static const char *const zoo[] = {"sinusoidal", "learned", "rope", "alibi", "none", "t5"};
    /* (name: the GGUF architecture, HF model_type) */
    static const char *const families[][2] = {
        {"qwen2", "qwen2"}, {"gptneox", "gpt_neox"}, {"bloom", "bloom"},
        {"starcoder", "gpt_bigcode"}, {"phi2", "phi"}, {"mpt", "mpt"}, {"gemma", "gemma"},
        {"mistral", "mistral"},
    };
    const int n_zoo = (int)(sizeof zoo / sizeof *zoo);
    const char *dir = tests_models_dir(what);
    if (!dir) return 0;
    out[0].name = "stories260K";
    tests_load_model(&out[0].model, tests_model_path(dir, "stories260K/stories260K.bin"));
    for (int i = 0; i < n_zoo; i++) {
        out[1 + i].name = zoo[i];
        tests_load_zoo(&out[1 + i].model, dir, zoo[i]);
    }
    const int n_families = (int)(sizeof families / sizeof *families);
    for (int i = 0; i < n_families; i++) {
        out[1 + n_zoo + i].name = families[i][0];
        tests_load_family(&out[1 + n_zoo + i].model, families[i][1]);
    }
    /* per-layer tables: Gemma 3's local and global theta, Command R7B's
     * sliding RoPE and global NoPE layers, gpt-oss's sliding and full layers
     * with learned sinks (tools/hf_tiny.py) */
    static const char *const per_layer[] = {"gemma3", "cohere2", "gpt_oss"};
    for (int i = 0; i < TESTS_N_MODELS - 1 - n_zoo - n_families; i++) {
        out[1 + n_zoo + n_families + i].name = per_layer[i];
        tests_load_model(&out[1 + n_zoo + n_families + i].model, tests_make_hf_case(per_layer[i]));
    }
    return 1;
}

void tests_free_models(TestsModel *models) {
    for (int i = 0; i < TESTS_N_MODELS; i++) model_free(&models[i].model);
}

/* ---- files -------------------------------------------------------------------- */

/* Everything left to read from fd, NUL-terminated; its length in *len. */
static char *slurp_fd(int fd, const char *what, size_t *len) {
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            s = realloc(s, cap);
            ck_assert_ptr_nonnull(s);
        }
        ssize_t got = read(fd, s + n, cap - n - 1);
        ck_assert_msg(got >= 0, "cannot read %s: %s", what, strerror(errno));
        if (got == 0) break;
        n += (size_t)got;
    }
    s[n] = '\0';
    if (len) *len = n;
    return s;
}

char *tests_read_file(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "cannot open %s: %s", path, strerror(errno));
    char *s = slurp_fd(fd, path, len);
    close(fd);
    return s;
}

void tests_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
    size_t wrote = fwrite(data, 1, n, f);
    int closed = fclose(f);
    ck_assert_msg(wrote == n && closed == 0, "cannot write %s", path);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    return remove(path);
}

/* Removes `path`, a file or a directory with everything in it: depth first,
 * so a directory is empty when its turn comes; links are removed, never
 * followed.  Returns nftw's result. */
static int remove_tree(const char *path) {
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The temporary files and directories of tests_write_temp and
 * tests_temp_dir, each with the process that made it.  Check runs each test
 * in a child of the suite's process, which inherits the registry: a
 * process removes at exit only what it made itself, so a test never removes
 * what its suite's process (an unchecked fixture) made for the tests after
 * it, and what a test made goes when the test's process ends. */
#define MAX_TEMPS 1024
static struct {
    char path[64];
    pid_t owner;
} temps[MAX_TEMPS];
static int n_temps;
static int removal_registered; /* inherited with the atexit registration */

static void remove_temps(void) {
    for (int i = n_temps - 1; i >= 0; i--)
        if (temps[i].owner == getpid()) remove_tree(temps[i].path); /* already gone: fine */
}

/* Registers `path`, just made, for removal at exit; returns the registry's
 * copy, valid until then. */
static const char *register_temp(const char *path) {
    ck_assert_int_lt(n_temps, MAX_TEMPS);
    if (!removal_registered) {
        atexit(remove_temps);
        removal_registered = 1;
    }
    temps[n_temps].owner = getpid();
    snprintf(temps[n_temps].path, sizeof temps[0].path, "%s", path);
    return temps[n_temps++].path;
}

const char *tests_write_temp(const void *data, size_t n, const char *suffix) {
    char template[sizeof temps[0].path];
    snprintf(template, sizeof template, "/tmp/posenc-test-XXXXXX%s", suffix ? suffix : "");
    int fd = mkstemps(template, suffix ? (int)strlen(suffix) : 0);
    ck_assert_msg(fd >= 0, "cannot create %s: %s", template, strerror(errno));
    const char *path = register_temp(template);
    ck_assert(write(fd, data, n) == (ssize_t)n);
    close(fd);
    return path;
}

const char *tests_temp_dir(void) {
    char template[] = "/tmp/posenc-test-XXXXXX";
    ck_assert_msg(mkdtemp(template) != NULL, "cannot create %s: %s", template, strerror(errno));
    return register_temp(template);
}

void tests_remove_dir(const char *dir) {
    ck_assert_msg(remove_tree(dir) == 0, "cannot remove %s: %s", dir, strerror(errno));
}

const char *tests_train_spm(const char *models_dir, const char *dir, const char *name,
                            const char *options) {
    static char model[4][512];
    static int next;
    char *path = model[next++ % 4];
    size_t n;
    char *text = tests_read_file(tests_text_path(models_dir, "tinystories-valid-head.txt"), &n);
    char train[512], cmd[2048];
    snprintf(train, sizeof train, "%s/train.txt", dir);
    tests_write_file(train, text, n < 200000 ? n : 200000);
    free(text);
    snprintf(cmd, sizeof cmd,
             "spm_train --input='%s' --model_prefix='%s/%s' --input_sentence_size=20000 "
             "--shuffle_input_sentence=false %s >/dev/null 2>&1",
             train, dir, name, options);
    ck_assert_msg(system(cmd) == 0, "spm_train failed (install it with `make deps`): %s", cmd);
    snprintf(path, sizeof model[0], "%s/%s.model", dir, name);
    return path;
}

/* ---- comparisons and parsing ---------------------------------------------------- */

float tests_max_abs_diff(const float *a, const float *b, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (isnan(d)) return NAN; /* fmaxf would drop it */
        m = fmaxf(m, d);
    }
    return m;
}

double tests_json_number(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *at = strstr(json, pat);
    if (!at) return NAN;
    at = strchr(at + strlen(pat), ':');
    if (!at) return NAN;
    char *end;
    double v = strtod(at + 1, &end);
    return end == at + 1 ? NAN : v;
}

size_t tests_gguf_string_end(const void *p, size_t n, const char *s) {
    const uint8_t *b = p;
    size_t len = strlen(s);
    for (size_t i = 0; i + 8 + len <= n; i++) {
        uint64_t l;
        memcpy(&l, b + i, 8);
        if (l == len && memcmp(b + i + 8, s, len) == 0) return i + 8 + len;
    }
    ck_abort_msg("string '%s' not found in the GGUF", s);
    return 0;
}

const char *tests_show_bytes(const char *s, size_t n) {
    static char buf[4][400];
    static int next;
    char *b = buf[next++ % 4];
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof buf[0] - 8; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F && c != '\\') b[k++] = (char)c;
        else k += (size_t)snprintf(b + k, 8, "\\x%02X", c);
    }
    if (k >= sizeof buf[0] - 8) k += (size_t)snprintf(b + k, 4, "...");
    b[k] = '\0';
    return b;
}

void tests_expect_file_error(const char *msg, const char *file, const char *needle) {
    size_t n = strlen(file);
    ck_assert_msg(strncmp(msg, file, n) == 0 && msg[n] == ':',
                  "error does not start with '%s:': %s", file, msg);
    ck_assert_msg(strchr(msg, '\n') == NULL, "error is not one line: %s", msg);
    if (needle) ck_assert_msg(strstr(msg, needle) != NULL, "expected '%s' in: %s", needle, msg);
}

/* ---- running programs ------------------------------------------------------------ */

/* tests_run_program; max_address_space > 0 limits the child's (RLIMIT_AS). */
static TestsRun run_limited(const char *program, const char *const *args, const char *input,
                            size_t max_address_space) {
    int nargs = 0;
    while (args[nargs]) nargs++;
    char **argv = calloc((size_t)nargs + 2, sizeof *argv);
    ck_assert_ptr_nonnull(argv);
    argv[0] = (char *)program;
    for (int i = 0; i < nargs; i++) argv[i + 1] = (char *)args[i];

    /* stdout and stderr go to temp files: pipes could fill up and deadlock.
     * They are removed right after the run, not registered as temporaries:
     * a pair per run would soon fill the registry. */
    char out_path[] = "/tmp/posenc-out-XXXXXX", err_path[] = "/tmp/posenc-err-XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    ck_assert(out_fd >= 0 && err_fd >= 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        int in_fd = open(input ? input : "/dev/null", O_RDONLY);
        if (in_fd < 0) _exit(126);
        dup2(in_fd, 0);
        struct rlimit limit = {max_address_space, max_address_space};
        if (max_address_space && setrlimit(RLIMIT_AS, &limit) != 0) _exit(126);
        execvp(program, argv);
        _exit(127);
    }
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    TestsRun r;
    r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    lseek(out_fd, 0, SEEK_SET);
    lseek(err_fd, 0, SEEK_SET);
    r.out = slurp_fd(out_fd, "stdout", &r.out_len);
    r.err = slurp_fd(err_fd, "stderr", NULL);
    close(out_fd);
    close(err_fd);
    unlink(out_path);
    unlink(err_path);
    free(argv);
    return r;
}

TestsRun tests_run_program(const char *program, const char *const *args, const char *input) {
    return run_limited(program, args, input, 0);
}

void tests_run_free(TestsRun *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

static const char *engine_path(void) {
    const char *bin = getenv("POSENC_RUN");
    return bin && *bin ? bin : "./run";
}

TestsRun tests_run_engine(const char *const *args) {
    return run_limited(engine_path(), args, NULL, 0);
}

TestsRun tests_run_engine_input(const char *const *args, const char *input) {
    return run_limited(engine_path(), args, input, 0);
}

const char *tests_engine_path(void) { return engine_path(); }

TestsRun tests_run_engine_limited(const char *const *args, size_t bytes) {
    return run_limited(engine_path(), args, NULL, bytes);
}

TestsRun tests_run_engine_ok(const char *const *args) {
    TestsRun r = tests_run_engine(args);
    ck_assert_msg(r.status == 0, "exit status %d for %s; stderr: %s", r.status, args[0], r.err);
    return r;
}

void tests_expect_success(const char *const *args) {
    TestsRun r = tests_run_engine_ok(args);
    tests_run_free(&r);
}

/* Exactly one stderr line that starts with `prefix` and contains `needle`. */
static void expect_one_error_line(const TestsRun *r, const char *prefix, const char *needle) {
    ck_assert_msg(strncmp(r->err, prefix, strlen(prefix)) == 0,
                  "stderr does not start with '%s': %s", prefix, r->err);
    char *nl = strchr(r->err, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "stderr is not exactly one line: %s", r->err);
    ck_assert_msg(strstr(r->err, needle), "stderr does not mention '%s': %s", needle, r->err);
}

TestsRun tests_expect_failure(const char *const *args, const char *needle) {
    TestsRun r = tests_run_engine(args);
    ck_assert_msg(r.status == 1, "exit status %d (want 1) for %s; stderr: %s", r.status, args[0],
                  r.err);
    expect_one_error_line(&r, "error: ", needle);
    return r;
}

void tests_expect_error(const char *const *args, const char *needle) {
    TestsRun r = tests_expect_failure(args, needle);
    ck_assert_msg(r.out[0] == '\0', "output before the error: %s", r.out);
    tests_run_free(&r);
}

const char *tests_python(void) {
    const char *python = getenv("PYTHON");
    return python && *python ? python : "/usr/bin/python3";
}

/* The last line of a program's stderr, which names its error (Python's
 * exception, ensure_npm's summary); trailing newlines are cut from `err`. */
static const char *last_line(char *err) {
    size_t n = strlen(err);
    while (n && err[n - 1] == '\n') err[--n] = '\0';
    const char *last = strrchr(err, '\n');
    return last ? last + 1 : err;
}

int tests_python_available(const char *what) {
    char why[1200];
    if (!tests_find_program(tests_python())) {
        snprintf(why, sizeof why, "no executable %s (set PYTHON)", tests_python());
        return tests_prerequisite_missing(what, why);
    }
    TestsRun r = tests_run_python((const char *[]){"-c", "import numpy", NULL});
    int ok = r.status == 0;
    if (!ok)
        snprintf(why, sizeof why, "%s cannot import numpy: %.900s", tests_python(),
                 last_line(r.err));
    tests_run_free(&r);
    return ok ? 1 : tests_prerequisite_missing(what, why);
}

TestsRun tests_run_python(const char *const *args) {
    return run_limited(tests_python(), args, NULL, 0);
}

TestsRun tests_run_python_ok(const char *const *args) {
    TestsRun r = tests_run_python(args);
    ck_assert_msg(r.status == 0, "%s %s: exit status %d; stderr: %s", tests_python(), args[0],
                  r.status, r.err);
    return r;
}

void tests_expect_convert_error(const char *const *args, const char *needle) {
    const char *argv[32] = {"tools/convert.py"};
    int n = 1;
    for (int i = 0; args[i]; i++) {
        ck_assert_int_lt(n, 31);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    TestsRun r = tests_run_python(argv);
    ck_assert_msg(r.status == 2, "convert.py (want '%s'): exit status %d, not 2; stderr: %s",
                  needle, r.status, r.err);
    expect_one_error_line(&r, "convert.py: error: ", needle);
    ck_assert_msg(r.out[0] == '\0', "convert.py: output before the error: %s", r.out);
    tests_run_free(&r);
}

int tests_llama2c_rescan_merges(const Tokenizer *t, int *ids, int n) {
    char *buf = malloc((size_t)t->max_piece_len * 2 + 1);
    ck_assert_ptr_nonnull(buf);
    for (;;) {
        float best = -1e10f;
        int best_id = -1, at = -1;
        for (int i = 0; i + 1 < n; i++) {
            size_t la = (size_t)t->piece_lens[ids[i]], lb = (size_t)t->piece_lens[ids[i + 1]];
            memcpy(buf, t->pieces[ids[i]], la);
            memcpy(buf + la, t->pieces[ids[i + 1]], lb);
            int id = tokenizer_lookup(t, buf, la + lb);
            if (id >= 0 && t->scores[id] > best) best = t->scores[id], best_id = id, at = i;
        }
        if (at < 0) break;
        ids[at] = best_id;
        memmove(ids + at + 1, ids + at + 2, (size_t)(n - at - 2) * sizeof(int));
        n--;
    }
    free(buf);
    return n;
}

const char *tests_npm_modules(const char *what) {
    static char dir[4096];
    TestsRun r = tests_run_program("sh", (const char *[]){"tools/ensure_npm.sh", ".", NULL}, NULL);
    int ok = r.status == 0 && r.out_len > 1 && r.out_len < sizeof dir;
    if (ok) snprintf(dir, sizeof dir, "%.*s", (int)r.out_len - 1, r.out); /* drop the newline */
    if (!ok) {
        char why[1200];
        snprintf(why, sizeof why, "%.1100s", last_line(r.err));
        tests_prerequisite_missing(what, why);
    }
    tests_run_free(&r);
    return ok ? dir : NULL;
}

TestsRun tests_svg_facts(const char *const *charts) {
    const char *args[16] = {"tests/modes/svg_facts.py"};
    int n = 1;
    for (; charts[n - 1]; n++) {
        ck_assert_int_lt(n, 15);
        args[n] = charts[n - 1];
    }
    args[n] = NULL;
    return tests_run_python_ok(args);
}

void tests_expect_cut_file_rejected(const char *file, const char *scratch, const char *checker) {
    size_t len;
    char *text = tests_read_file(file, &len);
    tests_write_file(scratch, text, len / 2);
    free(text);
    const char *args[] = {checker, scratch, NULL};
    TestsRun r = tests_run_python(args);
    ck_assert_msg(r.status != 0 && strstr(r.err, "Error"), "%s accepted a cut-off %s: %s", checker,
                  file, r.err);
    tests_run_free(&r);
}

/* Runs a program that must succeed. */
static void run_ok(const char *program, const char *const *args) {
    TestsRun r = tests_run_program(program, args, NULL);
    ck_assert_msg(r.status == 0, "%s %s failed (status %d): %s", program, args[0], r.status, r.err);
    tests_run_free(&r);
}

/* Extracted into a fresh directory renamed into place, so an interrupted
 * run leaves nothing half-written under the final name. */
const char *tests_llamacpp_models(const char *what, const char *kind, const char *pathspec) {
    static char dir[4][160];
    static int next;
    char *out = dir[next++ % 4];
    const char *modules = tests_npm_modules(what);
    if (!modules) return NULL;
    if (!tests_find_program("git"))
        return tests_prerequisite_missing(what, "git is not installed (apt-get install git)"), NULL;
    char bundle[4300];
    snprintf(bundle, sizeof bundle, "%s/node-llama-cpp/llama/gitRelease.bundle", modules);
    TestsRun r = tests_run_program("git", (const char *[]){"bundle", "list-heads", bundle, NULL}, NULL);
    ck_assert_msg(r.status == 0 && r.out_len > 41 && r.out[40] == ' ',
                  "git bundle list-heads %s: status %d: %s", bundle, r.status, r.err);
    char parent[64];
    snprintf(parent, sizeof parent, "build/llamacpp-%s", kind);
    snprintf(out, sizeof dir[0], "%s/%.40s", parent, r.out);
    printf("llama.cpp %.40s from %s\n", r.out, bundle);
    tests_run_free(&r);
    struct stat st;
    if (stat(out, &st) == 0) return out;
    mkdir("build", 0755);
    mkdir(parent, 0755);
    /* beside the result, not a tests_temp_dir under /tmp: rename does not cross file systems */
    char tmp[96], git[128], tar[128], models[128];
    snprintf(tmp, sizeof tmp, "%s/tmp-XXXXXX", parent);
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    snprintf(git, sizeof git, "%s/git", tmp);
    snprintf(tar, sizeof tar, "%s/models.tar", tmp);
    snprintf(models, sizeof models, "%s/models", tmp);
    run_ok("git", (const char *[]){"init", "-q", "--bare", git, NULL});
    run_ok("git", (const char *[]){"--git-dir", git, "fetch", "-q", bundle, "HEAD", NULL});
    run_ok("git", (const char *[]){"--git-dir", git, "archive", "-o", tar, "FETCH_HEAD", "--", pathspec, NULL});
    run_ok("tar", (const char *[]){"-xf", tar, "-C", tmp, NULL});
    ck_assert_msg(rename(models, out) == 0 || stat(out, &st) == 0, "cannot create %s", out);
    tests_remove_dir(tmp);
    return out;
}
