/* The JSON reader: every value type read back against the text written by
 * hand here (the reference is RFC 8259 itself, not the reader's earlier
 * output); every malformed text refused with one error naming the byte
 * where it went wrong; nesting bounded; and a real tokenizer.json-sized
 * document (the GPT-2 vocab.json, 50257 members) read back member by member
 * against Python's json module. */
#include "base/json_parse.h"
#include "tests/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *models;

static void parse_ok(JsonDoc *doc, const char *text) {
    PosencError err;
    ck_assert_msg(json_parse(doc, text, strlen(text), &err) == 0, "%s: %s", text, err.msg);
}

START_TEST(values_read_back) {
    JsonDoc doc;
    parse_ok(&doc, " {\"a\": [1, -2.5e3, 0.125, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"],"
                   " \"b\": {}, \"c\": [], \"a\": \"last\", \"\": \"\\u0000z\"}\n");
    const JsonValue *r = &doc.root;
    ck_assert_int_eq(r->type, JSON_OBJECT);
    ck_assert_int_eq(r->len, 5);
    const JsonValue *a = &r->items[0];
    ck_assert_int_eq(a->type, JSON_ARRAY);
    ck_assert_int_eq(a->len, 7);
    ck_assert(a->items[0].number == 1 && a->items[1].number == -2500 && a->items[2].number == 0.125);
    ck_assert_int_eq(a->items[3].type, JSON_TRUE);
    ck_assert_int_eq(a->items[4].type, JSON_FALSE);
    ck_assert_int_eq(a->items[5].type, JSON_NULL);
    ck_assert_int_eq(a->items[6].len, 8); /* x, é (2 bytes), 😀 (4 bytes), \n */
    ck_assert_mem_eq(a->items[6].string, "x\xC3\xA9\xF0\x9F\x98\x80\n", 8);
    /* a repeated key: the last one, as JavaScript and Python read it */
    ck_assert(json_is_string(json_get(r, "a"), "last"));
    ck_assert_int_eq(json_get(r, "b")->type, JSON_OBJECT);
    ck_assert_int_eq(json_get(r, "c")->len, 0);
    ck_assert_ptr_null(json_get(r, "d"));
    ck_assert_ptr_null(json_get(a, "a")); /* not an object */
    const JsonValue *nul = json_get(r, ""); /* an empty key, a NUL inside the string */
    ck_assert_int_eq(nul->len, 2);
    ck_assert_mem_eq(nul->string, "\0z", 2);
    ck_assert_int_eq(json_get_bool(r, "b", 7), -1);
    ck_assert_int_eq(json_get_bool(r, "zz", 7), 7);
    json_free(&doc);
    parse_ok(&doc, "\"just a string\"");
    ck_assert(json_is_string(&doc.root, "just a string"));
    json_free(&doc);
}
END_TEST

static void parse_fails(const char *text, size_t len, size_t at, const char *what) {
    JsonDoc doc;
    PosencError err;
    ck_assert_msg(json_parse(&doc, text, len, &err) == -1, "accepted: %s", tests_show_bytes(text, len));
    char want[64];
    snprintf(want, sizeof want, "invalid JSON at byte %zu: ", at);
    ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0 && strstr(err.msg, what) &&
                      !strchr(err.msg, '\n'),
                  "%s: want '%s%s', got '%s'", tests_show_bytes(text, len), want, what, err.msg);
}

