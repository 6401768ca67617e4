/* Jinja subset: the filters, tests and methods chat templates use.  Case
 * mapping (upper, lower, title, capitalize) and whitespace (trim, strip,
 * split) are ASCII; lengths, indexes and slices count code points. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_impl.h"

size_t jinja_utf8_length(JinjaArena *a, JinjaValue str, int line) {
    jinja_examine(a, str.as.str.len, line);
    size_t n = 0;
    for (size_t i = 0; i < str.as.str.len; i++) n += jinja_utf8_starts(str.as.str.s[i]);
    return n;
}

size_t jinja_utf8_offset(JinjaArena *a, JinjaValue str, size_t index, int line) {
    const char *s = str.as.str.s;
    size_t i = 0, len = str.as.str.len;
    for (size_t cp = 0; i < len; i++) {
        if (jinja_utf8_starts(s[i])) {
            if (cp == index) break;
            cp++;
        }
    }
    jinja_examine(a, i, line);
    return i;
}

size_t jinja_utf8_next(JinjaValue str, size_t at) {
    do at++;
    while (at < str.as.str.len && !jinja_utf8_starts(str.as.str.s[at]));
    return at;
}

JinjaValue jinja_utf8_char(JinjaArena *a, JinjaValue str, size_t index, int line) {
    size_t from = jinja_utf8_offset(a, str, index, line);
    size_t to = from < str.as.str.len ? jinja_utf8_next(str, from) : from;
    return jv_string(str.as.str.s + from, to - from);
}

/* glibc's memmem is linear (two-way); a memcmp at every offset was
 * quadratic, 0.45 s for one `'b' in s` over 30 MB under the sanitizers.  It
 * searches windows that double from 4 KB (overlapping by k - 1 bytes, so a
 * match across a boundary is found), because ASan's memmem checks its whole
 * range first: one call over the rest of the text for every match made
 * `('ab' * 2000000).replace('ab', '')` take 19 s under the sanitizers. */
const char *jinja_find(JinjaArena *a, JinjaValue str, size_t from, JinjaValue needle, int line) {
    const char *s = str.as.str.s;
    size_t n = str.as.str.len, k = needle.as.str.len, window = 4096;
    for (size_t at = from; at <= n && k <= n - at; at += window, window *= 2) {
        size_t len = n - at - k < window ? n - at : k + window - 1;
        const char *hit = memmem(s + at, len, needle.as.str.s, k);
        jinja_examine(a, hit ? (size_t)(hit - (s + at)) + k : len, line);
        if (hit) return hit;
    }
    return NULL;
}

JinjaValue jinja_string_chars(JinjaArena *a, JinjaValue str) {
    const char *s = str.as.str.s;
    size_t len = str.as.str.len;
    JinjaValue out = jv_list(a);
    size_t i = 0;
    while (i < len && !jinja_utf8_starts(s[i])) i++;   /* as the offsets count */
    while (i < len) {
        size_t j = jinja_utf8_next(str, i);
        jv_list_push(a, out.as.list, jv_string(s + i, j - i));
        i = j;
    }
    return out;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static char to_upper(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 32) : c; }
static char to_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }

/* ---- arguments ------------------------------------------------------------------------- */
/* Argument i by position or by name; undefined when absent. */
static JinjaValue arg(const CallArgs *a, size_t i, const char *name) {
    for (size_t k = 0; k < a->n_kwargs; k++)
        if (!strcmp(a->kw_names[k], name)) return a->kw_values[k];
    return i < a->n_args ? a->args[i] : jv_undefined();
}

static void check_arity(Renderer *r, const CallArgs *a, size_t max, const char *what, int line) {
    if (a->n_args + a->n_kwargs > max) jinja_fail(r->arena, line, "%s takes at most %zu arguments", what, max);
}

static JinjaValue string_arg(Renderer *r, const CallArgs *a, size_t i, const char *name, const char *what, int line) {
    JinjaValue v = arg(a, i, name);
    if (v.type != JV_STRING) jinja_fail(r->arena, line, "%s: '%s' must be a string", what, name);
    return v;
}

