/* --dump-cache: the table before and after a context shift says what the
 * table in docs/positional.md says.  Read back from ./run's stderr: the kept
 * cells are unchanged, the moved cells are the ones after the discarded
 * block with positions lowered by d, and for RoPE each moved key's first
 * pair turned by -d x its rate (mod 2 pi) — under --shift-no-rerotate it
 * did not, which the same check must catch.  ALiBi has no angle column and
 * moves positions only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common.h"

#define MAX_CELLS 64

typedef struct {
    char when[160];
    int n_used, n_ctx;
    double rate;               /* rad per position; 0 without an angle column */
    int pos[MAX_CELLS], token[MAX_CELLS];
    double angle[MAX_CELLS];
} Table;

/* Parses every table in text; returns how many (at most max). */
static int parse_tables(const char *text, Table *tables, int max) {
    int n = 0;
    const char *line = text;
    while (line && *line && n < max) {
        const char *next = strchr(line, '\n');
        Table *t = &tables[n];
        memset(t, 0, sizeof *t);
        /* a heading starts with a word (a row with its right-aligned cell
         * number) and ends ": N of M cells" (the shift's action may hold ": ") */
        const char *colon = NULL;
        for (const char *c = line; (c = strstr(c, ": ")) && (!next || c < next); c++) {
            int a, b;
            if (sscanf(c + 2, "%d of %d cells", &a, &b) == 2) colon = c;
        }
        if (!strncmp(line, "[cache] ", 8) && line[8] >= 'a' && line[8] <= 'z' && colon) {
            size_t wl = (size_t)(colon - line - 8);
            ck_assert_msg(wl < sizeof t->when, "a long heading");
            memcpy(t->when, line + 8, wl);
            ck_assert_msg(sscanf(colon + 2, "%d of %d cells", &t->n_used, &t->n_ctx) == 2, "heading: %.100s", line);
            const char *r = strstr(line, "key-angle turns ");
            if (r && (!next || r < next)) ck_assert_int_eq(sscanf(r, "key-angle turns %lf", &t->rate), 1);
            ck_assert_int_le(t->n_used, MAX_CELLS);
            line = next ? next + 1 : NULL;   /* the column header */
            line = line && strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL;
            for (int c = 0; c < t->n_used; c++) {
                ck_assert_msg(line != NULL, "table '%s' ends early", t->when);
                int cell;
                int got = t->rate > 0 ? sscanf(line, "[cache] %d %d %d %lf", &cell, &t->pos[c], &t->token[c], &t->angle[c])
                                      : sscanf(line, "[cache] %d %d %d", &cell, &t->pos[c], &t->token[c]);
                ck_assert_msg(got == (t->rate > 0 ? 4 : 3) && cell == c, "row %d of '%s': %.60s", c, t->when, line);
                line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL;
            }
            n++;
            continue;
        }
        line = next ? next + 1 : NULL;
    }
    return n;
}

/* Angle difference wrapped into (-pi, pi]. */
static double wrap(double a) {
    while (a <= -M_PI) a += 2 * M_PI;
    while (a > M_PI) a -= 2 * M_PI;
    return a;
}

/* Checks one before/after pair against the shift the heading states;
 * returns the number of re-rotation mismatches (the rest is asserted). */
static int check_shift(const Table *before, const Table *after, int keep) {
    int discard = before->n_used - after->n_used;
    char expected[64];
    snprintf(expected, sizeof expected, "kept %d, discarded positions %d-%d", keep, before->pos[keep],
             before->pos[keep + discard - 1]);
    ck_assert_msg(strstr(after->when, expected), "heading '%s' lacks '%s'", after->when, expected);
    int mismatches = 0;
    for (int c = 0; c < after->n_used; c++) {
        int from = c < keep ? c : c + discard;
        ck_assert_int_eq(after->token[c], before->token[from]);
        ck_assert_int_eq(after->pos[c], c < keep ? before->pos[from] : before->pos[from] - discard);
        if (c > 0) ck_assert_int_eq(after->pos[c], after->pos[c - 1] + 1);
        if (before->rate > 0) {
            double turned = c < keep ? 0.0 : -discard * before->rate;
            /* 4 printed decimals and f32 rotation: 2e-3 is ample; a key left
             * unrotated is off by d x rate (mod 2 pi), >= 0.7 rad here */
            if (fabs(wrap(after->angle[c] - before->angle[from] - turned)) > 2e-3) mismatches++;
        }
    }
    return mismatches;
}

