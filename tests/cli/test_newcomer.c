/* What a newcomer from llama.cpp or llama2.c types, answered as they would
 * expect (issue 34's walk-through, each with its exact command):
 *  - llama.cpp's spellings that mean the same here (--temp, -c, --top-p,
 *    --top-k, --seed, --ctx=64) give exactly the run of posenc's own flag;
 *    control: another value of the same flag gives another run;
 *  - those that mean something else (-cnv, -p TEXT, -m MODEL) are one error
 *    naming what to write instead;
 *  - the seed a run used is printed (summary line, --json), and -s with it
 *    repeats the text; control: the next seed does not;
 *  - output paths (--csv, --svg, --html, --logits-out) are checked before
 *    any work: an error and nothing on stdout;
 *  - a RoPE scaling that would do nothing (factor 1, or a factor without a
 *    scaling) is an error naming the flags; control: with a factor it runs;
 *  - generate says when -n cut the prompt and when the context shifted;
 *    control: a run where neither happens says neither;
 *  - a file of another kind (an image, README.md, a safetensors file, a
 *    Hugging Face directory, a vocabulary-only GGUF as the model; merges.txt
 *    as -z) is named for what it is, with what to pass instead; a -z
 *    directory holding a tokenizer.model reads it; control: a real model
 *    and tokenizer still load;
 *  - -m tokenize reads stdin when given no -i/-f, and --json gives each
 *    line's ids and pieces (the same as the plain and --pieces output);
 *    -m ppl scores -i TEXT as it scores the same text from -f; control:
 *    another text scores otherwise;
 *  - chat on the zoo's RoPE model (a vocabulary without '<'): a turn that
 *    cannot be encoded, or that is longer than the context, is skipped with
 *    a warning naming the character and the template, and the next turn's
 *    reply is exactly the reply it gets alone (control: a different turn
 *    gets another); typed in a pseudo-terminal (tests/modes/chat_pty.py),
 *    the screen shows the warning, then that reply, and Ctrl-D ends the
 *    chat (control: the good turn alone, no warning); a built-in template
 *    the vocabulary cannot write is one error naming it and its text;
 *    --chat-template takes a tokenizer_config.json (the "default" of its
 *    list) as its template file, and refuses a binary; -n 0 ends on a
 *    vocabulary without an end-of-turn token;
 *  - -m ppl shows its running NLL on stderr, as a file too, and its table
 *    fits 100 columns (a longer label on a line of its own); Ctrl-C prints
 *    the table of what was scored and exits 130; control: an uninterrupted
 *    run scores every window; in the study (a --ctx list, several models)
 *    Ctrl-C prints the study table of what was scored, '-' for the window
 *    and the model not reached, and exits 130; control: uninterrupted, no
 *    '-';
 *  - smaller things: --ctx 1 is blamed on --ctx, not on --keep 0; Ctrl-C
 *    in generate still ends the text's line and prints the summary (exit
 *    130); the --html pages say what their own charts answer to;
 *  - -m bench says "1 thread", its table's bars line up (the '±' is one
 *    column), and footnotes say what "of bw" above 100% means and when one
 *    thread may be faster; control: "2 threads";
 *  - --version. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common.h"

static const char *models;
static char model[1024], tok[1024];

static void setup(void) {
    models = tests_models_dir("the newcomer's commands on stories260K");
    if (!models) return;
    snprintf(model, sizeof model, "%s", tests_model_path(models, "stories260K/stories260K.bin"));
    snprintf(tok, sizeof tok, "%s", tests_model_path(models, "stories260K/tok512.bin"));
}

/* stdout of a successful run of MODEL followed by `args` (at most 10); a
 * mode that reads text gets -z TOK too. */
static char *stdout_of(const char *const *args) {
    int inspect = !strcmp(args[0], "-m") && !strcmp(args[1], "inspect");
    const char *full[14] = {model, "-z", tok};
    int n = inspect ? 1 : 3, first = n;
    for (; args[n - first] && n < 13; n++) full[n] = args[n - first];
    full[n] = NULL;
    TestsRun r = tests_run_engine_ok(full);
    char *out = strdup(r.out);
    tests_run_free(&r);
    return out;
}

/* The alias and posenc's own spelling give the same output; another value
 * of the flag gives another (the control). */
static void expect_alias(const char *const *alias, const char *const *own,
                         const char *const *other) {
    char *a = stdout_of(alias), *b = stdout_of(own), *c = stdout_of(other);
    ck_assert_msg(!strcmp(a, b), "%s differs from %s:\n%s\n---\n%s", alias[0], own[0], a, b);
    ck_assert_msg(strcmp(a, c) != 0, "control: %s %s gave the same output", other[0], other[1]);
    free(a);
    free(b);
    free(c);
}