static JinjaValue need(Renderer *r, JinjaValue v, JinjaType type, const char *what, int line) {
    if (v.type != type) jinja_fail(r->arena, line, "%s needs %s, not %s", what, jv_type_name(type), jv_type_name(v.type));
    return v;
}

/* ---- string operations ----------------------------------------------------------------- */
/* strip's characters as a table of bytes (whitespace by default): looking
 * each byte up in chars was as slow as chars is long */
static JinjaValue strip(Renderer *r, JinjaValue s, JinjaValue chars, int left, int right, int line) {
    unsigned char in_set[256] = {0};
    if (chars.type == JV_STRING) {
        jinja_examine(r->arena, chars.as.str.len, line);
        for (size_t i = 0; i < chars.as.str.len; i++) in_set[(unsigned char)chars.as.str.s[i]] = 1;
    } else {
        for (int c = 0; c < 256; c++) in_set[c] = (unsigned char)is_space((char)c);
    }
    const char *p = s.as.str.s;
    size_t a = 0, b = s.as.str.len;
    while (left && a < b && in_set[(unsigned char)p[a]]) a++;
    while (right && b > a && in_set[(unsigned char)p[b - 1]]) b--;
    jinja_examine(r->arena, s.as.str.len - (b - a), line);
    return jv_string(p + a, b - a);
}

static JinjaValue map_case(Renderer *r, JinjaValue s, char (*f)(char)) {
    char *d = jinja_alloc(r->arena, s.as.str.len + 1);
    for (size_t i = 0; i < s.as.str.len; i++) d[i] = f(s.as.str.s[i]);
    return jv_string(d, s.as.str.len);
}

static JinjaValue title_case(Renderer *r, JinjaValue s, int only_first) {
    char *d = jinja_alloc(r->arena, s.as.str.len + 1);
    int start = 1;
    for (size_t i = 0; i < s.as.str.len; i++) {
        char c = s.as.str.s[i];
        d[i] = start ? to_upper(c) : only_first ? to_lower(c) : to_lower(c);
        if (only_first) start = 0;
        else start = is_space(c) || c == '-' ? 1 : 0;
    }
    return jv_string(d, s.as.str.len);
}

static JinjaValue replace(Renderer *r, JinjaValue s, JinjaValue from, JinjaValue to, long long count, int line) {
    JinjaBuffer b = {0};
    size_t i = 0, n = s.as.str.len, k = from.as.str.len;
    long long done = 0;
    if (k == 0) {   /* as Python: `to` before every code point and at the end */
        for (; i <= n; i++) {
            if ((count < 0 || done < count) && (i == n || jinja_utf8_starts(s.as.str.s[i]))) {
                jinja_buffer_append(r->arena, &b, to.as.str.s, to.as.str.len);
                done++;
            }
            if (i < n) jinja_buffer_append(r->arena, &b, s.as.str.s + i, 1);
        }
        return jv_string(b.data, b.len);
    }
    for (const char *hit; (count < 0 || done < count) && (hit = jinja_find(r->arena, s, i, from, line)); done++) {
        size_t at = (size_t)(hit - s.as.str.s);
        jinja_buffer_append(r->arena, &b, s.as.str.s + i, at - i);
        jinja_buffer_append(r->arena, &b, to.as.str.s, to.as.str.len);
        i = at + k;
    }
    jinja_buffer_append(r->arena, &b, s.as.str.s + i, n - i);
    return jv_string(b.data, b.len);
}

