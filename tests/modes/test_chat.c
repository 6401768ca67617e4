/* -m chat: the cache carries the conversation exactly (after two turns its
 * tokens are the template's transcript and its logits those of one
 * prefill of it), a conversation longer than the cache keeps the system
 * prompt's cells through context shifts, and the command line drives it
 * through stdin (turns whose replies are -m generate's greedy text for the
 * rendered transcript, --stop, EOF, errors) and a pseudo-terminal (Ctrl-C).
 * On stories260K, whose llama2.c vocabulary has no special tokens but BOS
 * and EOS: the formats' markers (llama2, gemma, chatml) are plain text. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_template.h"
#include "modes/chat.h"
#include "tests/common.h"

typedef struct {
    Model model;
    Tokenizer tok;
    Context ctx;
    Sampler sampler;
    JinjaTemplate *template;
    ChatOptions opt;
    ChatSession session;
} ChatFixture;

static int chat_fixture(ChatFixture *f, const char *format, const char *system, int n_ctx, int max_reply,
                        int keep) {
    const char *models = tests_models_dir("chat on stories260K");
    if (!models) return 0;
    tests_load_model(&f->model, tests_model_path(models, "stories260K/stories260K.bin"));
    tests_load_tokenizer(&f->tok, tests_model_path(models, "stories260K/tok512.bin"), 512);
    tests_build_context(&f->ctx, &f->model, &f->model.pe, n_ctx);
    sampler_build(&f->sampler, 512, 0.0f, 0.9f, 0, 1);
    PosencError err;
    const char *text = chat_template_builtin(format);
    f->template = jinja_parse(text, strlen(text), &err);
    ck_assert_msg(f->template != NULL, "%s", err.msg);
    f->opt = (ChatOptions){.template = f->template, .system_prompt = system, .max_reply = max_reply,
                           .keep = keep, .shift = CONTEXT_SHIFT_ON};
    ck_assert_msg(chat_session_init(&f->session, &f->ctx, &f->tok, &f->sampler, &f->opt, &err) == 0, "%s",
                  err.msg);
    return 1;
}

static void chat_fixture_free(ChatFixture *f) {
    chat_session_free(&f->session);
    jinja_free(f->template);
    sampler_free(&f->sampler);
    context_free(&f->ctx);
    tokenizer_free(&f->tok);
    model_free(&f->model);
}

static void turn(ChatFixture *f, const char *text) {
    PosencError err;
    FILE *devnull = fopen("/dev/null", "w");
    ck_assert_int_eq(chat_turn(&f->session, text, devnull, &err), 0);
    fclose(devnull);
}

/* Last logits of one prefill of ids in a fresh context. */
static float *prefill_logits(const ChatFixture *f, const int *ids, int n) {
    Context ctx;
    tests_build_context(&ctx, &f->model, &f->model.pe, 512);
    const float *logits = context_prefill(&ctx, ids, n, 0);
    float *copy = malloc(512 * sizeof *copy);
    memcpy(copy, logits, 512 * sizeof *copy);
    context_free(&ctx);
    return copy;
}

START_TEST(two_turns_leave_the_transcript_in_the_cache) {
    ChatFixture f;
    if (!chat_fixture(&f, "llama2", "You are a storyteller.", 512, 24, -1)) return;
    turn(&f, "Tell me about a cat.");
    turn(&f, "What did the cat eat?");
    ChatSession *s = &f.session;
    ck_assert_int_eq(s->n_messages, 5);

    /* The cache holds the rendering of [system, user, assistant, user] with
     * the generation prompt, token for token, then the second reply. */
    size_t len;
    PosencError err;
    s->n_messages = 4;   /* the conversation before the second reply */
    char *text = chat_render(s, 1, &len, &err);
    s->n_messages = 5;
    ck_assert_msg(text != NULL, "%s", err.msg);
    int *ids, n_ids;
    ck_assert_int_eq(chat_format_encode(&s->format, text, len, &ids, &n_ids, &err), 0);
    free(text);
    ck_assert_int_gt(s->n_seen, n_ids);
    for (int i = 0; i < n_ids; i++)
        ck_assert_msg(s->seen[i] == ids[i], "transcript token %d: cache %d, template %d", i, s->seen[i], ids[i]);
    ck_assert_int_eq(f.ctx.cache.n_used, s->n_seen);   /* no shift in 512 cells */
    for (int i = 0; i < s->n_seen; i++) {
        ck_assert_int_eq(f.ctx.cache.token[i], s->seen[i]);
        ck_assert_int_eq(f.ctx.cache.pos[i], i);
    }

    /* Its logits are those of one prefill of the whole transcript: 1e-4
     * covers the float sums of chunked against one-chunk attention (the
     * difference measured here is ~1e-6). */
    float *reference = prefill_logits(&f, s->seen, s->n_seen);
    float d = tests_max_abs_diff(reference, s->logits, 512);
    ck_assert_msg(d <= 1e-4f, "chat logits differ from one prefill by %g", (double)d);
    free(reference);
    /* control: the same prefill without the last token is far off */
    reference = prefill_logits(&f, s->seen, s->n_seen - 1);
    d = tests_max_abs_diff(reference, s->logits, 512);
    ck_assert_msg(d > 1e-2f, "one token less changed the logits by only %g", (double)d);
    free(reference);
    free(ids);
    chat_fixture_free(&f);
}
END_TEST