START_TEST(llamacpp_spellings_that_mean_the_same) {
    if (!models) return;
    const char *temp[] = {"--temp", "0", "-n", "40", "-i", "Once", NULL};
    const char *t[] = {"-t", "0", "-n", "40", "-i", "Once", NULL};
    const char *t1[] = {"-t", "1", "-s", "7", "-n", "40", "-i", "Once", NULL};
    expect_alias(temp, t, t1);
    const char *seed[] = {"--seed", "4", "-n", "40", "-i", "Once", NULL};
    const char *s[] = {"-s", "4", "-n", "40", "-i", "Once", NULL};
    const char *s5[] = {"-s", "5", "-n", "40", "-i", "Once", NULL};
    expect_alias(seed, s, s5);
    const char *top_p[] = {"--top-p", "0.5", "-s", "3", "-n", "40", "-i", "Once", NULL};
    const char *p[] = {"-p", "0.5", "-s", "3", "-n", "40", "-i", "Once", NULL};
    const char *p1[] = {"-p", "1", "-s", "3", "-n", "40", "-i", "Once", NULL};
    expect_alias(top_p, p, p1);
    const char *top_k[] = {"--top-k", "1", "-s", "3", "-n", "40", "-i", "Once", NULL};
    const char *k[] = {"-k", "1", "-s", "3", "-n", "40", "-i", "Once", NULL};
    const char *k0[] = {"-k", "0", "-s", "3", "-n", "40", "-i", "Once", NULL};
    expect_alias(top_k, k, k0);
    const char *c[] = {"-m", "inspect", "-c", "64", NULL};
    const char *ctx[] = {"-m", "inspect", "--ctx", "64", NULL};
    const char *ctx32[] = {"-m", "inspect", "--ctx", "32", NULL};
    expect_alias(c, ctx, ctx32);
    const char *ctx_eq[] = {"-m", "inspect", "--ctx=64", NULL};
    expect_alias(ctx_eq, ctx, ctx32);
    /* an alias and its flag are one flag */
    const char *twice[] = {model, "-z", tok, "--temp", "0", "-t", "0", NULL};
    tests_expect_error(twice, "-t is given twice");
}
END_TEST

START_TEST(llamacpp_spellings_that_differ) {
    if (!models) return;
    const char *cnv[] = {model, "-z", tok, "-cnv", NULL};
    tests_expect_error(cnv, "here: -m chat");
    const char *p[] = {model, "-z", tok, "-p", "ROMEO:", NULL};
    tests_expect_error(p, "the prompt is -i TEXT (llama.cpp's -p)");
    const char *m[] = {"-m", model, NULL};
    tests_expect_error(m, "the model path goes first");
    const char *switch_value[] = {model, "-z", tok, "--json=1", NULL};
    tests_expect_error(switch_value, "--json takes no value");
    const char *unknown[] = {model, "-z", tok, "--tempp", "0", NULL};
    tests_expect_error(unknown, "unknown flag '--tempp' (see ");
    /* -t 8, llama.cpp's eight threads, runs at temperature 8 with a warning; -t 0.8 without */
    const char *t8[] = {model, "-z", tok, "-t", "8", "-n", "4", "-i", "Once", NULL};
    TestsRun r = tests_run_engine_ok(t8);
    ck_assert_msg(strstr(r.err, "warning: -t 8 is the temperature (llama.cpp's -t is the thread "
                                "count: --threads 8)"), "%s", r.err);
    tests_run_free(&r);
    const char *t08[] = {model, "-z", tok, "-t", "0.8", "-n", "4", "-i", "Once", NULL};
    r = tests_run_engine_ok(t08);
    ck_assert_msg(!strstr(r.err, "warning"), "%s", r.err);
    tests_run_free(&r);
}
END_TEST

/* The seed after "seed " in `text`, or 0. */
static unsigned long long seed_in(const char *text) {
    const char *at = strstr(text, "; seed ");
    return at ? strtoull(at + 7, NULL, 10) : 0;
}