static JinjaValue split(Renderer *r, JinjaValue s, JinjaValue sep, long long maxsplit, int line) {
    JinjaValue out = jv_list(r->arena);
    const char *p = s.as.str.s;
    size_t n = s.as.str.len, i = 0;
    long long splits = 0;
    if (sep.type != JV_STRING) {   /* runs of whitespace, no empty strings */
        jinja_examine(r->arena, n, line);
        for (;;) {
            while (i < n && is_space(p[i])) i++;
            if (i == n) break;
            size_t start = i;
            if (maxsplit >= 0 && splits >= maxsplit) {   /* the rest as it is, as Python */
                jv_list_push(r->arena, out.as.list, jv_string(p + start, n - start));
                break;
            }
            while (i < n && !is_space(p[i])) i++;
            jv_list_push(r->arena, out.as.list, jv_string(p + start, i - start));
            splits++;
        }
        return out;
    }
    size_t k = sep.as.str.len;
    if (k == 0) jinja_fail(r->arena, line, "split(): empty separator");
    for (const char *hit; (maxsplit < 0 || splits < maxsplit) && (hit = jinja_find(r->arena, s, i, sep, line)); splits++) {
        size_t at = (size_t)(hit - p);
        jv_list_push(r->arena, out.as.list, jv_string(p + i, at - i));
        i = at + k;
    }
    jv_list_push(r->arena, out.as.list, jv_string(p + i, n - i));
    return out;
}

static int has_affix(Renderer *r, JinjaValue s, JinjaValue affix, int suffix, int line) {
    size_t n = s.as.str.len, k = affix.as.str.len;
    if (k > n) return 0;
    jinja_examine(r->arena, k, line);
    return memcmp(s.as.str.s + (suffix ? n - k : 0), affix.as.str.s, k) == 0;
}

static JinjaValue join(Renderer *r, JinjaValue list, JinjaValue sep, int line) {
    need(r, list, JV_LIST, "join", line);
    JinjaBuffer b = {0};
    jinja_buffer_append(r->arena, &b, "", 0);
    for (size_t i = 0; i < list.as.list->n; i++) {
        jinja_examine(r->arena, sizeof(JinjaValue), line);
        if (i && sep.type == JV_STRING) jinja_buffer_append(r->arena, &b, sep.as.str.s, sep.as.str.len);
        jv_print(r->arena, &b, list.as.list->items[i]);
    }
    return jv_string(b.data, b.len);
}

static long long length_of(Renderer *r, JinjaValue v, int line) {
    switch (v.type) {
    case JV_STRING: return (long long)jinja_utf8_length(r->arena, v, line);
    case JV_LIST: return (long long)v.as.list->n;
    case JV_DICT: case JV_NAMESPACE: return (long long)v.as.dict->n;
    case JV_UNDEFINED: return 0;
    default: jinja_fail(r->arena, line, "length of %s", jv_type_name(v.type));
    }
}

/* ---- methods ----------------------------------------------------------------------------- */
JinjaValue jinja_method(Renderer *r, JinjaValue obj, const char *name) {
    static const char *const string_methods[] = {
        "strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper", "lower", "title",
        "capitalize", "replace", "find", "join", NULL};
    static const char *const list_methods[] = {"append", NULL};
    static const char *const dict_methods[] = {"items", "keys", "values", "get", NULL};
    const char *const *names = obj.type == JV_STRING ? string_methods
                             : obj.type == JV_LIST ? list_methods
                             : obj.type == JV_DICT ? dict_methods : NULL;
    /* @huggingface/jinja gives strings and lists a length attribute */
    if (!strcmp(name, "length") && (obj.type == JV_STRING || obj.type == JV_LIST)) return jv_int(length_of(r, obj, 0));
    for (; names && *names; names++)
        if (!strcmp(*names, name)) {
            JinjaFunction *fn = jinja_alloc(r->arena, sizeof *fn);
            fn->kind = FN_METHOD;
            fn->name = *names;
            fn->self = obj;
            return (JinjaValue){.type = JV_FUNCTION, .as.fn = fn};
        }
    return jv_undefined();
}

static JinjaValue dict_items(Renderer *r, JinjaValue d, int keys, int values) {
    JinjaValue out = jv_list(r->arena);
    for (size_t i = 0; i < d.as.dict->n; i++) {
        if (keys && values) {
            JinjaValue pair = jv_list(r->arena);
            jv_list_push(r->arena, pair.as.list, d.as.dict->keys[i]);
            jv_list_push(r->arena, pair.as.list, d.as.dict->values[i]);
            jv_list_push(r->arena, out.as.list, pair);
        } else {
            jv_list_push(r->arena, out.as.list, keys ? d.as.dict->keys[i] : d.as.dict->values[i]);
        }
    }
    return out;
}