START_TEST(malformed_texts) {
    parse_fails("", 0, 0, "expected a value");
    parse_fails("{", 1, 1, "expected a string");
    parse_fails("{\"a\" 1}", 7, 5, "expected ':'");
    parse_fails("{\"a\": 1", 7, 7, "expected ',' or '}'");
    parse_fails("[1 2]", 5, 3, "expected ',' or ']'");
    parse_fails("[1,]", 4, 3, "expected a value");
    parse_fails("{\"a\": 1,}", 9, 8, "expected a string");
    parse_fails("01", 2, 1, "trailing data");
    parse_fails("1.", 2, 0, "bad number");
    parse_fails("1e+", 3, 0, "bad number");
    parse_fails("-", 1, 0, "expected a value");
    parse_fails("tru", 3, 0, "expected a value");
    parse_fails("nulL", 4, 0, "expected a value");
    parse_fails("\"abc", 4, 1, "unterminated string");
    parse_fails("\"ab\\", 4, 1, "unterminated string");
    parse_fails("\"a\\qb\"", 6, 2, "bad escape");
    parse_fails("\"\\u12G4\"", 8, 1, "bad escape");
    parse_fails("\"\\u12\"", 6, 1, "bad escape");
    parse_fails("\"\\ud800x\"", 9, 7, "lone high surrogate");
    parse_fails("\"\\ud800\\u0041\"", 14, 7, "lone high surrogate");
    parse_fails("\"\\udc00\"", 8, 7, "lone low surrogate");
    parse_fails("\"a\x01\"", 4, 2, "control character");
    parse_fails("[1] x", 5, 4, "trailing data");
    parse_fails("\"a\0b\"", 5, 2, "control character"); /* a raw NUL is a control character */
    char long_number[80];
    memset(long_number, '1', sizeof long_number);
    parse_fails(long_number, sizeof long_number, 0, "longer than 63");
    /* control: the same texts, repaired, parse */
    JsonDoc doc;
    parse_ok(&doc, "{\"a\": 1, \"b\": [1, 2], \"c\": \"\\ud800\\udc00\", \"d\": 1e+5}");
    json_free(&doc);
}
END_TEST

START_TEST(nesting_is_bounded) {
    char deep[2 * (JSON_MAX_DEPTH + 1)];
    for (int depth = JSON_MAX_DEPTH; depth <= JSON_MAX_DEPTH + 1; depth++) {
        memset(deep, '[', (size_t)depth);
        memset(deep + depth, ']', (size_t)depth);
        JsonDoc doc;
        PosencError err;
        int rc = json_parse(&doc, deep, 2 * (size_t)depth, &err);
        if (depth == JSON_MAX_DEPTH) { /* control: the limit itself parses */
            ck_assert_msg(rc == 0, "%s", err.msg);
            json_free(&doc);
        } else {
            ck_assert_int_eq(rc, -1);
            ck_assert_ptr_nonnull(strstr(err.msg, "nesting deeper than 128"));
        }
    }
    /* a million unclosed brackets fail at the limit, without recursing further */
    size_t n = 1000000;
    char *many = malloc(n);
    memset(many, '[', n);
    parse_fails(many, n, JSON_MAX_DEPTH + 1, "nesting deeper");
    free(many);
}
END_TEST

/* Every member of GPT-2's vocab.json against Python's json module: the
 * reader and an independent one agree on all 50257 keys and ids. */
START_TEST(real_vocabulary_matches_python) {
    if (!models || !tests_python_available("the JSON parity test")) return;
    const char *path = tests_model_path(models, "gpt2-tokenizer/vocab.json");
    size_t len;
    char *text = tests_read_file(path, &len);
    JsonDoc doc;
    parse_ok(&doc, text);
    const char *script =
        "import json,sys\n"
        "for k, v in json.load(open(sys.argv[1], encoding='utf-8')).items():\n"
        "    sys.stdout.buffer.write(k.encode('utf-8', 'surrogatepass') + b'\\0' + str(v).encode() + b'\\n')\n";
    TestsRun py = tests_run_python_ok((const char *[]){"-c", script, path, NULL});
    const char *p = py.out, *end = py.out + py.out_len;
    uint32_t i = 0;
    for (; p < end && i < doc.root.len; i++) {
        const JsonValue *m = &doc.root.items[i];
        size_t klen = strlen(p);
        ck_assert_msg(klen == m->key_len && memcmp(p, m->key, klen) == 0, "key %u differs", i);
        p += klen + 1;
        ck_assert_msg(strtod(p, NULL) == m->number, "value of key %u differs", i);
        p = strchr(p, '\n') + 1;
    }
    ck_assert_int_eq(i, 50257);
    ck_assert(p == end && i == doc.root.len);
    tests_run_free(&py);
    json_free(&doc);
    free(text);
}
END_TEST

int main(void) {
    models = tests_models_dir("the JSON reader on a real vocabulary");
    Suite *s = suite_create("json_parse");
    TCase *tc = tcase_create("units");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, values_read_back);
    tcase_add_test(tc, malformed_texts);
    tcase_add_test(tc, nesting_is_bounded);
    tcase_add_test(tc, real_vocabulary_matches_python);
    suite_add_tcase(s, tc);
    return tests_run_suite(s);
}