START_TEST(the_seed_is_printed_and_repeats_the_run) {
    if (!models) return;
    const char *first[] = {model, "-z", tok, "-n", "60", "-i", "Once", NULL};
    TestsRun a = tests_run_engine_ok(first);
    unsigned long long seed = seed_in(a.err);
    ck_assert_msg(seed > 0, "no seed in the summary: %s", a.err);
    char s[32], next[32];
    snprintf(s, sizeof s, "%llu", seed);
    snprintf(next, sizeof next, "%llu", seed + 1);
    const char *again[] = {model, "-z", tok, "-n", "60", "-i", "Once", "-s", s, NULL};
    TestsRun b = tests_run_engine_ok(again);
    ck_assert_msg(!strcmp(a.out, b.out), "-s %s did not repeat the run:\n%s\n%s", s, a.out, b.out);
    ck_assert_msg(seed_in(b.err) == seed, "%s", b.err);
    const char *other[] = {model, "-z", tok, "-n", "60", "-i", "Once", "-s", next, NULL};
    TestsRun c = tests_run_engine_ok(other);
    ck_assert_msg(strcmp(a.out, c.out) != 0, "control: seed %s gave the same text", next);
    /* runs started together get seeds of their own */
    TestsRun d = tests_run_engine_ok(first);
    ck_assert_msg(seed_in(d.err) != seed, "two runs drew seed %llu", seed);
    const char *json[] = {model, "-z", tok, "-n", "8", "-i", "Once", "-s", s, "--json", NULL};
    TestsRun e = tests_run_engine_ok(json);
    ck_assert_msg(tests_json_number(strstr(e.out, "\"type\":\"summary\""), "seed") == (double)seed,
                  "%s", e.out);
    tests_run_free(&a);
    tests_run_free(&b);
    tests_run_free(&c);
    tests_run_free(&d);
    tests_run_free(&e);
}
END_TEST

START_TEST(output_paths_are_checked_before_work) {
    if (!models) return;
    const char *text = tests_write_temp("Once upon a time there was a cat. ", 34, ".txt");
    const char *csv[] = {model, "-z", tok, "-m", "ppl", "-f", text, "--csv", "/nonexistent/x.csv",
                         NULL};
    tests_expect_error(csv, "--csv: cannot write '/nonexistent/x.csv'");
    const char *svg[] = {model, "-z", tok, "-m", "ppl", "-f", text, "--svg", "/tmp", NULL};
    tests_expect_error(svg, "--svg: '/tmp' is a directory");
    const char *pe_svg[] = {model, "-m", "pe", "--svg", "/nonexistent/pe", NULL};
    tests_expect_error(pe_svg, "--svg: cannot write '/nonexistent/pe'");
    const char *att[] = {model, "-z", tok, "-m", "attention", "-i", "Once", "--svg",
                         "/nonexistent/a", NULL};
    tests_expect_error(att, "--svg: cannot write '/nonexistent/a'");
    const char *html[] = {model, "-m", "pe", "--html", "/nonexistent/p.html", NULL};
    tests_expect_error(html, "--html: cannot write '/nonexistent/p.html'");
    const char *logits[] = {model, "-z", tok, "-n", "4", "--logits-out", "", NULL};
    tests_expect_error(logits, "--logits-out: an empty path");
    /* control: a writable path runs */
    const char *ok[] = {model, "-m", "pe", "--ctx", "8", "--html",
                        tests_write_temp("", 0, ".html"), NULL};
    TestsRun r = tests_run_engine_ok(ok);
    tests_run_free(&r);
}
END_TEST

START_TEST(scaling_that_does_nothing_is_refused) {
    if (!models) return;
    const char *ntk[] = {model, "-z", tok, "--pe", "rope:ntk", NULL};
    tests_expect_error(ntk, "--pe rope:ntk: a scaling factor of 1 leaves RoPE unscaled");
    const char *scaling[] = {model, "-z", tok, "--rope-scaling", "yarn", NULL};
    tests_expect_error(scaling, "--rope-scaling yarn: a scaling factor of 1");
    const char *factor[] = {model, "-z", tok, "--rope-factor", "4", NULL};
    tests_expect_error(factor, "--rope-factor 4 scales nothing");
    /* control: with a factor they run, and the scaling changes the text */
    const char *plain[] = {"-t", "0", "-n", "60", "--ctx", "60", "-i", "Once", NULL};
    const char *ntk2[] = {"-t", "0", "-n", "60", "--ctx", "60", "-i", "Once", "--pe", "rope:ntk:4",
                          NULL};
    char *a = stdout_of(plain), *b = stdout_of(ntk2);
    ck_assert_msg(strcmp(a, b) != 0, "rope:ntk:4 gave the baseline's text");
    free(a);
    free(b);
}
END_TEST

