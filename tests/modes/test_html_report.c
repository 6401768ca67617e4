/* --html, the self-contained report of -m pe, -m attention and -m ppl (one
 * window, and the study), on the PE zoo:
 *  - parsed (tests/modes/html_facts.py): well-formed HTML with a figure per
 *    chart, every inline SVG well-formed XML, the data element's JSON equal
 *    to --json's, no reference to anything outside the file (control: a
 *    page with an external script is caught), a cut-off page fails;
 *  - one ppl window: the NLL-by-position chart, the A/B table's rows the
 *    text table's (control: one variant's label with the other's values is
 *    not), the data's variants --json's lines of the same run (control: a
 *    line with another label is not in it) and a mean NLL per position;
 *  - opened in Debian's chromium, headless: no console message at all
 *    (control: a page with a script error shows one), and the values the
 *    page's script puts in its DOM for a head (#head=L,H), a similarity
 *    (#cos=V,A,B) and a study point (#nll=S,W) are the data's, as computed
 *    from the JSON by the parser; the ppl window's DOM holds its table and
 *    chart.
 * Without chromium the browser tests print SKIP, except under CI=true,
 * where they fail (.ci/run installs it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/common.h"

static const char *models, *zoo_t5, *zoo_learned, *dir;
static char attention_html[512], pe_html[512], study_html[512], bad_html[512], profile[512];
static char ppl_html[512], ppl_json_html[512];
static char *study_table; /* the study's text output */
static char *ppl_table, *ppl_json; /* one window's text output, and its --json's */

static void setup(void) {
    models = tests_models_dir("--html reports on the PE zoo");
    if (!models) return;
    zoo_t5 = tests_convert(models, "zoo/t5", NULL);
    zoo_learned = tests_convert(models, "zoo/learned", NULL);
    ck_assert(zoo_t5 && zoo_learned);
    dir = tests_temp_dir();
    snprintf(attention_html, sizeof attention_html, "%s/attention.html", dir);
    snprintf(pe_html, sizeof pe_html, "%s/pe.html", dir);
    snprintf(study_html, sizeof study_html, "%s/study.html", dir);
    snprintf(bad_html, sizeof bad_html, "%s/bad.html", dir);
    snprintf(profile, sizeof profile, "%s/chromium-profile", dir);
    const char *a[] = {zoo_t5, "-m", "attention", "-i", "ROMEO: hi", "--pe", "t5,none",
                       "--html", attention_html, NULL};
    tests_expect_success(a);
    const char *p[] = {zoo_learned, "-m", "pe", "--ctx", "16", "--html", pe_html, NULL};
    tests_expect_success(p);
    char text[600];
    snprintf(text, sizeof text, "%s/../text/tiny-shakespeare.txt", models);
    const char *st[] = {zoo_t5, zoo_learned, "-m", "ppl", "-f", text, "--ctx", "16,32", "--chunks", "2",
                        "--html", study_html, NULL};
    TestsRun r = tests_run_engine_ok(st);
    study_table = strdup(r.out);
    tests_run_free(&r);
    snprintf(ppl_html, sizeof ppl_html, "%s/ppl.html", dir);
    snprintf(ppl_json_html, sizeof ppl_json_html, "%s/ppl-json.html", dir);
    const char *pp[] = {zoo_t5, "-m", "ppl", "-f", text, "--ctx", "16", "--chunks", "4", "--pe",
                        "t5,none", "--html", ppl_html, NULL};
    r = tests_run_engine_ok(pp);
    ppl_table = strdup(r.out);
    tests_run_free(&r);
    const char *pj[] = {zoo_t5, "-m", "ppl", "-f", text, "--ctx", "16", "--chunks", "4", "--pe",
                        "t5,none", "--json", "--html", ppl_json_html, NULL};
    r = tests_run_engine_ok(pj);
    ppl_json = strdup(r.out);
    tests_run_free(&r);
}

static void teardown(void) {
    free(study_table);
    free(ppl_table);
    free(ppl_json);
}

/* `text` after a newline, every run of spaces one space and none at a
 * line's ends (static): a text table's rows as the page's table rows read. */
static const char *collapsed(const char *text) {
    static char out[4096];
    size_t n = 0;
    out[n++] = '\n';
    for (const char *c = text; *c && n + 1 < sizeof out; c++) {
        if (*c == ' ' && (out[n - 1] == ' ' || out[n - 1] == '\n')) continue;
        if (*c == '\n' && out[n - 1] == ' ') n--;
        out[n++] = *c;
    }
    out[n] = '\0';
    return out;
}

static TestsRun facts(const char *page, const char *expect) {
    const char *args[] = {"tests/modes/html_facts.py", page, expect ? "--expect" : NULL, expect,
                          NULL};
    return tests_run_python_ok(args);
}