/* 128 cells and turns of ~30 tokens: the conversation outgrows the cache,
 * context shifts discard old turns, and the cells of the system prompt
 * (and BOS and the turn header the template repeats) stay at positions 0..keep-1. */
static const char *const long_turns[] = {"Tell me a story.", "What happened next?", "And then?",
                                         "Who was there?", "How did it end?", "Tell me another one."};

START_TEST(a_long_conversation_keeps_the_system_prompt) {
    ChatFixture f;
    const char *system = "You are a storyteller who loves cats.";
    if (!chat_fixture(&f, "llama2", system, 128, 20, -1)) return;
    ChatSession *s = &f.session;
    int keep = s->keep;
    /* keep covers BOS, the [INST] header and the whole system prompt */
    int *sys_ids, n_sys;
    PosencError err;
    ck_assert_int_eq(tokenizer_encode_alloc(&f.tok, system, strlen(system), 0, 0, &sys_ids, &n_sys, &err), 0);
    ck_assert_int_ge(keep, n_sys + 2);
    ck_assert_int_lt(keep, 64);
    free(sys_ids);
    int first_cells[64];
    for (int t = 0; t < 6; t++) {
        turn(&f, long_turns[t]);
        if (t == 0) memcpy(first_cells, f.ctx.cache.token, (size_t)keep * sizeof *first_cells);
    }
    ck_assert_msg(s->n_seen > 2 * f.ctx.cache.n_ctx, "the conversation (%d tokens) never outgrew the cache",
                  s->n_seen);
    for (int i = 0; i < keep; i++) {
        ck_assert_int_eq(f.ctx.cache.token[i], first_cells[i]);
        ck_assert_int_eq(f.ctx.cache.pos[i], i);
    }
    /* and the cells after keep are the latest transcript tokens, in order */
    int suffix = f.ctx.cache.n_used - keep;
    for (int i = 0; i < suffix; i++)
        ck_assert_int_eq(f.ctx.cache.token[keep + i], s->seen[s->n_seen - suffix + i]);
    chat_fixture_free(&f);

    /* control: with --keep 0 the shifts discard the system prompt's cells */
    if (!chat_fixture(&f, "llama2", system, 128, 20, 0)) return;
    for (int t = 0; t < 6; t++) turn(&f, long_turns[t]);
    int same = 0;
    while (same < keep && f.ctx.cache.token[same] == first_cells[same]) same++;
    ck_assert_msg(same < keep, "with keep 0 the first %d cells still hold the system prompt", keep);
    chat_fixture_free(&f);
}
END_TEST

/* ---- the command line -------------------------------------------------------------------- */
#define STORIES(models, rel) tests_model_path(models, "stories260K/" rel)

/* What -m generate prints after the echoed prompt, greedily, for at most
 * `reply_tokens` tokens (malloc'd, without the final newline).  Generate
 * puts BOS first, as the gemma template's bos_token opens the transcript. */
static char *greedy_reply(const char *models, const char *prompt, int reply_tokens) {
    /* -n counts the prompt's tokens: step 0's "pos" is its last one's (BOS is
     * at 0), found with a run that generates at least one token (a token is
     * at least one byte; the dummy prefix may add one). */
    char n[32];
    snprintf(n, sizeof n, "%zu", strlen(prompt) + 2);
    const char *count[] = {STORIES(models, "stories260K.bin"), "-z", STORIES(models, "tok512.bin"), "-t", "0",
                           "-n", n, "-i", prompt, "--json", NULL};
    TestsRun r = tests_run_engine_ok(count);
    double pos = tests_json_number(r.out, "pos");
    ck_assert_msg(pos >= 1, "no first step: %s", r.out);
    tests_run_free(&r);
    snprintf(n, sizeof n, "%d", (int)pos + reply_tokens);
    const char *args[] = {STORIES(models, "stories260K.bin"), "-z", STORIES(models, "tok512.bin"), "-t", "0",
                          "-n", n, "-i", prompt, NULL};
    r = tests_run_engine_ok(args);
    size_t echo = strlen(prompt), len = strlen(r.out);
    ck_assert_msg(len > echo && !strncmp(r.out, prompt, echo) && r.out[len - 1] == '\n',
                  "generate did not echo the prompt: '%s'", r.out);
    char *reply = strndup(r.out + echo, len - echo - 1);
    tests_run_free(&r);
    return reply;
}

