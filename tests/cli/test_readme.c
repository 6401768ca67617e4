/* The documentation's commands run as written on a fresh clone
 * (tests/cli/readme_commands.py copies the tracked files to a temporary
 * directory with ../shared beside it and runs every ```sh block there, with
 * ./run the binary under test): README.md, CONTRIBUTING.md and every .md
 * file of docs/, which this suite lists itself so that no file can be left out,
 * each file on a copy of its own.  The controls show the runner can fail: a
 * failing command fails it, a placeholder line or a `make` line is skipped,
 * not run, and under --complete a list without one of docs/ is refused
 * before anything runs. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common.h"

#define MAX_DOCS 64

static const char *engine(void) {
    const char *bin = getenv("POSENC_RUN");
    return bin && *bin ? bin : "./run";
}

/* Runs the script on the markdown files (NULL-terminated), with the shared
 * directory beside the models; `complete` adds --complete. */
static TestsRun run_commands_list(const char *const *markdown, int complete, const char *models) {
    static char shared[1024];
    snprintf(shared, sizeof shared, "%s/..", models);
    const char *args[MAX_DOCS + 8];
    int n = 0;
    args[n++] = "tests/cli/readme_commands.py";
    if (complete) args[n++] = "--complete";
    for (int i = 0; markdown[i]; i++) {
        ck_assert_int_lt(n, MAX_DOCS);
        args[n++] = markdown[i];
    }
    args[n++] = "--run";
    args[n++] = engine();
    args[n++] = "--shared";
    args[n++] = shared;
    args[n] = NULL;
    return tests_run_python(args);
}

static TestsRun run_commands(const char *markdown, const char *models) {
    const char *list[] = {markdown, NULL};
    return run_commands_list(list, 0, models);
}

/* README.md, CONTRIBUTING.md and the .md files of docs/ (sorted), NULL-terminated; `g`
 * holds the docs' names until globfree. */
static int documentation(const char **out, glob_t *g) {
    int n = 0;
    out[n++] = "README.md";
    out[n++] = "CONTRIBUTING.md";
    int rc = glob("docs/*.md", 0, NULL, g);
    ck_assert_msg(rc == 0 && g->gl_pathc > 0, "no docs/*.md found (glob %d)", rc);
    ck_assert_int_lt(g->gl_pathc, MAX_DOCS - 3);
    for (size_t i = 0; i < g->gl_pathc; i++) out[n++] = g->gl_pathv[i];
    out[n] = NULL;
    return n;
}

/* Plain build only: the commands are a check of the documentation, and
 * under ASan they take ten times as long for no coverage the other suites
 * lack (they run the same modes on the same models). */
START_TEST(readme_commands_run) {
#ifdef __SANITIZE_ADDRESS__
    fprintf(stderr, "note: documentation commands run in the plain build of make test\n");
    return;
#endif
    const char *models = tests_models_dir("documentation commands");
    if (!models) return;
    const char *docs[MAX_DOCS];
    glob_t g;
    documentation(docs, &g);
    TestsRun r = run_commands_list(docs, 1, models);
    ck_assert_msg(r.status == 0, "exit %d\n%s%s", r.status, r.out, r.err);
    ck_assert_msg(strstr(r.out, "all ") && strstr(r.out, " commands ran"), "%s", r.out);
    /* every file was run, each named with its count */
    for (int i = 0; docs[i]; i++) {
        char named[256];
        snprintf(named, sizeof named, "%s: ", docs[i]);
        ck_assert_msg(strstr(r.out, named), "%s did not run:\n%s", docs[i], r.out);
    }
    fputs(r.out, stdout);
    fflush(stdout);
    tests_run_free(&r);
    globfree(&g);
}
END_TEST

START_TEST(runner_fails_and_skips) {
    const char *models = tests_models_dir("README command runner");
    if (!models) return;
    const char *bad = "text\n```sh\n./run --version-of-nothing\n```\n";
    TestsRun r = run_commands(tests_write_temp(bad, strlen(bad), ".md"), models);
    ck_assert_msg(r.status == 1 && strstr(r.out, "FAIL"), "a failing command passed: %s", r.out);
    tests_run_free(&r);

    /* a placeholder and a make line are skipped; a continuation is one
     * command; the copy holds the repository's files */
    const char *skips = "```sh\n./run <model.gguf> -m inspect\nmake test\n./run -m tokenize \\\n"
                        "  -z ../shared/models/llama2-tokenizer/tokenizer.bin -i hi\n"
                        "test -f tools/convert.py\n```\n";
    r = run_commands(tests_write_temp(skips, strlen(skips), ".md"), models);
    ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
    ck_assert_msg(strstr(r.out, "2 commands in 1 blocks, 2 skipped"), "%s", r.out);
    tests_run_free(&r);

    /* each file has a copy of its own: what one file's command wrote is not
     * there for the next file */
    const char *writes = "```sh\ntouch left-by-the-first-file\n```\n";
    const char *reads = "```sh\ntest ! -e left-by-the-first-file\n```\n";
    char first[1024];
    snprintf(first, sizeof first, "%s", tests_write_temp(writes, strlen(writes), ".md"));
    const char *pair[] = {first, tests_write_temp(reads, strlen(reads), ".md"), NULL};
    r = run_commands_list(pair, 0, models);
    ck_assert_msg(r.status == 0 && strstr(r.out, "all 2 commands ran (2 files)"), "%s%s", r.out,
                  r.err);
    tests_run_free(&r);
}
END_TEST

/* --complete refuses a list that leaves out a documentation file, naming
 * it, before running anything; the full list is accepted (the run above). */
START_TEST(runner_refuses_a_missing_doc) {
    const char *models = tests_models_dir("README command runner");
    if (!models) return;
    const char *docs[MAX_DOCS];
    glob_t g;
    int n = documentation(docs, &g);
    /* control: each file left out in turn (README.md, CONTRIBUTING.md, a doc) */
    const int drop[] = {0, 1, n - 1};
    for (size_t d = 0; d < sizeof drop / sizeof *drop; d++) {
        const char *list[MAX_DOCS];
        int k = 0;
        for (int i = 0; i < n; i++)
            if (i != drop[d]) list[k++] = docs[i];
        list[k] = NULL;
        TestsRun r = run_commands_list(list, 1, models);
        ck_assert_msg(r.status == 1 && strstr(r.out, "not passed: ") &&
                          strstr(r.out, docs[drop[d]]),
                      "a list without %s was accepted: %s%s", docs[drop[d]], r.out, r.err);
        ck_assert_msg(!strstr(r.out, "commands in"), "it ran commands first: %s", r.out);
        tests_run_free(&r);
    }
    globfree(&g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("readme");
    TCase *tc = tcase_create("commands");
    tcase_set_timeout(tc, 1800);
    tcase_add_test(tc, runner_fails_and_skips);
    tcase_add_test(tc, runner_refuses_a_missing_doc);
    tcase_add_test(tc, readme_commands_run);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