JinjaValue jinja_call_method(Renderer *r, const JinjaFunction *fn, const CallArgs *a, int line) {
    JinjaValue self = fn->self;
    const char *m = fn->name;
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        check_arity(r, a, 1, m, line);
        return strip(r, self, arg(a, 0, "chars"), m[0] != 'r', m[0] != 'l', line);
    }
    if (!strcmp(m, "split")) {
        check_arity(r, a, 2, m, line);
        JinjaValue max = arg(a, 1, "maxsplit");
        return split(r, self, arg(a, 0, "sep"), max.type == JV_INT ? max.as.integer : -1, line);
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        check_arity(r, a, 1, m, line);
        JinjaValue affix = arg(a, 0, "prefix");
        if (affix.type == JV_LIST) {
            for (size_t i = 0; i < affix.as.list->n; i++)
                if (has_affix(r, self, need(r, affix.as.list->items[i], JV_STRING, m, line), m[0] == 'e', line))
                    return jv_bool(1);
            return jv_bool(0);
        }
        return jv_bool(has_affix(r, self, need(r, affix, JV_STRING, m, line), m[0] == 'e', line));
    }
    if (!strcmp(m, "upper")) return map_case(r, self, to_upper);
    if (!strcmp(m, "lower")) return map_case(r, self, to_lower);
    if (!strcmp(m, "title")) return title_case(r, self, 0);
    if (!strcmp(m, "capitalize")) return title_case(r, self, 1);
    if (!strcmp(m, "replace")) {
        check_arity(r, a, 3, m, line);
        JinjaValue count = arg(a, 2, "count");
        return replace(r, self, string_arg(r, a, 0, "old", m, line), string_arg(r, a, 1, "new", m, line),
                       count.type == JV_INT ? count.as.integer : -1, line);
    }
    if (!strcmp(m, "find")) {
        JinjaValue sub = string_arg(r, a, 0, "sub", m, line);
        if (sub.as.str.len == 0) return jv_int(0);
        const char *hit = jinja_find(r->arena, self, 0, sub, line);
        if (!hit) return jv_int(-1);
        return jv_int((long long)jinja_utf8_length(r->arena, jv_string(self.as.str.s, (size_t)(hit - self.as.str.s)), line));
    }
    if (!strcmp(m, "join")) return join(r, arg(a, 0, "iterable"), self, line);
    if (!strcmp(m, "append")) {
        check_arity(r, a, 1, m, line);
        jv_list_push(r->arena, self.as.list, arg(a, 0, "item"));
        return jv_none();
    }
    if (!strcmp(m, "items")) return dict_items(r, self, 1, 1);
    if (!strcmp(m, "keys")) return dict_items(r, self, 1, 0);
    if (!strcmp(m, "values")) return dict_items(r, self, 0, 1);
    /* get */
    check_arity(r, a, 2, m, line);
    JinjaValue key = arg(a, 0, "key");
    JinjaValue *v = key.type == JV_STRING ? jv_dict_get(self.as.dict, key.as.str.s, key.as.str.len) : NULL;
    if (v) return *v;
    JinjaValue fallback = arg(a, 1, "default");
    return fallback.type == JV_UNDEFINED ? jv_none() : fallback;
}