START_TEST(generate_says_what_it_did_to_the_text) {
    if (!models) return;
    const char *cut[] = {model, "-z", tok, "-n", "3", "-i", "ROMEO:", NULL};
    TestsRun r = tests_run_engine_ok(cut);
    ck_assert_msg(strstr(r.err, "note: -n 3 cut the prompt"), "%s", r.err);
    tests_run_free(&r);
    const char *shift[] = {model, "-z", tok, "-n", "100", "--ctx", "32", "-i", "Once", NULL};
    r = tests_run_engine_ok(shift);
    ck_assert_msg(strstr(r.err, "note: the context (32 cells) filled: "), "%s", r.err);
    tests_run_free(&r);
    /* control: neither happens, neither is said */
    const char *neither[] = {model, "-z", tok, "-n", "30", "--ctx", "64", "-i", "Once", NULL};
    r = tests_run_engine_ok(neither);
    ck_assert_msg(!strstr(r.err, "note:"), "%s", r.err);
    tests_run_free(&r);
}
END_TEST

START_TEST(wrong_kinds_of_file_say_what_they_are) {
    if (!models) return;
    const char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10";
    const char *image = tests_write_temp(png, sizeof png - 1, ".png");
    const char *a[] = {image, "-n", "4", NULL};
    tests_expect_error(a, "is a PNG image, not a model");
    const char *readme[] = {"README.md", "-n", "4", NULL};
    tests_expect_error(readme, "README.md is a text file, not a model");
    const char *st[] = {tests_model_path(models, "zoo/rope/model.safetensors"), NULL};
    tests_expect_error(st, "is a safetensors file, weights without their configuration: convert");
    const char *hf[] = {tests_model_path(models, "zoo/rope"), NULL};
    tests_expect_error(hf, "a Hugging Face checkpoint: convert it to GGUF first");
    const char *merges[] = {"-m", "tokenize", "-z",
                            tests_model_path(models, "gpt2-tokenizer/merges.txt"), "-i", "hi", NULL};
    tests_expect_error(merges, "merges.txt is a text file, not a tokenizer: pass the directory");
    const char *spm = tests_model_path(models, "spm/tinystories-bpe-1k.model");
    const char *spm_as_model[] = {spm, NULL};
    tests_expect_error(spm_as_model, "is a SentencePiece tokenizer, not a model: pass it as -z");
    /* a directory holding tokenizer.model reads it, as the file itself would */
    const char *dir = tests_temp_dir();
    char inside[1100];
    snprintf(inside, sizeof inside, "%s/tokenizer.model", dir);
    size_t n;
    char *bytes = tests_read_file(spm, &n);
    tests_write_file(inside, bytes, n);
    free(bytes);
    const char *by_dir[] = {"-m", "tokenize", "-z", dir, "-i", "Once upon a time", NULL};
    const char *by_file[] = {"-m", "tokenize", "-z", spm, "-i", "Once upon a time", NULL};
    TestsRun d = tests_run_engine_ok(by_dir), f = tests_run_engine_ok(by_file);
    ck_assert_str_eq(d.out, f.out);
    tests_run_free(&d);
    tests_run_free(&f);
    /* a vocabulary-only GGUF as the model */
    if (tests_python_available("a vocabulary-only GGUF")) {
        char vocab_gguf[1100];
        snprintf(vocab_gguf, sizeof vocab_gguf, "%s/vocab.gguf", dir);
        const char *convert[] = {"tools/convert.py", "--vocab-only", spm, vocab_gguf, NULL};
        TestsRun c = tests_run_python_ok(convert);
        tests_run_free(&c);
        const char *vocab_only[] = {vocab_gguf, "-n", "4", NULL};
        tests_expect_error(vocab_only, "holds a vocabulary and no weights: pass it as -z");
    }
    /* control: a model and a tokenizer of the right kinds load */
    const char *ok[] = {model, "-z", tok, "-n", "4", "-i", "Once", NULL};
    TestsRun r = tests_run_engine_ok(ok);
    tests_run_free(&r);
}
END_TEST

