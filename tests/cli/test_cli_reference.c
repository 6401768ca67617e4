/* The command line is one table (cli/options.c), and everything that lists
 * flags agrees with it: docs/cli.md is what `make docs/cli.md` writes from
 * it now, `./run -h` shows every row (and `-m MODE -h` exactly the rows of
 * that mode), and every flag the drivers name in their messages or checks
 * is a row.  Each check has a control: the same check given a table or a
 * text with one row removed fails, naming the row. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "tests/common.h"

/* The rows of the table but the one named `skip` (NULL: none). */
static int table_without(const char *skip, const char **names, int cap) {
    int n_rows, n = 0;
    const OptionSpec *rows = cli_options(&n_rows);
    for (int k = 0; k < n_rows && n < cap; k++)
        if (rows[k].name && (!skip || strcmp(rows[k].name, skip))) names[n++] = rows[k].name;
    return n;
}

/* A row of `names`, -h, --version, or one of llama.cpp's spellings the
 * parser answers. */
static int listed(const char *flag, const char **names, int n) {
    if (!strcmp(flag, "-h") || !strcmp(flag, "--help") || !strcmp(flag, "--version")) return 1;
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], flag)) return 1;
    int n_spellings;
    const LlamacppSpelling *spellings = cli_llamacpp_spellings(&n_spellings);
    for (int i = 0; i < n_spellings; i++)
        if (!strcmp(spellings[i].spelling, flag)) return 1;
    return 0;
}

/* The first flag of `names` that `help` does not show as a row ("  FLAG"
 * at the start of a line), or NULL. */
static const char *missing_from_help(const char *help, const char **names, int n) {
    for (int i = 0; i < n; i++) {
        char row[64];
        snprintf(row, sizeof row, "\n  %s ", names[i]);
        char row_end[64];
        snprintf(row_end, sizeof row_end, "\n  %s\n", names[i]);
        if (!strstr(help, row) && !strstr(help, row_end)) return names[i];
    }
    return NULL;
}

static char *reference_text(void) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert(f != NULL);
    cli_write_reference(f);
    fclose(f);
    return text;
}

START_TEST(reference_is_current) {
    size_t len;
    char *committed = tests_read_file("docs/cli.md", &len);
    char *fresh = reference_text();
    ck_assert_msg(!strcmp(committed, fresh),
                  "docs/cli.md is not what cli/options.c's tables make: run `make docs/cli.md`");
    /* control: the reference with one row removed differs */
    char *cut = strdup(committed), *row = strstr(cut, "| `--stride S` |");
    ck_assert(row != NULL);
    char *end = strchr(row, '\n');
    memmove(row, end + 1, strlen(end + 1) + 1);
    ck_assert_msg(strcmp(cut, fresh) != 0, "a reference without --stride still matched");
    free(cut);
    free(committed);
    free(fresh);
}
END_TEST

START_TEST(help_shows_every_row) {
    const char *names[128];
    int n = table_without(NULL, names, 128);
    ck_assert_int_ge(n, 50);
    const char *args[] = {"-h", NULL};
    TestsRun r = tests_run_engine_ok(args);
    const char *gone = missing_from_help(r.out, names, n);
    ck_assert_msg(!gone, "./run -h does not show %s", gone ? gone : "");
    /* control: the help without the --stride row misses it */
    char *cut = strdup(r.out), *row = strstr(cut, "\n  --stride ");
    ck_assert(row != NULL);
    char *end = strchr(row + 1, '\n');
    memmove(row, end, strlen(end) + 1);
    gone = missing_from_help(cut, names, n);
    ck_assert_msg(gone && !strcmp(gone, "--stride"), "a help without --stride passed");
    free(cut);
    tests_run_free(&r);
}
END_TEST