/* ---- tests --------------------------------------------------------------------------------- */
int jinja_apply_test(Renderer *r, const char *name, JinjaValue v, const CallArgs *a, int line) {
    JinjaType t = v.type;
    if (!strcmp(name, "defined")) return t != JV_UNDEFINED;
    if (!strcmp(name, "undefined")) return t == JV_UNDEFINED;
    if (!strcmp(name, "none")) return t == JV_NONE;
    if (!strcmp(name, "string")) return t == JV_STRING;
    if (!strcmp(name, "number")) return t == JV_INT || t == JV_FLOAT;
    if (!strcmp(name, "integer")) return t == JV_INT;
    if (!strcmp(name, "float")) return t == JV_FLOAT;
    if (!strcmp(name, "boolean")) return t == JV_BOOL;
    if (!strcmp(name, "true")) return t == JV_BOOL && v.as.boolean;
    if (!strcmp(name, "false")) return t == JV_BOOL && !v.as.boolean;
    if (!strcmp(name, "mapping")) return t == JV_DICT;
    if (!strcmp(name, "iterable")) return t == JV_LIST || t == JV_STRING || t == JV_DICT;
    if (!strcmp(name, "sequence")) return t == JV_LIST || t == JV_STRING || t == JV_DICT;
    if (!strcmp(name, "callable")) return t == JV_FUNCTION;
    if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        need(r, v, JV_INT, name, line);
        return (v.as.integer % 2 != 0) == (name[0] == 'o');
    }
    if (!strcmp(name, "divisibleby")) {
        JinjaValue d = need(r, arg(a, 0, "num"), JV_INT, name, line);
        need(r, v, JV_INT, name, line);
        if (d.as.integer == 0) jinja_fail(r->arena, line, "divisibleby(0)");
        return d.as.integer == -1 || v.as.integer % d.as.integer == 0;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (t != JV_STRING) return 0;
        jinja_examine(r->arena, v.as.str.len, line);
        for (size_t i = 0; i < v.as.str.len; i++) {
            char c = v.as.str.s[i];
            if (name[0] == 'l' ? (c >= 'A' && c <= 'Z') : (c >= 'a' && c <= 'z')) return 0;
        }
        return 1;
    }
    if (!strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "sameas")) return jv_equal(r->arena, v, arg(a, 0, "other"), line);
    if (!strcmp(name, "ne")) return !jv_equal(r->arena, v, arg(a, 0, "other"), line);
    if (!strcmp(name, "in")) {
        JinjaValue seq = arg(a, 0, "seq");
        if (seq.type == JV_LIST) {
            for (size_t i = 0; i < seq.as.list->n; i++)
                if (jv_equal(r->arena, v, seq.as.list->items[i], line)) return 1;
            return 0;
        }
        if (seq.type == JV_DICT) return t == JV_STRING && jv_dict_get(seq.as.dict, v.as.str.s, v.as.str.len);
        jinja_fail(r->arena, line, "'in' test needs a list or dict");
    }
    jinja_fail(r->arena, line, "the test '%s' is not supported", posenc_escape(name).s);
}

/* ---- filters -------------------------------------------------------------------------------- */
/* select, reject, selectattr, rejectattr: keep the items whose value (or
 * attribute) passes the test (args after the test name go to the test). */
static JinjaValue select_items(Renderer *r, JinjaValue list, const CallArgs *a, int by_attr, int keep, int line) {
    need(r, list, JV_LIST, by_attr ? "selectattr" : "select", line);
    size_t first = by_attr ? 1 : 0;
    JinjaValue attr = by_attr ? need(r, arg(a, 0, "attribute"), JV_STRING, "selectattr", line) : jv_undefined();
    JinjaValue test = a->n_args > first ? need(r, a->args[first], JV_STRING, "select's test", line) : jv_undefined();
    CallArgs rest = {0};
    if (a->n_args > first + 1) {
        rest.args = a->args + first + 1;
        rest.n_args = a->n_args - first - 1;
    }
    char test_name[64];
    if (test.type == JV_STRING) {
        if (test.as.str.len >= sizeof test_name) jinja_fail(r->arena, line, "unknown test name");
        memcpy(test_name, test.as.str.s, test.as.str.len);
        test_name[test.as.str.len] = 0;
    }
    JinjaValue out = jv_list(r->arena);
    for (size_t i = 0; i < list.as.list->n; i++) {
        jinja_examine(r->arena, sizeof(JinjaValue), line);
        JinjaValue item = list.as.list->items[i], v = item;
        if (by_attr) {
            JinjaValue *field = item.type == JV_DICT ? jv_dict_get(item.as.dict, attr.as.str.s, attr.as.str.len) : NULL;
            v = field ? *field : jv_undefined();
        }
        int pass = test.type == JV_STRING ? jinja_apply_test(r, test_name, v, &rest, line) : jv_truthy(v);
        if (pass == keep) jv_list_push(r->arena, out.as.list, item);
    }
    return out;
}

