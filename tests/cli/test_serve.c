/* -m serve over HTTP (issue 33): tests/cli/serve_client.py starts the
 * server on stories260K and drives it with Python's urllib — /health,
 * /v1/models, tokenize/detokenize, greedy text equal to -m generate's byte
 * for byte, echo's log-probabilities equal to -m ppl --logits-out's within
 * 1e-5, seeds, stop strings, refusals (400, 404, 405, 413) after which it
 * still answers, SIGTERM ending it with exit 0; each with its control.  The
 * API itself, without sockets: tests/modes/test_serve_api.c.  The official
 * openai npm client (tests/cli/serve_openai.mjs) then drives a server of two
 * slots: echo's log-probabilities, greedy text, seeds, stops, chat streamed
 * against -m chat, two streams at once equal to each alone, a full queue's
 * 429, a client gone mid-stream freeing its slot.  tests/cli/serve_load.py
 * puts it under load and faults: 8 clients x 20 mixed requests each equal to
 * the same request alone with RSS flat, a client killed mid-stream, 1,000
 * malformed requests, slowloris connections dropped.  Here too the flags'
 * refusals, before any work. */
#include <string.h>

#include "tests/common.h"

/* Whether ./run serves (built with libmicrohttpd); skips the test if not. */
static int serve_built(const char *model, const char *tok) {
    const char *probe[] = {model, "-z", tok, "-m", "serve", "--host", "not-an-address", NULL};
    TestsRun p = tests_run_engine(probe);
    int without = strstr(p.err, "libmicrohttpd-dev") != NULL;
    tests_run_free(&p);
    if (without) tests_prerequisite_missing("-m serve", "./run was built without libmicrohttpd-dev");
    return !without;
}

START_TEST(test_serve_over_http) {
    const char *models = tests_models_dir("-m serve on stories260K");
    if (!models || !tests_python_available("-m serve's HTTP client")) return;
    const char *model = tests_model_path(models, "stories260K/stories260K.bin");
    const char *tok = tests_model_path(models, "stories260K/tok512.bin");
    /* a build without libmicrohttpd refuses the mode, naming the package */
    if (!serve_built(model, tok)) return;
    const char *args[] = {"tests/cli/serve_client.py", tests_engine_path(), model, tok, tests_temp_dir(), NULL};
    TestsRun r = tests_run_python(args);
    ck_assert_msg(r.status == 0, "serve_client.py failed (%d):\n%s%s", r.status, r.out, r.err);
    printf("%s", r.out);
    tests_run_free(&r);
}
END_TEST

START_TEST(test_serve_openai_client) {
    const char *models = tests_models_dir("-m serve with the openai client");
    if (!models) return;
    const char *model = tests_model_path(models, "stories260K/stories260K.bin");
    const char *tok = tests_model_path(models, "stories260K/tok512.bin");
    if (!serve_built(model, tok)) return;
    const char *modules = tests_npm_modules("the openai npm client");
    if (!modules) return;
    const char *args[] = {"tests/cli/serve_openai.mjs", modules, tests_engine_path(), model, tok,
                          tests_temp_dir(), NULL};
    TestsRun r = tests_run_program("node", args, NULL);
    ck_assert_msg(r.status == 0, "serve_openai.mjs failed (%d):\n%s%s", r.status, r.out, r.err);
    printf("%s", r.out);
    tests_run_free(&r);
}
END_TEST

START_TEST(test_serve_load) {
    const char *models = tests_models_dir("-m serve under load");
    if (!models || !tests_python_available("-m serve's load client")) return;
    const char *model = tests_model_path(models, "stories260K/stories260K.bin");
    const char *tok = tests_model_path(models, "stories260K/tok512.bin");
    if (!serve_built(model, tok)) return;
    const char *args[] = {"tests/cli/serve_load.py", tests_engine_path(), model, tok, NULL};
    TestsRun r = tests_run_python(args);
    ck_assert_msg(r.status == 0, "serve_load.py failed (%d):\n%s%s", r.status, r.out, r.err);
    printf("%s", r.out);
    tests_run_free(&r);
}
END_TEST

START_TEST(test_serve_flags) {
    const char *models = tests_models_dir("-m serve's flags");
    if (!models) return;
    const char *model = tests_model_path(models, "stories260K/stories260K.bin");
    const char *tok = tests_model_path(models, "stories260K/tok512.bin");
    const char *port[] = {model, "-z", tok, "-m", "serve", "--port", "65536", NULL};
    tests_expect_error(port, "--port");
    const char *elsewhere[] = {model, "-z", tok, "-m", "generate", "--port", "80", NULL};
    tests_expect_error(elsewhere, "--port");
    const char *slots[] = {model, "-z", tok, "-m", "serve", "--slots", "0", NULL};
    tests_expect_error(slots, "--slots");
    const char *queue[] = {model, "-z", tok, "-m", "serve", "--queue", "-1", NULL};
    tests_expect_error(queue, "--queue");
    const char *slots_elsewhere[] = {model, "-z", tok, "-m", "ppl", "--slots", "2", NULL};
    tests_expect_error(slots_elsewhere, "--slots");
    const char *host[] = {model, "-z", tok, "-m", "serve", "--host", "localhost:80", NULL};
    TestsRun r = tests_expect_failure(host, "--host");
    tests_run_free(&r);
    /* control: flags serve takes (--slots, the sampling defaults, the chat template) are not refused
     * for being there */
    const char *ctx[] = {model, "-z", tok, "-m", "serve", "--ctx", "64", "--slots", "2", "-t", "0", "-p", "0.5",
                         "--chat-template", "llama2", "--host", "bad", NULL};
    r = tests_expect_failure(ctx, "--host bad");
    tests_run_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("serve");
    TCase *tc = tcase_create("serve");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_serve_over_http);
    tcase_add_test(tc, test_serve_openai_client);
    tcase_add_test(tc, test_serve_load);
    tcase_add_test(tc, test_serve_flags);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