/* -m MODE -h: the mode's usage and exactly its rows. */
START_TEST(mode_help_shows_its_rows) {
    int n_rows, n_modes;
    const OptionSpec *rows = cli_options(&n_rows);
    const ModeSpec *modes = cli_modes(&n_modes);
    for (int m = 0; m < n_modes; m++) {
        const char *args[] = {"-m", modes[m].name, "-h", NULL};
        TestsRun r = tests_run_engine_ok(args);
        ck_assert_msg(strstr(r.out, modes[m].synopsis), "-m %s -h: no usage line", modes[m].name);
        for (int k = 0; k < n_rows; k++) {
            if (!rows[k].name) continue;
            const char *one[] = {rows[k].name};
            int shown = missing_from_help(r.out, one, 1) == NULL;
            int uses = (rows[k].modes >> m) & 1;
            ck_assert_msg(shown == uses, "-m %s -h %s %s", modes[m].name,
                          uses ? "does not show" : "shows", rows[k].name);
        }
        tests_run_free(&r);
    }
}
END_TEST

/* Every flag named in a string of the drivers ("--keep %d: ...",
 * cli_given(o, "--keep")): the first not in `names`, or NULL. */
static const char *unlisted_flag_in_sources(const char **names, int n, char *where, size_t size) {
    static char flag[64];
    glob_t g;
    ck_assert_int_eq(glob("cli/*.c", 0, NULL, &g), 0);
    ck_assert_int_ge((int)g.gl_pathc, 10);
    for (size_t f = 0; f <= g.gl_pathc; f++) {
        const char *file = f < g.gl_pathc ? g.gl_pathv[f] : "run.c";
        size_t len;
        char *src = tests_read_file(file, &len);
        int in_string = 0;
        for (size_t i = 0; i < len; i++) {
            if (src[i] == '"' && (i == 0 || src[i - 1] != '\\')) in_string = !in_string;
            if (!in_string || src[i] != '-' || (i > 0 && src[i - 1] != '"' && src[i - 1] != ' '))
                continue;
            size_t j = i + 1 + (src[i + 1] == '-');
            if (!(src[j] >= 'a' && src[j] <= 'z')) continue;
            while ((src[j] >= 'a' && src[j] <= 'z') || src[j] == '-') j++;
            if (src[j - 1] == '-' || j - i >= sizeof flag) continue;
            snprintf(flag, sizeof flag, "%.*s", (int)(j - i), src + i);
            /* a short flag is one letter ("-f"), or one of llama.cpp's ("-cnv") */
            if (flag[1] != '-' && flag[2] && !listed(flag, names, n)) continue;
            if (!listed(flag, names, n)) {
                snprintf(where, size, "%s", file);
                free(src);
                globfree(&g);
                return flag;
            }
        }
        free(src);
    }
    globfree(&g);
    return NULL;
}

START_TEST(drivers_name_only_listed_flags) {
    const char *names[128];
    char where[64];
    int n = table_without(NULL, names, 128);
    const char *flag = unlisted_flag_in_sources(names, n, where, sizeof where);
    ck_assert_msg(!flag, "%s names %s, which cli/options.c does not list", where, flag);
    /* control: with the --stride row removed, the ppl driver's check of it is caught */
    n = table_without("--stride", names, 128);
    flag = unlisted_flag_in_sources(names, n, where, sizeof where);
    ck_assert_msg(flag && !strcmp(flag, "--stride"), "a table without --stride passed (%s)",
                  flag ? flag : "nothing found");
}
END_TEST

/* The defaults the help names are the values a run starts from. */
START_TEST(defaults_are_what_help_says) {
    char *argv[] = {"run", NULL};
    Options o = cli_parse(1, argv);
    ck_assert_float_eq(o.temperature, 1.0f);
    ck_assert_float_eq(o.topp, 0.9f);
    ck_assert_int_eq(o.steps, 256);
    ck_assert_int_eq(o.penalties.last_n, 64);
    ck_assert_float_eq(o.penalties.repeat, 1.0f);
    ck_assert_int_eq(o.logits_top, 10);
    ck_assert_float_eq(o.rope_factor, 0.0f); /* "the checkpoint's": not a number */
    ck_assert_str_eq(o.mode, "generate");
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli_reference");
    TCase *tc = tcase_create("cli_reference");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, reference_is_current);
    tcase_add_test(tc, help_shows_every_row);
    tcase_add_test(tc, mode_help_shows_its_rows);
    tcase_add_test(tc, drivers_name_only_listed_flags);
    tcase_add_test(tc, defaults_are_what_help_says);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
