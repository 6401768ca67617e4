/* The shared helpers of tests/common.h, which every suite's checks go
 * through: each accepts what it must and refuses what it must.  A refusal
 * is a failed Check assertion, so the refusals run as the tests of an inner
 * suite, each in a process of its own, and every one of them must end in a
 * failure (not a pass, not a crash). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "tests/common.h"

START_TEST(max_abs_diff_is_exact_and_keeps_nan) {
    const float a[] = {1.0f, 2.0f, 3.0f, -4.0f}, b[] = {1.0f, 2.5f, 2.0f, -4.25f};
    ck_assert_float_eq(tests_max_abs_diff(a, b, 4), 1.0f);
    ck_assert_float_eq(tests_max_abs_diff(a, b, 2), 0.5f);
    ck_assert_float_eq(tests_max_abs_diff(a, b, 0), 0.0f);
    const float nan_first[] = {NAN, 2.0f, 3.0f, -4.0f}, inf[] = {1.0f, INFINITY, 3.0f, -4.0f};
    ck_assert(isnan(tests_max_abs_diff(nan_first, b, 4)));
    ck_assert(isnan(tests_max_abs_diff(b, nan_first, 4)));
    ck_assert(isinf(tests_max_abs_diff(inf, a, 4)));
    ck_assert(isnan(tests_max_abs_diff(inf, inf, 4))); /* inf - inf */
}
END_TEST

/* Bytes with a NUL and no final newline, through a file and through a
 * program's stdin and stdout. */
START_TEST(files_and_programs_keep_every_byte) {
    static const char data[] = "a\0b\nc";
    const char *path = tests_write_temp(data, sizeof data - 1, ".bin");
    size_t n;
    char *back = tests_read_file(path, &n);
    ck_assert_uint_eq(n, sizeof data - 1);
    ck_assert(memcmp(back, data, n) == 0 && back[n] == '\0');
    free(back);
    const char *no_args[] = {NULL};
    TestsRun r = tests_run_program("cat", no_args, path);
    ck_assert_int_eq(r.status, 0);
    ck_assert_uint_eq(r.out_len, sizeof data - 1);
    ck_assert(memcmp(r.out, data, r.out_len) == 0);
    tests_run_free(&r);
    const char *fail[] = {"-c", "exit 3", NULL};
    r = tests_run_program("sh", fail, NULL);
    ck_assert_int_eq(r.status, 3);
    tests_run_free(&r);
}
END_TEST

START_TEST(remove_dir_removes_everything) {
    const char *dir = tests_temp_dir();
    char sub[64], file[96], fifo[64];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(file, sizeof file, "%s/file", sub);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    tests_write_file(file, "x", 1);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    tests_remove_dir(dir);
    struct stat st;
    ck_assert_int_eq(stat(dir, &st), -1);
}
END_TEST

/* Temporaries go when the process that made them exits: a child's at its
 * exit, with what is in them (so what a test makes goes with the test's
 * process), and its parent's not then (so what a suite's process makes
 * outlives each test). */