/* `page` with `insert` put before </body>, written to bad_html. */
static void spoil(const char *page, const char *insert) {
    size_t len;
    char *text = tests_read_file(page, &len);
    char *end = strstr(text, "</body>");
    ck_assert_ptr_nonnull(end);
    FILE *f = fopen(bad_html, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*s%s%s", (int)(end - text), text, insert, end);
    fclose(f);
    free(text);
}

START_TEST(pages_parse) {
    if (!models) return;
    TestsRun a = facts(attention_html, NULL);
    ck_assert_msg(strstr(a.out, "doctype=1\n") && strstr(a.out, "external=0\n") &&
                  strstr(a.out, "svg_wellformed=4\n") &&
                  strstr(a.out, "figure=weights|t5\nfigure=weights|none\nfigure=mass|\n"
                                "figure=entropy|\n") &&
                  strstr(a.out, "scripts=application/json,text/javascript\n") &&
                  strstr(a.out, "data_variants=t5,none\n"), "%s", a.out);
    tests_run_free(&a);
    TestsRun p = facts(pe_html, NULL);
    ck_assert_msg(strstr(p.out, "figure=vectors|learned\n") && strstr(p.out, "external=0\n") &&
                  strstr(p.out, "svg_wellformed=1\n"), "%s", p.out);
    tests_run_free(&p);
    /* the study's page: its chart, and in its data the values of the text table (%9.4f) */
    TestsRun st = facts(study_html, NULL);
    ck_assert_msg(strstr(st.out, "figure=nll-by-window|\n") && strstr(st.out, "svg_wellformed=1\n") &&
                  strstr(st.out, "external=0\n"), "%s", st.out);
    int series = 0;
    char rows[2][520], labels[2][128], values[2][128];
    for (char *line = strstr(st.out, "series="); line && series < 2; line = strstr(line, "\nseries=")) {
        line += line[0] == '\n';
        char *bar = strchr(line, '|'), *eol = strchr(line, '\n');
        snprintf(labels[series], sizeof labels[0], "%.*s", (int)(bar - line - 7), line + 7);
        snprintf(values[series], sizeof values[0], "%.*s", (int)(eol - bar - 1), bar + 1);
        snprintf(rows[series], sizeof rows[0], "%s %s\n", labels[series], values[series]);
        ck_assert_msg(strstr(study_table, rows[series]), "the table lacks '%s':\n%s", rows[series],
                      study_table);
        series++;
    }
    ck_assert_int_eq(series, 2);
    snprintf(rows[0], sizeof rows[0], "%s %s\n", labels[0], values[1]); /* control: one series' label, the other's values */
    ck_assert_msg(!strstr(study_table, rows[0]), "'%s' matches the table", rows[0]);
    tests_run_free(&st);
    /* one window's page: its chart, its table the text table, its data --json's lines */
    TestsRun pp = facts(ppl_html, NULL);
    ck_assert_msg(strstr(pp.out, "figure=nll-by-position|\n") && strstr(pp.out, "svg_wellformed=1\n") &&
                  strstr(pp.out, "external=0\n") && strstr(pp.out, "data_variants=t5,none\n") &&
                  strstr(pp.out, "data_positions=16,16\n"), "%s", pp.out);
    const char *table = collapsed(ppl_table);
    char page_rows[3][256];
    int n_rows = 0;
    for (char *line = strstr(pp.out, "table_row="); line; line = strstr(line, "\ntable_row=")) {
        line += (line[0] == '\n') + 10;
        ck_assert_int_lt(n_rows, 3);
        snprintf(page_rows[n_rows], sizeof page_rows[0], "\n%.*s\n", (int)(strchr(line, '\n') - line),
                 line);
        ck_assert_msg(strstr(table, page_rows[n_rows]), "the text table lacks '%s':\n%s",
                      page_rows[n_rows], table);
        n_rows++;
    }
    ck_assert_int_eq(n_rows, 3); /* the columns, t5, none */
    ck_assert_msg(!strncmp(page_rows[1], "\nt5 ", 4) && !strncmp(page_rows[2], "\nnone ", 6), "%s",
                  pp.out);
    char swapped[300]; /* control: t5's label with none's values */
    snprintf(swapped, sizeof swapped, "\nt5 %s", page_rows[2] + 6);
    ck_assert_msg(!strstr(table, swapped), "'%s' matches the table", swapped);
    tests_run_free(&pp);
    char *ppl_page = tests_read_file(ppl_json_html, NULL);
    int n_json = 0;
    for (char *line = ppl_json, *end; (end = strchr(line, '\n')); line = end + 1, n_json++) {
        *end = '\0';
        ck_assert_msg(strstr(ppl_page, line), "the page's data lacks --json's %s", line);
        if (n_json == 0) { /* control: the same line with another label */
            char other[1024];
            snprintf(other, sizeof other, "{\"pe\":\"none\"%s", strchr(line, ','));
            ck_assert_msg(!strstr(ppl_page, other), "'%s' is in the page", other);
        }
        *end = '\n';
    }
    ck_assert_int_eq(n_json, 2);
    free(ppl_page);
    /* the data is --json's, byte for byte */
    const char *j[] = {zoo_learned, "-m", "pe", "--ctx", "16", "--json", NULL};
    TestsRun json = tests_run_engine_ok(j);
    char *page = tests_read_file(pe_html, NULL);
    ck_assert_msg(strstr(page, json.out) != NULL, "the page's data is not --json's");
    free(page);
    tests_run_free(&json);
    /* controls: an external script is counted; a cut-off page does not parse */
    spoil(pe_html, "<script src=\"https://example.com/x.js\"></script>\n");
    TestsRun e = facts(bad_html, NULL);
    ck_assert_msg(strstr(e.out, "external=1\n"), "%s", e.out);
    tests_run_free(&e);
    tests_expect_cut_file_rejected(attention_html, bad_html, "tests/modes/html_facts.py");
}
END_TEST

/* chromium on PATH, or NULL after printing SKIP (failing under CI, where
 * .ci/run installs it). */
static const char *chromium(void) {
    const char *found = tests_find_program("chromium");
    if (!found)
        tests_prerequisite_missing("the headless browser checks of --html",
                                   "chromium is not installed");
    return found;
}

/* The page at `fragment` in headless chromium: its DOM after the scripts
 * ran (stdout) and the browser's log (stderr), where console messages are
 * the lines with ":CONSOLE". */
static TestsRun browse(const char *browser, const char *page, const char *fragment) {
    char url[1100], user_dir[600];
    snprintf(url, sizeof url, "file://%s%s", page, fragment);
    snprintf(user_dir, sizeof user_dir, "--user-data-dir=%s", profile);
    const char *args[] = {"--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                          "--v=0", user_dir, "--dump-dom", url, NULL};
    TestsRun r = tests_run_program(browser, args, NULL);
    ck_assert_msg(r.status == 0, "chromium exited %d: %s", r.status, r.err);
    return r;
}

/* The page's readout must show what the parser computes from the data. */
static void expect_readout(const char *browser, const char *page, const char *selection) {
    TestsRun f = facts(page, selection);
    char *want = strstr(f.out, "expect=");
    ck_assert_ptr_nonnull(want);
    want += 7;
    *strchr(want, '\n') = '\0';
    char fragment[64];
    snprintf(fragment, sizeof fragment, "#%s", selection);
    TestsRun r = browse(browser, page, fragment);
    char dom[1024];
    snprintf(dom, sizeof dom, "<output id=\"readout\">%s</output>", want);
    printf("%s %s: %s\n", page, fragment, want);
    ck_assert_msg(strstr(r.out, dom), "the DOM lacks '%s'", dom);
    ck_assert_msg(!strstr(r.err, ":CONSOLE"), "console messages: %s", r.err);
    tests_run_free(&r);
    tests_run_free(&f);
}

START_TEST(pages_work_in_chromium) {
    if (!models) return;
    const char *browser = chromium();
    if (!browser) return;
    expect_readout(browser, attention_html, "head=1,2");
    expect_readout(browser, attention_html, "head=3,0");
    expect_readout(browser, pe_html, "cos=0,2,5");
    expect_readout(browser, study_html, "nll=1,1");
    /* one ppl window's page shows its table and chart, without a console message */
    TestsRun p = browse(browser, ppl_html, "");
    ck_assert_msg(strstr(p.out, "<td>none</td>") && strstr(p.out, "data-view=\"nll-by-position\""),
                  "%s", p.out);
    ck_assert_msg(!strstr(p.err, ":CONSOLE"), "console messages: %s", p.err);
    tests_run_free(&p);
    /* control: a script error is seen */
    spoil(attention_html, "<script>no_such_function();</script>\n");
    TestsRun r = browse(browser, bad_html, "");
    ck_assert_msg(strstr(r.err, ":CONSOLE") && strstr(r.err, "no_such_function"), "%s", r.err);
    tests_run_free(&r);
}
END_TEST

START_TEST(html_misuse) {
    if (!models) return;
    const char *a[] = {zoo_t5, "-m", "ppl", "-f", "README.md", "--html", "/nonexistent/dir/x.html",
                       NULL};
    tests_expect_error(a, "--html: cannot write '/nonexistent/dir/x.html'");
    const char *b[] = {zoo_t5, "-m", "pe", "--html", "/nonexistent/dir/x.html", NULL};
    TestsRun r = tests_expect_failure(b, "--html: cannot write '/nonexistent/dir/x.html'");
    tests_run_free(&r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("html_report");
    TCase *tc = tcase_create("zoo");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, pages_parse);
    tcase_add_test(tc, pages_work_in_chromium);
    tcase_add_test(tc, html_misuse);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