/* s without leading and trailing whitespace, as the template's `trim`
 * (malloc'd). */
static char *trimmed(const char *s) {
    const char *end = s + strlen(s);
    while (isspace((unsigned char)*s)) s++;
    while (end > s && isspace((unsigned char)end[-1])) end--;
    return strndup(s, (size_t)(end - s));
}

/* Two turns through stdin (an empty line between them is no turn, EOF ends
 * the chat): each reply is the engine's greedy continuation of the
 * conversation as the template renders it, the second one with the first
 * exchange in it.  gemma's rendering has BOS only at its start, so -i can
 * state each whole transcript (llama2's closes each reply with EOS and opens
 * each turn with BOS, which text cannot spell in a llama2.c vocabulary). */
#define CHAT_REPLY_TOKENS 16
START_TEST(cli_two_turns_and_eof) {
    const char *models = tests_models_dir("chat CLI");
    if (!models) return;
    const char *input = tests_write_temp("Tell me a story.\n\nWhat next?\n", 29, ".txt");
    char n[16];
    snprintf(n, sizeof n, "%d", CHAT_REPLY_TOKENS);
    const char *args[] = {STORIES(models, "stories260K.bin"), "-z", STORIES(models, "tok512.bin"), "-m", "chat",
                          "--chat-template", "gemma", "-y", "Be kind.", "-t", "0", "-n", n, NULL};
    TestsRun r = tests_run_engine_input(args, input);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_str_eq(r.err, "");

    /* gemma puts the system prompt at the start of the first user turn */
    static const char first_turn[] = "<start_of_turn>user\nBe kind.\n\nTell me a story.<end_of_turn>\n"
                                     "<start_of_turn>model\n";
    char *reply1 = greedy_reply(models, first_turn, CHAT_REPLY_TOKENS), *said = trimmed(reply1);
    size_t cap = strlen(first_turn) + strlen(said) + 128;
    char *second_turn = malloc(cap);
    snprintf(second_turn, cap, "%s%s<end_of_turn>\n<start_of_turn>user\nWhat next?<end_of_turn>\n"
             "<start_of_turn>model\n", first_turn, said);
    char *reply2 = greedy_reply(models, second_turn, CHAT_REPLY_TOKENS);
    /* one line per reply, nothing else: no "> " prompt without a terminal */
    size_t want_len = strlen(reply1) + strlen(reply2) + 3;
    char *want = malloc(want_len);
    snprintf(want, want_len, "%s\n%s\n", reply1, reply2);
    ck_assert_msg(!strcmp(r.out, want), "chat printed\n'%s'\nthe greedy replies to its transcripts are\n'%s'",
                  r.out, want);

    /* control: without the first exchange the second question gets another
     * reply, so the comparison above sees the history */
    char *fresh = greedy_reply(models, "<start_of_turn>user\nBe kind.\n\nWhat next?<end_of_turn>\n"
                                       "<start_of_turn>model\n", CHAT_REPLY_TOKENS);
    ck_assert_msg(strcmp(fresh, reply2), "'%s' is also the reply without the first exchange", fresh);
    free(fresh);
    free(want);
    free(reply2);
    free(second_turn);
    free(said);
    free(reply1);
    tests_run_free(&r);
}
END_TEST

START_TEST(cli_stop_string_ends_the_reply) {
    const char *models = tests_models_dir("chat CLI");
    if (!models) return;
    const char *input = tests_write_temp("Tell me a story.\n", 17, ".txt");
    const char *base[] = {STORIES(models, "stories260K.bin"), "-z", STORIES(models, "tok512.bin"), "-m", "chat",
                          "--chat-template", "llama2", "-t", "0", "-n", "40", NULL};
    TestsRun full = tests_run_engine_input(base, input);
    ck_assert_int_eq(full.status, 0);
    /* stop at 4 bytes taken from the middle of the greedy reply: the reply
     * ends where they first occur, and they are not shown */
    ck_assert_msg(strlen(full.out) > 16, "a short reply: '%s'", full.out);
    char stop[5];
    memcpy(stop, full.out + 10, 4);
    stop[4] = 0;
    const char *at = strstr(full.out, stop);
    const char *args[] = {STORIES(models, "stories260K.bin"), "-z", STORIES(models, "tok512.bin"), "-m", "chat",
                          "--chat-template", "llama2", "-t", "0", "-n", "40", "--stop", stop, "--stop", "zzz", NULL};
    TestsRun cut = tests_run_engine_input(args, input);
    ck_assert_int_eq(cut.status, 0);
    size_t kept = (size_t)(at - full.out);
    ck_assert_msg(strlen(cut.out) == kept + 1 && !strncmp(cut.out, full.out, kept) && cut.out[kept] == '\n',
                  "with --stop '%s': '%s', without: '%s'", stop, cut.out, full.out);
    tests_run_free(&full);
    tests_run_free(&cut);
}
END_TEST