START_TEST(temporaries_go_with_their_process) {
    const char *parents_dir = tests_temp_dir();
    const char *names = tests_write_temp("", 0, NULL); /* where the child names its temporaries */
    fflush(NULL);
    pid_t child = fork();
    ck_assert(child >= 0);
    if (child == 0) {
        const char *dir = tests_temp_dir();
        char inside[64], both[160];
        snprintf(inside, sizeof inside, "%s/inside", dir);
        tests_write_file(inside, "x", 1);
        snprintf(both, sizeof both, "%s\n%s", dir, tests_write_temp("x", 1, NULL));
        tests_write_file(names, both, strlen(both));
        exit(EXIT_SUCCESS); /* as a test's process ends */
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child ended with %#x", status);
    char *childs = tests_read_file(names, NULL); /* the parent's file is still there */
    char *newline = strchr(childs, '\n');
    ck_assert_msg(newline != NULL, "the child named no temporaries: %s", childs);
    *newline = '\0';
    struct stat st;
    ck_assert_msg(stat(childs, &st) == -1, "the child's directory %s outlived it", childs);
    ck_assert_msg(stat(newline + 1, &st) == -1, "the child's file %s outlived it", newline + 1);
    ck_assert_msg(stat(parents_dir, &st) == 0 && S_ISDIR(st.st_mode), "the child removed %s",
                  parents_dir);
    free(childs);
}
END_TEST

/* What the refusing helpers accept: the controls of the refusals below. */
START_TEST(accepted) {
    tests_expect_file_error("/tmp/m.gguf: bad magic", "/tmp/m.gguf", "bad magic");
    tests_expect_file_error("/tmp/m.gguf: bad magic", "/tmp/m.gguf", NULL);
    const char *unknown[] = {"--frobnicate", NULL};
    tests_expect_error(unknown, "--frobnicate");
    const char *help[] = {"-h", NULL};
    tests_expect_success(help);
    const char *missing[] = {"/nonexistent/model.bin", "/tmp/out.gguf", NULL};
    tests_expect_convert_error(missing, "/nonexistent/model.bin");
}
END_TEST

/* Each case must fail the test it runs in. */
static void refuse(int i) {
    const char *help[] = {"-h", NULL}, *unknown[] = {"--frobnicate", NULL};
    const char *missing[] = {"/nonexistent/model.bin", "/tmp/out.gguf", NULL};
    const char *usage[] = {"--help", NULL};
    switch (i) {
    case 0: tests_expect_file_error("see /tmp/m.gguf: bad magic", "/tmp/m.gguf", NULL); break;
    case 1: tests_expect_file_error("/tmp/m.gguf bad magic", "/tmp/m.gguf", NULL); break;
    case 2: tests_expect_file_error("/tmp/m.gguf: bad\nmagic", "/tmp/m.gguf", NULL); break;
    case 3: tests_expect_file_error("/tmp/m.gguf: bad magic", "/tmp/m.gguf", "version"); break;
    case 4: tests_expect_error(help, "usage"); break;              /* exit 0 */
    case 5: tests_expect_error(unknown, "--pe"); break;            /* another needle */
    case 6: tests_expect_success(unknown); break;
    case 7: tests_expect_convert_error(usage, "usage"); break;      /* exit 0 */
    case 8: tests_expect_convert_error(missing, "bert"); break;
    case 9: free(tests_read_file("/nonexistent/file", NULL)); break;
    case 10: tests_remove_dir("/nonexistent/dir"); break;
    }
}
#define N_REFUSALS 11

START_TEST(refusal) {
#ifdef __SANITIZE_ADDRESS__
    __lsan_disable(); /* the failing check ends this process with its run unfreed */
#endif
    refuse(_i);
}
END_TEST

START_TEST(every_refusal_fails) {
    Suite *s = suite_create("refusals");
    TCase *tc = tcase_create("refusals");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, refusal, 0, N_REFUSALS);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK); /* a failure ends its own process, not this one */
    srunner_run_all(sr, CK_SILENT);
    TestResult **results = srunner_results(sr);
    ck_assert_int_eq(srunner_ntests_run(sr), N_REFUSALS);
    for (int i = 0; i < N_REFUSALS; i++) {
        TestResult *t = results[i];
        printf("refusal %d: %s\n", i, tr_msg(t));
        ck_assert_msg(tr_rtype(t) == CK_FAILURE, "refusal %d %s: %s", i,
                      tr_rtype(t) == CK_PASS ? "passed" : "did not fail cleanly", tr_msg(t));
    }
    free(results);
    srunner_free(sr);
}
END_TEST

int main(void) {
    Suite *s = suite_create("common");
    TCase *tc = tcase_create("helpers");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, max_abs_diff_is_exact_and_keeps_nan);
    tcase_add_test(tc, files_and_programs_keep_every_byte);
    tcase_add_test(tc, remove_dir_removes_everything);
    tcase_add_test(tc, temporaries_go_with_their_process);
    tcase_add_test(tc, accepted);
    tcase_add_test(tc, every_refusal_fails);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