/* Whether item x sorts before y by its key (by_value: its value): strings
 * by bytes, case folded unless case_sensitive (ASCII, as elsewhere here);
 * numbers by value. */
static int sorts_before(Renderer *r, JinjaValue x, JinjaValue y, int case_sensitive, int line) {
    if (x.type == JV_STRING && y.type == JV_STRING) {
        size_t n = x.as.str.len < y.as.str.len ? x.as.str.len : y.as.str.len;
        jinja_examine(r->arena, n, line);
        for (size_t i = 0; i < n; i++) {
            unsigned char a = (unsigned char)x.as.str.s[i], b = (unsigned char)y.as.str.s[i];
            if (!case_sensitive) a = (unsigned char)tolower(a), b = (unsigned char)tolower(b);
            if (a != b) return a < b;
        }
        return x.as.str.len < y.as.str.len;
    }
    int xn = x.type == JV_INT || x.type == JV_FLOAT || x.type == JV_BOOL,
        yn = y.type == JV_INT || y.type == JV_FLOAT || y.type == JV_BOOL;
    if (!xn || !yn) jinja_fail(r->arena, line, "dictsort: cannot order %s and %s", jv_type_name(x.type), jv_type_name(y.type));
    double a = x.type == JV_FLOAT ? x.as.number : (double)(x.type == JV_BOOL ? x.as.boolean : x.as.integer);
    double b = y.type == JV_FLOAT ? y.as.number : (double)(y.type == JV_BOOL ? y.as.boolean : y.as.integer);
    return a < b;
}

/* dictsort(case_sensitive=false, by='key', reverse=false): the dict's
 * (key, value) pairs in order, a stable insertion sort (dicts in templates
 * hold a handful of keys). */
static JinjaValue dictsort(Renderer *r, JinjaValue d, const CallArgs *a, int line) {
    int case_sensitive = jv_truthy(arg(a, 0, "case_sensitive"));
    JinjaValue by = arg(a, 1, "by");
    int by_value = by.type == JV_STRING && by.as.str.len == 5 && !memcmp(by.as.str.s, "value", 5);
    if (by.type != JV_UNDEFINED && !by_value && !(by.type == JV_STRING && by.as.str.len == 3 && !memcmp(by.as.str.s, "key", 3)))
        jinja_fail(r->arena, line, "dictsort: by must be 'key' or 'value'");
    int reverse = jv_truthy(arg(a, 2, "reverse"));
    JinjaValue pairs = dict_items(r, d, 1, 1);
    JinjaList *l = pairs.as.list;
    for (size_t i = 1; i < l->n; i++) {
        JinjaValue item = l->items[i];
        size_t j = i;
        for (; j > 0; j--) {
            JinjaValue x = item.as.list->items[by_value], y = l->items[j - 1].as.list->items[by_value];
            int before = reverse ? sorts_before(r, y, x, case_sensitive, line)
                                 : sorts_before(r, x, y, case_sensitive, line);
            if (!before) break;
            l->items[j] = l->items[j - 1];
        }
        l->items[j] = item;
    }
    return pairs;
}