static TestsRun dump_run(const char *model, const char *tok, const char *const *extra) {
    const char *args[32] = {model};
    int n = 1;
    if (tok) {
        args[n++] = "-z";
        args[n++] = tok;
    }
    const char *common[] = {"-t", "0", "-n", "60", "--ctx", "16", "--keep", "2", "--dump-cache", NULL};
    for (int i = 0; common[i]; i++) args[n++] = common[i];
    for (int i = 0; extra && extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    TestsRun r = tests_run_engine(args);
    ck_assert_msg(r.status == 0, "%s", r.err);
    return r;
}

START_TEST(rope_shift_rerotates_every_moved_key) {
    const char *models = tests_models_dir("--dump-cache");
    if (!models) return;
    const char *m = tests_model_path(models, "stories260K/stories260K.bin");
    const char *z = tests_model_path(models, "stories260K/tok512.bin");
    const char *variants[][5] = {{NULL}, {"--rope-scaling", "linear", "--rope-factor", "2", NULL},
                                 {"--kv-type", "f16", NULL}};
    for (int v = 0; v < 3; v++) {
        TestsRun r = dump_run(m, z, variants[v]);
        Table tables[16];
        int n = parse_tables(r.err, tables, 16);
        ck_assert_int_ge(n, 3);                        /* at least one shift, and the end */
        ck_assert_str_eq(tables[n - 1].when, "at the end");
        ck_assert(tables[0].rate > 0);
        if (v == 1) ck_assert(fabs(tables[0].rate - 0.5) < 1e-6);
        int shifts = 0;
        for (int i = 0; i + 1 < n; i++)
            if (strstr(tables[i].when, "before") && strstr(tables[i + 1].when, "after")) {
                ck_assert_int_eq(check_shift(&tables[i], &tables[i + 1], 2), 0);
                shifts++;
            }
        ck_assert_int_ge(shifts, 1);
        tests_run_free(&r);
    }
    /* control: --shift-no-rerotate leaves the keys as they were, and the
     * same check finds every moved key off */
    const char *bug[] = {"--shift-no-rerotate", NULL};
    TestsRun r = dump_run(m, z, bug);
    Table tables[16];
    int n = parse_tables(r.err, tables, 16);
    ck_assert_int_ge(n, 3);
    int moved = tables[1].n_used - 2;
    ck_assert_int_eq(check_shift(&tables[0], &tables[1], 2), moved);
    tests_run_free(&r);
}
END_TEST

START_TEST(alibi_shift_moves_positions_only) {
    const char *models = tests_models_dir("--dump-cache");
    if (!models) return;
    const char *gguf = tests_convert(models, "zoo/alibi", NULL);
    ck_assert_ptr_nonnull(gguf);
    const char *prompt[] = {"-i", "ROMEO:", NULL};
    TestsRun r = dump_run(gguf, NULL, prompt);
    Table tables[16];
    int n = parse_tables(r.err, tables, 16);
    ck_assert_int_ge(n, 3);
    ck_assert(tables[0].rate == 0);                    /* no angle column */
    ck_assert_ptr_null(strstr(r.err, "key-angle"));
    ck_assert_msg(strstr(tables[1].when, "positions updated"), "%s", tables[1].when);
    ck_assert_int_eq(check_shift(&tables[0], &tables[1], 2), 0);
    tests_run_free(&r);
}
END_TEST

START_TEST(chat_dumps_at_the_end) {
    const char *models = tests_models_dir("--dump-cache");
    if (!models) return;
    const char *input = tests_write_temp("Hello.\n", 7, ".txt");
    const char *args[] = {tests_model_path(models, "stories260K/stories260K.bin"), "-z",
                          tests_model_path(models, "stories260K/tok512.bin"), "-m", "chat", "--chat-template",
                          "chatml", "-t", "0", "-n", "10", "--dump-cache", NULL};
    TestsRun r = tests_run_engine_input(args, input);
    ck_assert_msg(r.status == 0, "%s", r.err);
    Table tables[4];
    ck_assert_int_eq(parse_tables(r.err, tables, 4), 1);
    ck_assert_str_eq(tables[0].when, "at the end");
    for (int c = 0; c < tables[0].n_used; c++) ck_assert_int_eq(tables[0].pos[c], c);
    tests_run_free(&r);
    /* a flag only the text modes use */
    const char *ppl[] = {tests_model_path(models, "stories260K/stories260K.bin"), "-m", "ppl", "--dump-cache", NULL};
    tests_expect_error(ppl, "--dump-cache is not used by -m ppl");
}
END_TEST

int main(void) {
    Suite *s = suite_create("cache_dump");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, rope_shift_rerotates_every_moved_key);
    tcase_add_test(tc, alibi_shift_moves_positions_only);
    tcase_add_test(tc, chat_dumps_at_the_end);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