START_TEST(cli_refusals) {
    const char *models = tests_models_dir("chat CLI");
    if (!models) return;
    const char *m = STORIES(models, "stories260K.bin"), *z = STORIES(models, "tok512.bin");
    const char *no_template[] = {m, "-z", z, "-m", "chat", NULL};
    tests_expect_error(no_template, "has no chat template: name one with --chat-template (chatml|llama2");
    const char *bad_name[] = {m, "-z", z, "-m", "chat", "--chat-template", "no-such-format", NULL};
    tests_expect_error(bad_name, "--chat-template: 'no-such-format' is neither a built-in format");
    const char *bad_file = tests_write_temp("{% for m in messages %}", 23, ".jinja");
    const char *bad_syntax[] = {m, "-z", z, "-m", "chat", "--chat-template", bad_file, NULL};
    tests_expect_error(bad_syntax, "line 1: 'for' is never closed");
    const char *raising = tests_write_temp("{{ raise_exception('System role not supported') }}", 50, ".jinja");
    const char *raise_args[] = {m, "-z", z, "-m", "chat", "--chat-template", raising, NULL};
    tests_expect_error(raise_args, "the template raised an exception: System role not supported");
    const char *y_generate[] = {m, "-z", z, "-y", "x", NULL};
    tests_expect_error(y_generate, "-y is not used by -m generate");
    const char *empty_stop[] = {m, "-z", z, "-m", "chat", "--chat-template", "chatml", "--stop", "", NULL};
    tests_expect_error(empty_stop, "--stop: an empty stop string");
    const char *tiny_ctx[] = {m, "-z", z, "-m", "chat", "--chat-template", "llama2", "-y",
                              "A long system prompt that cannot fit in eight cells.", "--ctx", "8", NULL};
    tests_expect_error(tiny_ctx, "raise --ctx or shorten -y");
}
END_TEST

/* A GGUF carries its template (convert.py --chat-template): -m chat uses it
 * without being told, and the first chunk the model sees is its rendering. */
START_TEST(cli_template_from_the_gguf) {
    const char *models = tests_models_dir("chat CLI");
    if (!models) return;
    const char *chatml = chat_template_builtin("chatml");
    const char *file = tests_write_temp(chatml, strlen(chatml), ".jinja");
    const char *extra[] = {"--tokenizer", STORIES(models, "tok512.bin"), "--chat-template", file, NULL};
    const char *gguf = tests_convert(models, "stories260K/stories260K.bin", extra);
    ck_assert_ptr_nonnull(gguf);
    const char *input = tests_write_temp("Hi there\n", 9, ".txt");
    const char *args[] = {gguf, "-m", "chat", "-t", "0", "-n", "8", "--trace-positions", NULL};
    TestsRun r = tests_run_engine_input(args, input);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.err, "[pos] q=0-41 (42 tokens) ' <|im_start|>user\\nHi there<|im_end|>\\n<|im_start|'"),
                  "first chunk: %s", r.err);
    tests_run_free(&r);
    /* control: the same file without a template is refused */
    const char *plain_extra[] = {"--tokenizer", STORIES(models, "tok512.bin"), NULL};
    const char *plain = tests_convert(models, "stories260K/stories260K.bin", plain_extra);
    const char *plain_args[] = {plain, "-m", "chat", NULL};
    tests_expect_error(plain_args, "has no chat template");
}
END_TEST

/* Ctrl-C in a terminal: the first ends the reply and returns to the
 * prompt, the second (at the prompt) ends the chat cleanly (status 0). */
START_TEST(cli_ctrl_c_in_a_terminal) {
    const char *models = tests_models_dir("chat CLI");
    if (!models || !tests_python_available("the chat pseudo-terminal test")) return;
    const char *args[] = {"tests/modes/chat_pty.py", "ctrl-c", tests_engine_path(),
                          STORIES(models, "stories260K.bin"), STORIES(models, "tok512.bin"), NULL};
    TestsRun r = tests_run_python(args);
    ck_assert_msg(r.status == 0, "status %d\nstdout: %s\nstderr: %s", r.status, r.out, r.err);
    tests_run_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("chat");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, two_turns_leave_the_transcript_in_the_cache);
    tcase_add_test(tc, a_long_conversation_keeps_the_system_prompt);
    tcase_add_test(tc, cli_two_turns_and_eof);
    tcase_add_test(tc, cli_stop_string_ends_the_reply);
    tcase_add_test(tc, cli_refusals);
    tcase_add_test(tc, cli_template_from_the_gguf);
    tcase_add_test(tc, cli_ctrl_c_in_a_terminal);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