JinjaValue jinja_apply_filter(Renderer *r, const char *name, JinjaValue v, const CallArgs *a, int line) {
    if (!strcmp(name, "safe")) return v;
    if (!strcmp(name, "tojson")) {
        JinjaValue indent = arg(a, 0, "indent");
        JinjaBuffer b = {0};
        jinja_buffer_append(r->arena, &b, "", 0);
        jv_write_json(r->arena, &b, v, indent.type == JV_INT ? (int)(indent.as.integer > 64 ? 64 : indent.as.integer < 0 ? 0 : indent.as.integer) : -1, 0, line);
        return jv_string(b.data, b.len);
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) return jv_int(length_of(r, v, line));
    if (!strcmp(name, "string")) {
        /* a list or a dict as Python writes it (the reference refuses to) */
        if (v.type != JV_LIST && v.type != JV_DICT && v.type != JV_NAMESPACE) return jv_to_string(r->arena, v);
        JinjaBuffer b = {0};
        jinja_buffer_append(r->arena, &b, "", 0);
        jv_write_python(r->arena, &b, v, 0, line);
        return jv_string(b.data, b.len);
    }
    if (!strcmp(name, "dictsort")) return dictsort(r, need(r, v, JV_DICT, name, line), a, line);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        JinjaValue boolean = arg(a, 1, "boolean");
        int use_default = v.type == JV_UNDEFINED || (jv_truthy(boolean) && !jv_truthy(v));
        if (!use_default) return v;
        JinjaValue fallback = arg(a, 0, "default_value");
        return fallback.type == JV_UNDEFINED ? jv_cstring("") : fallback;
    }
    if (!strcmp(name, "list")) {
        if (v.type == JV_LIST) return v;
        if (v.type == JV_DICT) return dict_items(r, v, 1, 0);
        if (v.type == JV_STRING) return jinja_string_chars(r->arena, v);
        jinja_fail(r->arena, line, "list of %s", jv_type_name(v.type));
    }
    if (!strcmp(name, "items")) return dict_items(r, need(r, v, JV_DICT, "items", line), 1, 1);
    if (!strcmp(name, "join")) return join(r, v, arg(a, 0, "d"), line);
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        if (v.type == JV_STRING) {
            size_t n = jinja_utf8_length(r->arena, v, line);
            if (n == 0) return jv_undefined();
            return jinja_utf8_char(r->arena, v, name[0] == 'f' ? 0 : n - 1, line);
        }
        need(r, v, JV_LIST, name, line);
        if (v.as.list->n == 0) return jv_undefined();
        return v.as.list->items[name[0] == 'f' ? 0 : v.as.list->n - 1];
    }
    if (!strcmp(name, "reverse")) {
        if (v.type == JV_STRING) {
            JinjaList *chars = jinja_string_chars(r->arena, v).as.list;
            JinjaBuffer b = {0};
            jinja_buffer_append(r->arena, &b, "", 0);
            for (size_t i = chars->n; i > 0; i--)
                jinja_buffer_append(r->arena, &b, chars->items[i - 1].as.str.s, chars->items[i - 1].as.str.len);
            return jv_string(b.data, b.len);
        }
        need(r, v, JV_LIST, name, line);
        JinjaValue out = jv_list(r->arena);
        for (size_t i = v.as.list->n; i > 0; i--) jv_list_push(r->arena, out.as.list, v.as.list->items[i - 1]);
        return out;
    }
    if (!strcmp(name, "select") || !strcmp(name, "reject")) return select_items(r, v, a, 0, name[0] == 's', line);
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr")) return select_items(r, v, a, 1, name[0] == 's', line);
    if (!strcmp(name, "map")) {
        need(r, v, JV_LIST, name, line);
        JinjaValue attr = arg(a, 99, "attribute");
        JinjaValue out = jv_list(r->arena);
        for (size_t i = 0; i < v.as.list->n; i++) {
            jinja_examine(r->arena, sizeof(JinjaValue), line);
            JinjaValue item = v.as.list->items[i];
            if (attr.type == JV_STRING) {
                JinjaValue *field = item.type == JV_DICT ? jv_dict_get(item.as.dict, attr.as.str.s, attr.as.str.len) : NULL;
                jv_list_push(r->arena, out.as.list, field ? *field : arg(a, 99, "default"));
            } else {
                JinjaValue filter = need(r, arg(a, 0, "filter"), JV_STRING, "map's filter", line);
                char fname[64];
                if (filter.as.str.len >= sizeof fname) jinja_fail(r->arena, line, "unknown filter name");
                memcpy(fname, filter.as.str.s, filter.as.str.len);
                fname[filter.as.str.len] = 0;
                CallArgs none = {0};
                jv_list_push(r->arena, out.as.list, jinja_apply_filter(r, fname, item, &none, line));
            }
        }
        return out;
    }
    if (!strcmp(name, "int")) {
        if (v.type == JV_INT) return v;
        if (v.type == JV_BOOL) return jv_int(v.as.boolean);
        if (v.type == JV_FLOAT) return isfinite(v.as.number) && fabs(v.as.number) < 9e18 ? jv_int((long long)v.as.number) : jv_int(0);
        if (v.type == JV_STRING) {
            char s[32];
            size_t n = v.as.str.len < sizeof s - 1 ? v.as.str.len : sizeof s - 1;
            memcpy(s, v.as.str.s, n);
            s[n] = 0;
            return jv_int(strtoll(s, NULL, 10));
        }
        return jv_int(0);
    }
    if (!strcmp(name, "float")) {
        if (v.type == JV_INT || v.type == JV_BOOL || v.type == JV_FLOAT)
            return jv_float(v.type == JV_INT ? (double)v.as.integer : v.type == JV_BOOL ? v.as.boolean : v.as.number);
        if (v.type == JV_STRING) {
            char s[64];
            size_t n = v.as.str.len < sizeof s - 1 ? v.as.str.len : sizeof s - 1;
            memcpy(s, v.as.str.s, n);
            s[n] = 0;
            return jv_float(strtod(s, NULL));
        }
        return jv_float(0);
    }
    if (!strcmp(name, "abs")) {
        if (v.type == JV_INT && v.as.integer != LLONG_MIN) return jv_int(v.as.integer < 0 ? -v.as.integer : v.as.integer);
        if (v.type == JV_FLOAT) return jv_float(fabs(v.as.number));
        jinja_fail(r->arena, line, "abs of %s", jv_type_name(v.type));
    }
    /* the rest work on strings */
    if (!strcmp(name, "trim") || !strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") ||
        !strcmp(name, "capitalize") || !strcmp(name, "replace") || !strcmp(name, "indent")) {
        JinjaValue s = v.type == JV_STRING ? v : jv_to_string(r->arena, v);
        if (!strcmp(name, "trim")) return strip(r, s, arg(a, 0, "chars"), 1, 1, line);
        if (!strcmp(name, "upper")) return map_case(r, s, to_upper);
        if (!strcmp(name, "lower")) return map_case(r, s, to_lower);
        if (!strcmp(name, "title")) return title_case(r, s, 0);
        if (!strcmp(name, "capitalize")) return title_case(r, s, 1);
        if (!strcmp(name, "replace")) {
            JinjaValue count = arg(a, 2, "count");
            return replace(r, s, string_arg(r, a, 0, "old", name, line), string_arg(r, a, 1, "new", name, line),
                           count.type == JV_INT ? count.as.integer : -1, line);
        }
        /* indent(width=4, first=false, blank=false) */
        JinjaValue width = arg(a, 0, "width");
        long long w = width.type == JV_INT ? width.as.integer : 4;
        if (w < 0 || w > 1024) jinja_fail(r->arena, line, "indent width out of range");
        int first = jv_truthy(arg(a, 1, "first")), blank = jv_truthy(arg(a, 2, "blank"));
        JinjaBuffer b = {0};
        jinja_buffer_append(r->arena, &b, "", 0);
        size_t start = 0;
        for (size_t i = 0, line_no = 0; i <= s.as.str.len; i++) {
            if (i < s.as.str.len && s.as.str.s[i] != '\n') continue;
            int empty = i == start;
            if ((line_no > 0 || first) && (!empty || blank))
                for (long long k = 0; k < w; k++) jinja_buffer_append(r->arena, &b, " ", 1);
            jinja_buffer_append(r->arena, &b, s.as.str.s + start, i - start + (i < s.as.str.len));
            start = i + 1;
            line_no++;
        }
        return jv_string(b.data, b.len);
    }
    jinja_fail(r->arena, line, "the filter '%s' is not supported", posenc_escape(name).s);
}