START_TEST(tokenize_and_ppl_take_text_as_other_modes_do) {
    if (!models) return;
    const char *lines = "Once upon a time\nthere was a cat\n";
    const char *from_stdin[] = {model, "-z", tok, "-m", "tokenize", NULL};
    const char *file = tests_write_temp(lines, strlen(lines), ".txt");
    TestsRun in = tests_run_engine_input(from_stdin, file); /* the file on stdin */
    const char *from_file[] = {model, "-z", tok, "-m", "tokenize", "-f", file, NULL};
    TestsRun f = tests_run_engine_ok(from_file);
    ck_assert_int_eq(in.status, 0);
    ck_assert_str_eq(in.out, f.out);
    const char *json[] = {model, "-z", tok, "-m", "tokenize", "-f", file, "--json", NULL};
    const char *pieces[] = {model, "-z", tok, "-m", "tokenize", "-f", file, "--pieces", NULL};
    TestsRun j = tests_run_engine_ok(json), p = tests_run_engine_ok(pieces);
    /* the first line: ids and pieces as the other formats print them */
    int id0 = atoi(f.out);
    char want[128];
    snprintf(want, sizeof want, "{\"ids\":[%d,", id0);
    ck_assert_msg(!strncmp(j.out, want, strlen(want)), "%s vs %s", j.out, f.out);
    char first_piece[64];
    ck_assert(sscanf(p.out, "%63s", first_piece) == 1);
    ck_assert_msg(strstr(j.out, first_piece), "%s lacks %s", j.out, first_piece);
    ck_assert_int_eq((int)(strchr(j.out, '\n') - j.out) > 0, 1);
    tests_run_free(&in);
    tests_run_free(&f);
    tests_run_free(&j);
    tests_run_free(&p);

    const char *story = "Once upon a time there was a little girl named Lily. She loved to play "
                        "outside in the park with her friends and her dog.";
    const char *story_file = tests_write_temp(story, strlen(story), ".txt");
    const char *by_i[] = {model, "-z", tok, "-m", "ppl", "-i", story, "--ctx", "16", "--json", NULL};
    const char *by_f[] = {model, "-z", tok, "-m", "ppl", "-f", story_file, "--ctx", "16", "--json",
                          NULL};
    const char *other[] = {model, "-z", tok, "-m", "ppl", "-i", lines, "--ctx", "8", "--json", NULL};
    TestsRun a = tests_run_engine_ok(by_i), b = tests_run_engine_ok(by_f),
             c = tests_run_engine_ok(other);
    double nll_i = tests_json_number(a.out, "nll"), nll_f = tests_json_number(b.out, "nll");
    ck_assert_msg(nll_i == nll_f, "-i %.6f vs -f %.6f", nll_i, nll_f);
    ck_assert_msg(tests_json_number(c.out, "nll") != nll_i, "control: another text, same nll");
    tests_run_free(&a);
    tests_run_free(&b);
    tests_run_free(&c);
}
END_TEST

/* A chat on the zoo's RoPE model with `input` on stdin (a temp file) and
 * the template file `template`; extra flags after. */
static TestsRun zoo_chat(const char *zoo, const char *template, const char *input,
                         const char *flag, const char *value) {
    const char *in = tests_write_temp(input, strlen(input), ".txt");
    const char *args[] = {zoo, "-m", "chat", "--chat-template", template, "-t", "0", "-n", "12",
                          flag, value, NULL};
    return tests_run_engine_input(args, in);
}

