/* The README's commands run as written on a fresh clone (tests/cli/readme_commands.py
 * copies the tracked files to a temporary directory with ../shared beside it
 * and runs every ```sh block there, with ./run the binary under test).  The
 * controls show the runner can fail: a failing command fails it, and a
 * placeholder line or a `make` line is skipped, not run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common.h"

static const char *engine(void) {
    const char *bin = getenv("POSENC_RUN");
    return bin && *bin ? bin : "./run";
}

/* Runs the script on `markdown` with the shared directory beside the models. */
static TestsRun run_commands(const char *markdown, const char *models) {
    char shared[1024];
    snprintf(shared, sizeof shared, "%s/..", models);
    const char *args[] = {"tests/cli/readme_commands.py", markdown, "--run", engine(),
                          "--shared", shared, NULL};
    return tests_run_python(args);
}

/* Plain build only: the commands are a check of the documentation, and
 * under ASan they take ten times as long for no coverage the other suites
 * lack (they run the same modes on the same models). */
START_TEST(readme_commands_run) {
#ifdef __SANITIZE_ADDRESS__
    fprintf(stderr, "note: README commands run in the plain build of make test\n");
    return;
#endif
    const char *models = tests_models_dir("README commands");
    if (!models) return;
    TestsRun r = run_commands("README.md", models);
    ck_assert_msg(r.status == 0, "exit %d\n%s%s", r.status, r.out, r.err);
    ck_assert_msg(strstr(r.out, "all ") && strstr(r.out, " commands ran"), "%s", r.out);
    tests_run_free(&r);
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
}
END_TEST

int main(void) {
    Suite *s = suite_create("readme");
    TCase *tc = tcase_create("commands");
    tcase_set_timeout(tc, 1800);
    tcase_add_test(tc, runner_fails_and_skips);
    tcase_add_test(tc, readme_commands_run);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
