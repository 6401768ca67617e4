#include "tests/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
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

const char *tests_models_dir(const char *what) {
    const char *dir = getenv("POSENC_MODELS");
    if (!dir || !*dir) dir = "../shared/models";
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return dir;
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) {
        fprintf(stderr, "FATAL: models directory '%s' is missing under CI=true; "
                        "real-model tests (%s) must run in CI\n", dir, what);
        exit(EXIT_FAILURE);
    }
    fprintf(stderr, "SKIP: %s (models directory '%s' not found; set POSENC_MODELS)\n",
            what, dir);
    return NULL;
}

const char *tests_model_path(const char *models_dir, const char *rel) {
    static char buf[8][1024];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", models_dir, rel);
    return p;
}

static char *slurp_fd(int fd) {
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    for (;;) {
        if (n + 1 >= cap) { cap *= 2; s = realloc(s, cap); ck_assert_ptr_nonnull(s); }
        ssize_t got = read(fd, s + n, cap - n - 1);
        if (got <= 0) break;
        n += (size_t)got;
    }
    s[n] = '\0';
    return s;
}

/* Runs bin with args (NULL-terminated, without argv[0]), capturing both
 * streams; max_address_space > 0 limits the child's (RLIMIT_AS). */
static TestsRun run_program(const char *bin, const char *const *args, size_t max_address_space) {
    int nargs = 0;
    while (args[nargs]) nargs++;
    char **argv = calloc((size_t)nargs + 2, sizeof *argv);
    ck_assert_ptr_nonnull(argv);
    argv[0] = (char *)bin;
    for (int i = 0; i < nargs; i++) argv[i + 1] = (char *)args[i];

    /* stdout and stderr go to temp files: pipes could fill up and deadlock. */
    char out_path[] = "/tmp/posenc-out-XXXXXX", err_path[] = "/tmp/posenc-err-XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    ck_assert(out_fd >= 0 && err_fd >= 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        int devnull = open("/dev/null", 0);
        if (devnull >= 0) dup2(devnull, 0);
        struct rlimit limit = {max_address_space, max_address_space};
        if (max_address_space && setrlimit(RLIMIT_AS, &limit) != 0) _exit(126);
        execv(bin, argv);
        _exit(127);
    }
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    TestsRun r;
    r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    lseek(out_fd, 0, SEEK_SET);
    lseek(err_fd, 0, SEEK_SET);
    r.out = slurp_fd(out_fd);
    r.err = slurp_fd(err_fd);
    close(out_fd); close(err_fd);
    unlink(out_path); unlink(err_path);
    free(argv);
    return r;
}

static const char *engine_path(void) {
    const char *bin = getenv("POSENC_RUN");
    return bin && *bin ? bin : "./run";
}

TestsRun tests_run_engine(const char *const *args) { return run_program(engine_path(), args, 0); }

TestsRun tests_run_engine_limited(const char *const *args, size_t bytes) {
    return run_program(engine_path(), args, bytes);
}

TestsRun tests_run_python(const char *const *args) {
    const char *python = getenv("PYTHON");
    return run_program(python && *python ? python : "/usr/bin/python3", args, 0);
}

void tests_run_free(TestsRun *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

TestsRun tests_expect_failure(const char *const *args, const char *needle) {
    TestsRun r = tests_run_engine(args);
    ck_assert_msg(r.status == 1, "exit status %d (want 1) for %s; stderr: %s", r.status, args[0],
                  r.err);
    ck_assert_msg(strncmp(r.err, "error: ", 7) == 0, "stderr does not start with 'error: ': %s",
                  r.err);
    char *nl = strchr(r.err, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "stderr is not exactly one line: %s", r.err);
    ck_assert_msg(strstr(r.err, needle), "stderr does not mention '%s': %s", needle, r.err);
    return r;
}

void tests_expect_error(const char *const *args, const char *needle) {
    TestsRun r = tests_expect_failure(args, needle);
    ck_assert_msg(r.out[0] == '\0', "output before the error: %s", r.out);
    tests_run_free(&r);
}

static char temp_paths[1024][64];
static int n_temp_paths;
static pid_t temp_owner; /* Check forks a child per test: only the creator cleans up */

static void remove_temps(void) {
    if (getpid() != temp_owner) return;
    for (int i = 0; i < n_temp_paths; i++) unlink(temp_paths[i]);
}

const char *tests_write_temp(const void *data, size_t n, const char *suffix) {
    ck_assert_int_lt(n_temp_paths, 1024);
    if (n_temp_paths == 0) {
        temp_owner = getpid();
        atexit(remove_temps);
    }
    char *p = temp_paths[n_temp_paths++];
    snprintf(p, sizeof temp_paths[0], "/tmp/posenc-test-XXXXXX%s", suffix ? suffix : "");
    int fd = mkstemps(p, suffix ? (int)strlen(suffix) : 0);
    ck_assert(fd >= 0);
    ck_assert(write(fd, data, n) == (ssize_t)n);
    close(fd);
    return p;
}

const char *tests_convert(const char *models_dir, const char *input, const char *const *extra) {
    char in[1024];
    snprintf(in, sizeof in, "%s/%s", models_dir, input);
    const char *out = tests_write_temp("", 0, ".gguf");
    const char *args[16] = {"tools/convert.py", in, out};
    int n = 3;
    for (int i = 0; extra && extra[i] && n < 15; i++) args[n++] = extra[i];
    args[n] = NULL;
    TestsRun r = tests_run_python(args);
    int ok = r.status == 0;
    if (!ok) fprintf(stderr, "tools/convert.py %s failed (status %d): %s", in, r.status, r.err);
    tests_run_free(&r);
    return ok ? out : NULL;
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

const char *tests_text_path(const char *models_dir, const char *name) {
    static char buf[4][1024];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/../text/%s", models_dir, name);
    return p;
}

char *tests_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    if (len) *len = (size_t)n;
    return buf;
}

int tests_load_models(TestsModel *out, const char *what) {
    static const char *const zoo[] = {"sinusoidal", "learned", "rope", "alibi", "none"};
    const char *dir = tests_models_dir(what);
    if (!dir) return 0;
    PosencError err;
    out[0].name = "stories260K";
    ck_assert_msg(model_load(&out[0].model, tests_model_path(dir, "stories260K/stories260K.bin"),
                             &err) == 0, "%s", err.msg);
    for (int i = 0; i < 5; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "zoo/%s", zoo[i]);
        const char *gguf = tests_convert(dir, rel, NULL);
        ck_assert_msg(gguf != NULL, "could not convert %s", rel);
        out[1 + i].name = zoo[i];
        ck_assert_msg(model_load(&out[1 + i].model, gguf, &err) == 0, "%s", err.msg);
    }
    return 1;
}

void tests_free_models(TestsModel *models) {
    for (int i = 0; i < TESTS_N_MODELS; i++) model_free(&models[i].model);
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