START_TEST(chat_survives_what_a_turn_cannot_do) {
    if (!models) return;
    const char *zoo = tests_convert(models, "zoo/rope", NULL);
    const char *jinja = "{% for m in messages %}{{ m.content }}\n{% endfor %}";
    const char *template = tests_write_temp(jinja, strlen(jinja), ".jinja");
    TestsRun alone = zoo_chat(zoo, template, "ROMEO: hello\n", NULL, NULL);
    ck_assert_int_eq(alone.status, 0);
    ck_assert_msg(strlen(alone.out) > 2, "no reply: %s", alone.err);
    TestsRun bad = zoo_chat(zoo, template, "I love thee <3\nROMEO: hello\n", NULL, NULL);
    ck_assert_msg(bad.status == 0, "exit %d: %s", bad.status, bad.err);
    ck_assert_msg(strstr(bad.err, "warning: turn skipped: ") &&
                      strstr(bad.err, "'<' (byte 0x3C) has no token") && strstr(bad.err, template),
                  "%s", bad.err);
    ck_assert_str_eq(bad.out, alone.out);
    /* longer than the context: skipped, and the next turn as if alone */
    char long_turn[4096] = "";
    for (int i = 0; i < 40; i++) strcat(long_turn, "ROMEO: what light through yonder window ");
    strcat(long_turn, "\nROMEO: hello\n");
    TestsRun alone64 = zoo_chat(zoo, template, "ROMEO: hello\n", "--ctx", "64");
    TestsRun longer = zoo_chat(zoo, template, long_turn, "--ctx", "64");
    ck_assert_msg(longer.status == 0 && strstr(longer.err, "warning: turn skipped: the turn is "),
                  "exit %d: %s", longer.status, longer.err);
    ck_assert_str_eq(longer.out, alone64.out);
    /* control: another turn gets another reply */
    TestsRun other = zoo_chat(zoo, template, "JULIET: farewell\n", NULL, NULL);
    ck_assert_msg(strcmp(other.out, alone.out) != 0, "control: the same reply to another turn");

    /* typed in a terminal: the screen shows the warning, then the reply to
     * the next turn (the one it gets alone, as the pipe gave it) and Ctrl-D
     * ends the chat with status 0; control: the good turn alone, no warning */
    if (tests_python_available("the chat pseudo-terminal test")) {
        const char *pty[] = {"tests/modes/chat_pty.py", "skip", tests_engine_path(), zoo, template,
                             NULL};
        TestsRun t = tests_run_python(pty);
        ck_assert_msg(t.status == 0, "status %d\n%s%s", t.status, t.out, t.err);
        char screen[256];
        size_t n = (size_t)snprintf(screen, sizeof screen, "> ROMEO: hello\r\n");
        for (const char *c = alone.out; *c && n + 3 < sizeof screen; c++) {
            if (*c == '\n') screen[n++] = '\r'; /* a terminal's newline */
            screen[n++] = *c;
        }
        screen[n] = '\0';
        ck_assert_msg(strstr(strstr(t.out, "warning: turn skipped: "), screen), "no '%s' after the "
                      "warning:\n%s", screen, t.out);
        tests_run_free(&t);
    }

    /* the same template from a tokenizer_config.json's list */
    char config[512];
    snprintf(config, sizeof config,
             "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"x\"}, {\"name\": "
             "\"default\", \"template\": \"{%% for m in messages %%}{{ m.content }}\\n{%% endfor "
             "%%}\"}]}");
    const char *config_path = tests_write_temp(config, strlen(config), ".json");
    TestsRun from_config = zoo_chat(zoo, config_path, "ROMEO: hello\n", NULL, NULL);
    ck_assert_msg(from_config.status == 0, "%s", from_config.err);
    ck_assert_str_eq(from_config.out, alone.out);
    const char png[] = "\x89PNG\r\n\x1a\n\0\0";
    const char *png_path = tests_write_temp(png, sizeof png - 1, ".png");
    const char *image[] = {zoo, "-m", "chat", "--chat-template", png_path, NULL};
    tests_expect_error(image, "is not UTF-8 text");

    /* a built-in template the vocabulary cannot write */
    const char *chatml[] = {zoo, "-m", "chat", "--chat-template", "chatml", NULL};
    TestsRun c = tests_expect_failure(chatml, "(--chat-template chatml) writes '<|im_start|>");
    ck_assert_msg(strstr(c.err, "'<' (byte 0x3C)"), "%s", c.err);

    /* -n 0 without an end-of-turn token: each reply ends at the context */
    const char *in = tests_write_temp("ROMEO: hello\n", 13, ".txt");
    const char *n0[] = {zoo, "-m", "chat", "--chat-template", template, "-t", "0", "-n", "0",
                        "--ctx", "32", NULL};
    TestsRun ends = tests_run_engine_input(n0, in);
    ck_assert_msg(ends.status == 0 && strstr(ends.err, "no end-of-turn token: each reply ends "
                                                       "after 32 tokens"), "%s", ends.err);
    TestsRun *runs[] = {&alone, &bad, &alone64, &longer, &other, &from_config, &c, &ends};
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) tests_run_free(runs[i]);
}
END_TEST

/* Runs the engine with `args` (at most 16), sends SIGINT after `wait_s`
 * seconds or, when `until` is not NULL, as soon as its stderr holds `until`
 * (failing after `wait_s` seconds without it), and returns its exit
 * status, stdout and stderr. */
static int interrupted_run(const char *const *args, unsigned wait_s, const char *until, char **out,
                           char **err) {
    const char *out_path = tests_write_temp("", 0, ".txt"), *err_path = tests_write_temp("", 0, ".txt");
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        const char *argv[18] = {tests_engine_path()};
        for (int i = 0; args[i] && i < 16; i++) argv[i + 1] = args[i];
        int o = open(out_path, O_WRONLY | O_TRUNC), e = open(err_path, O_WRONLY | O_TRUNC);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (!until) sleep(wait_s);
    for (int polls = 0; until; polls++) { /* every 10 ms */
        char *so_far = tests_read_file(err_path, NULL);
        int seen = strstr(so_far, until) != NULL;
        if (!seen && polls == 100 * (int)wait_s) {
            kill(pid, SIGKILL);
            ck_abort_msg("no '%s' in %u s: %s", until, wait_s, so_far);
        }
        free(so_far);
        if (seen) break;
        usleep(10000);
    }
    kill(pid, SIGINT);
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    *out = tests_read_file(out_path, NULL);
    *err = tests_read_file(err_path, NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(ppl_shows_progress_and_stops_cleanly) {
    if (!models) return;
    const char *text = tests_text_path(models, "tinystories-valid-head.txt");
    const char *args[] = {model, "-z", tok, "-m", "ppl", "-f", text, "--ctx", "64", "--chunks", "20",
                          "--pe", "rope,alibi,rope:yarn:4@every2=none", NULL};
    TestsRun r = tests_run_engine_ok(args);
    ck_assert_msg(strstr(r.err, "20/20 windows, rope nll ") && strstr(r.err, "took"), "%s", r.err);
    for (const char *line = r.out; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        ck_assert_msg(n <= 100 || line[0] == '#', "a %zu-column line: %.*s", n, (int)n, line);
        line += n + (end != NULL);
    }
    ck_assert_msg(strstr(r.out, "\nrope:yarn:4@every2=none\n "), "no folded label: %s", r.out);
    tests_run_free(&r);

    /* Ctrl-C after a few seconds of a long run */
    const char *long_run[] = {model, "-z", tok, "-m", "ppl", "-f", text, "--ctx", "128", NULL};
    char *out, *err;
    int status = interrupted_run(long_run, 3, NULL, &out, &err);
    ck_assert_msg(status == 130, "status %d: %s", status, err);
    ck_assert_msg(strstr(err, "note: interrupted: the table holds the "), "%s", err);
    ck_assert_msg(strstr(out, "\nrope ") && strstr(out, "baseline"), "no table: %s", out);
    /* control: the whole text has far more windows than were scored */
    long scored = strtol(strstr(err, "holds the ") + 10, NULL, 10);
    ck_assert_msg(scored > 0 && scored < 3000, "%ld windows", scored);
    free(out);
    free(err);
}
END_TEST

/* The cells of the row of `series` in the study's table of mean NLL by
 * window, after the label (static). */
static const char *study_cells(const char *out, const char *series) {
    static char cells[256];
    const char *table = strstr(out, "# mean NLL (nats/token) by window");
    ck_assert_msg(table != NULL, "no study table: %s", out);
    for (const char *line = strchr(table, '\n'); line; line = strchr(line + 1, '\n'))
        if (!strncmp(line + 1, series, strlen(series)) && line[1 + strlen(series)] == ' ') {
            const char *from = line + 1 + strlen(series), *end = strchr(from, '\n');
            snprintf(cells, sizeof cells, "%.*s", (int)(end ? end - from : (long)strlen(from)), from);
            return cells;
        }
    ck_abort_msg("no row '%s' in the study table: %s", series, table);
    return NULL;
}

START_TEST(ppl_study_stops_cleanly) {
    if (!models) return;
    const char *text = tests_text_path(models, "tinystories-valid-head.txt");
    size_t n;
    char *bytes = tests_read_file(model, &n);
    const char *copy = tests_write_temp(bytes, n, ".bin"); /* a second model, run after the first */
    free(bytes);
    /* Ctrl-C as soon as the first model's quick window is done, during its
     * long one (200 windows of 512, seconds): the second model is not reached */
    const char *study[] = {model, copy, "-z", tok, "-m", "ppl", "-f", text, "--ctx", "8,512",
                           "--chunks", "200", "--threads", "1", NULL};
    char *out, *err;
    int status = interrupted_run(study, 60, " took ", &out, &err);
    ck_assert_msg(status == 130, "status %d: %s", status, err);
    char note[1200];
    snprintf(note, sizeof note, "note: interrupted in %s at --ctx 512 after ", model);
    ck_assert_msg(strstr(err, note), "%s", err);
    long scored = strtol(strstr(err, note) + strlen(note), NULL, 10);
    ck_assert_msg(scored >= 1 && scored < 200, "%ld windows", scored);
    double at_8, at_512;
    ck_assert_msg(sscanf(study_cells(out, model), "%lf %lf", &at_8, &at_512) == 2, "%s", out);
    char first[8], second[8], third[8];
    ck_assert_msg(sscanf(study_cells(out, copy), "%7s %7s %7s", first, second, third) == 2 &&
                  !strcmp(first, "-") && !strcmp(second, "-"), "%s", out);
    free(out);
    free(err);
    /* control: uninterrupted, every model at every window, and no note */
    study[11] = "2";
    TestsRun r = tests_run_engine_ok(study);
    ck_assert_msg(!strstr(r.err, "interrupted") && sscanf(study_cells(r.out, copy), "%lf %lf", &at_8,
                                                            &at_512) == 2, "%s%s", r.out, r.err);
    tests_run_free(&r);
}
END_TEST

START_TEST(small_things_a_newcomer_meets) {
    if (!models) return;
    const char *ctx1[] = {model, "-z", tok, "--ctx", "1", NULL};
    tests_expect_error(ctx1, "--ctx 1: a context shift needs at least 2 cells");
    const char *keep[] = {model, "-z", tok, "--ctx", "8", "--keep", "7", NULL};
    tests_expect_error(keep, "--keep 7: "); /* control: a --keep given is what is blamed */

    const char *zoo = tests_convert(models, "zoo/rope", NULL);
    const char *forever[] = {zoo, "-n", "100000000", "--ctx", "64", "-i", "ROMEO", NULL};
    char *out, *err;
    int status = interrupted_run(forever, 3, NULL, &out, &err);
    ck_assert_msg(status == 130, "status %d: %s", status, err);
    size_t len = strlen(out);
    ck_assert_msg(len > 0 && out[len - 1] == '\n', "the text's line is not ended");
    ck_assert_msg(strstr(err, "note: interrupted") && strstr(err, " tokens generated in "), "%s", err);
    free(out);
    free(err);

    const char *pe_page = tests_write_temp("", 0, ".html"), *att_page = tests_write_temp("", 0, ".html");
    const char *pe[] = {model, "-m", "pe", "--ctx", "8", "--html", pe_page, NULL};
    const char *att[] = {model, "-z", tok, "-m", "attention", "-i", "Once upon", "--html", att_page,
                         NULL};
    TestsRun a = tests_run_engine_ok(pe), b = tests_run_engine_ok(att);
    char *pe_html = tests_read_file(pe_page, NULL), *att_html = tests_read_file(att_page, NULL);
    ck_assert(strstr(pe_html, "click a similarity cell"));
    ck_assert_msg(!strstr(att_html, "similarity") && strstr(att_html, "head picker"),
                  "the attention page speaks of what it lacks");
    free(pe_html);
    free(att_html);
    tests_run_free(&a);
    tests_run_free(&b);
}
END_TEST

/* Columns of a line as a terminal shows them: UTF-8 continuation bytes
 * take none. */
static size_t display_width(const char *s, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++) w += ((unsigned char)s[i] & 0xc0) != 0x80;
    return w;
}

START_TEST(bench_explains_itself) {
    if (!models) return;
    const char *one[] = {model, "-m", "bench", "--pp", "16", "--tg", "4", "-r", "2", "--threads",
                         "1", NULL};
    TestsRun r = tests_run_engine_ok(one);
    ck_assert_msg(strstr(r.out, ", threads 1, "), "%s", r.out);
    const char *tables[] = {"\n| test", "\n| where the time went"};
    for (int t = 0; t < 2; t++) {
        size_t width = 0;
        const char *line = strstr(r.out, tables[t]);
        ck_assert_msg(line, "no '%s' table in %s", tables[t] + 1, r.out);
        for (line++; *line == '|';) {
            const char *end = strchr(line, '\n');
            size_t w = display_width(line, (size_t)(end - line));
            if (!width) width = w;
            ck_assert_msg(w == width, "a table line of %zu columns, not %zu:\n%s", w, width, r.out);
            line = end + 1;
        }
    }
    ck_assert_msg(strstr(r.out, "above 100%, the weights are served from the CPU's"), "%s", r.out);
    ck_assert_msg(!strstr(r.out, "--threads 1 may be faster"), "%s", r.out);
    tests_run_free(&r);
    const char *two[] = {model, "-m", "bench", "--pp", "16", "--tg", "0", "-r", "1", "--threads",
                         "2", NULL};
    r = tests_run_engine_ok(two);
    ck_assert_msg(strstr(r.out, ", threads 2, ") && strstr(r.out, "--threads 1 may be faster"),
                  "%s", r.out);
    tests_run_free(&r);
}
END_TEST

START_TEST(version) {
    const char *args[] = {"--version", NULL};
    TestsRun r = tests_run_engine_ok(args);
    ck_assert_msg(!strncmp(r.out, "posenc ", 7) && strchr(r.out, '\n'), "%s", r.out);
    tests_run_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("newcomer");
    TCase *tc = tcase_create("newcomer");
    tcase_add_unchecked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, llamacpp_spellings_that_mean_the_same);
    tcase_add_test(tc, llamacpp_spellings_that_differ);
    tcase_add_test(tc, the_seed_is_printed_and_repeats_the_run);
    tcase_add_test(tc, output_paths_are_checked_before_work);
    tcase_add_test(tc, scaling_that_does_nothing_is_refused);
    tcase_add_test(tc, generate_says_what_it_did_to_the_text);
    tcase_add_test(tc, wrong_kinds_of_file_say_what_they_are);
    tcase_add_test(tc, tokenize_and_ppl_take_text_as_other_modes_do);
    tcase_add_test(tc, chat_survives_what_a_turn_cannot_do);
    tcase_add_test(tc, ppl_shows_progress_and_stops_cleanly);
    tcase_add_test(tc, ppl_study_stops_cleanly);
    tcase_add_test(tc, small_things_a_newcomer_meets);
    tcase_add_test(tc, bench_explains_itself);
    tcase_add_test(tc, version);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
