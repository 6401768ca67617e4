/* Jinja subset: values, scopes and the evaluator; jinja_render_chat. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json_parse.h"
#include "chat/jinja_impl.h"

/* ---- values ------------------------------------------------------------------------ */
JinjaValue jv_undefined(void) { return (JinjaValue){.type = JV_UNDEFINED}; }
JinjaValue jv_none(void) { return (JinjaValue){.type = JV_NONE}; }
JinjaValue jv_bool(int b) { return (JinjaValue){.type = JV_BOOL, .as.boolean = !!b}; }
JinjaValue jv_int(long long i) { return (JinjaValue){.type = JV_INT, .as.integer = i}; }
JinjaValue jv_float(double f) { return (JinjaValue){.type = JV_FLOAT, .as.number = f}; }
JinjaValue jv_string(const char *s, size_t len) {
    JinjaValue v = {.type = JV_STRING};
    v.as.str.s = s ? s : "";
    v.as.str.len = len;
    return v;
}
JinjaValue jv_cstring(const char *s) { return jv_string(s, strlen(s)); }
JinjaValue jv_string_copy(JinjaArena *a, const char *s, size_t len) {
    char *d = jinja_alloc(a, len + 1);
    if (len) memcpy(d, s, len);
    return jv_string(d, len);
}
JinjaValue jv_list(JinjaArena *a) {
    JinjaValue v = {.type = JV_LIST};
    v.as.list = jinja_alloc(a, sizeof *v.as.list);
    return v;
}
JinjaValue jv_dict(JinjaArena *a) {
    JinjaValue v = {.type = JV_DICT};
    v.as.dict = jinja_alloc(a, sizeof *v.as.dict);
    return v;
}

static void *grow(JinjaArena *a, void *items, size_t n, size_t *cap, size_t size) {
    if (n < *cap) return items;
    size_t new_cap = *cap ? 2 * *cap : 4;
    void *p = jinja_alloc(a, new_cap * size);
    if (n) memcpy(p, items, n * size);
    *cap = new_cap;
    return p;
}

void jv_list_push(JinjaArena *a, JinjaList *l, JinjaValue v) {
    l->items = grow(a, l->items, l->n, &l->cap, sizeof *l->items);
    l->items[l->n++] = v;
}

JinjaValue *jv_dict_get(const JinjaDict *d, const char *key, size_t len) {
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].as.str.len == len && memcmp(d->keys[i].as.str.s, key, len) == 0) return &d->values[i];
    return NULL;
}

void jv_dict_set(JinjaArena *a, JinjaDict *d, JinjaValue key, JinjaValue v) {
    JinjaValue *slot = jv_dict_get(d, key.as.str.s, key.as.str.len);
    if (slot) {
        *slot = v;
        return;
    }
    size_t cap = d->cap;
    d->keys = grow(a, d->keys, d->n, &cap, sizeof *d->keys);
    d->values = grow(a, d->values, d->n, &d->cap, sizeof *d->values);
    d->keys[d->n] = key;
    d->values[d->n++] = v;
}

const char *jv_type_name(JinjaType t) {
    static const char *const names[] = {"undefined", "none", "boolean", "integer", "float",
                                        "string", "list", "dict", "namespace", "function"};
    return names[t];
}

int jv_truthy(JinjaValue v) {
    switch (v.type) {
    case JV_UNDEFINED: case JV_NONE: return 0;
    case JV_BOOL: return v.as.boolean;
    case JV_INT: return v.as.integer != 0;
    case JV_FLOAT: return v.as.number != 0;
    case JV_STRING: return v.as.str.len != 0;
    case JV_LIST: return v.as.list->n != 0;
    case JV_DICT: return v.as.dict->n != 0;
    default: return 1;
    }
}

static int is_number(JinjaValue v) { return v.type == JV_INT || v.type == JV_FLOAT || v.type == JV_BOOL; }
static double number_of(JinjaValue v) {
    return v.type == JV_INT ? (double)v.as.integer : v.type == JV_BOOL ? v.as.boolean : v.as.number;
}

/* Python's ==: numbers by value, strings by bytes, lists and dicts by content. */
static int equal_at(JinjaArena *arena, JinjaValue a, JinjaValue b, int depth, int line) {
    if (depth > JINJA_MAX_DEPTH) jinja_fail(arena, line, "==: value nested more than %d deep", JINJA_MAX_DEPTH);
    jinja_examine(arena, sizeof(JinjaValue), line);
    if (is_number(a) && is_number(b)) {
        if (a.type == JV_INT && b.type == JV_INT) return a.as.integer == b.as.integer;
        return number_of(a) == number_of(b);
    }
    if (a.type != b.type) return 0;
    switch (a.type) {
    case JV_UNDEFINED: case JV_NONE: return 1;
    case JV_STRING:
        if (a.as.str.len != b.as.str.len) return 0;
        jinja_examine(arena, a.as.str.len, line);
        return memcmp(a.as.str.s, b.as.str.s, a.as.str.len) == 0;
    case JV_LIST:
        if (a.as.list->n != b.as.list->n) return 0;
        for (size_t i = 0; i < a.as.list->n; i++)
            if (!equal_at(arena, a.as.list->items[i], b.as.list->items[i], depth + 1, line)) return 0;
        return 1;
    case JV_DICT:
        if (a.as.dict->n != b.as.dict->n) return 0;
        for (size_t i = 0; i < a.as.dict->n; i++) {
            JinjaValue *w = jv_dict_get(b.as.dict, a.as.dict->keys[i].as.str.s, a.as.dict->keys[i].as.str.len);
            if (!w || !equal_at(arena, a.as.dict->values[i], *w, depth + 1, line)) return 0;
        }
        return 1;
    default: return a.as.dict == b.as.dict;   /* namespaces and functions: identity */
    }
}

int jv_equal(JinjaArena *a, JinjaValue x, JinjaValue y, int line) { return equal_at(a, x, y, 0, line); }

void jinja_buffer_append(JinjaArena *a, JinjaBuffer *b, const char *s, size_t len) {
    if (len > (size_t)JINJA_MAX_OUTPUT || b->len > (size_t)JINJA_MAX_OUTPUT - len)
        jinja_fail(a, 0, "the template's output exceeds %d MB", JINJA_MAX_OUTPUT >> 20);
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + len + 1) cap *= 2;
        char *d = jinja_alloc(a, cap);
        if (b->len) memcpy(d, b->data, b->len);
        b->data = d;
        b->cap = cap;
    }
    if (len) memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = 0;
}

static void append_cstr(JinjaArena *a, JinjaBuffer *b, const char *s) { jinja_buffer_append(a, b, s, strlen(s)); }

/* The shortest %g form of a finite f that reads back as f. */
static void shortest_double(char *s, size_t n, double f) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, n, "%.*g", prec, f);
        if (strtod(s, NULL) == f) return;
    }
}

/* Floats print as @huggingface/jinja prints them: integral values with
 * ".0", others in the shortest form that reads back the same. */
static void print_float(JinjaArena *a, JinjaBuffer *b, double f) {
    char s[64];
    if (isnan(f)) snprintf(s, sizeof s, "NaN");
    else if (isinf(f)) snprintf(s, sizeof s, f > 0 ? "Infinity" : "-Infinity");
    else if (f == floor(f) && fabs(f) < 1e21) snprintf(s, sizeof s, "%.1f", f);
    else shortest_double(s, sizeof s, f);
    append_cstr(a, b, s);
}

static void write_json_string(JinjaArena *a, JinjaBuffer *b, const char *s, size_t len) {
    append_cstr(a, b, "\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *e = NULL;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                e = esc;
            }
        }
        if (e) append_cstr(a, b, e);
        else jinja_buffer_append(a, b, s + i, 1);
    }
    append_cstr(a, b, "\"");
}

static void newline_indent(JinjaArena *a, JinjaBuffer *b, int indent, int depth) {
    append_cstr(a, b, "\n");
    for (int i = 0; i < indent * depth; i++) append_cstr(a, b, " ");
}

void jv_write_json(JinjaArena *a, JinjaBuffer *b, JinjaValue v, int indent, int depth, int line) {
    if (depth > JINJA_MAX_DEPTH) jinja_fail(a, line, "tojson: value nested more than %d deep", JINJA_MAX_DEPTH);
    const char *item_sep = indent >= 0 ? "," : ", ";
    switch (v.type) {
    case JV_UNDEFINED: case JV_NONE: append_cstr(a, b, "null"); return;
    case JV_BOOL: append_cstr(a, b, v.as.boolean ? "true" : "false"); return;
    case JV_INT: {
        char s[32];
        snprintf(s, sizeof s, "%lld", v.as.integer);
        append_cstr(a, b, s);
        return;
    }
    case JV_FLOAT: {
        /* JSON has no ".0" for integral floats in JavaScript's JSON.stringify */
        char s[64];
        if (!isfinite(v.as.number)) snprintf(s, sizeof s, "null");
        else shortest_double(s, sizeof s, v.as.number);
        append_cstr(a, b, s);
        return;
    }
    case JV_STRING: write_json_string(a, b, v.as.str.s, v.as.str.len); return;
    case JV_LIST:
        append_cstr(a, b, "[");
        for (size_t i = 0; i < v.as.list->n; i++) {
            if (i) append_cstr(a, b, item_sep);
            if (indent >= 0) newline_indent(a, b, indent, depth + 1);
            jv_write_json(a, b, v.as.list->items[i], indent, depth + 1, line);
        }
        if (indent >= 0 && v.as.list->n) newline_indent(a, b, indent, depth);
        append_cstr(a, b, "]");
        return;
    case JV_DICT: case JV_NAMESPACE:
        append_cstr(a, b, "{");
        for (size_t i = 0; i < v.as.dict->n; i++) {
            if (i) append_cstr(a, b, item_sep);
            if (indent >= 0) newline_indent(a, b, indent, depth + 1);
            write_json_string(a, b, v.as.dict->keys[i].as.str.s, v.as.dict->keys[i].as.str.len);
            append_cstr(a, b, ": ");
            jv_write_json(a, b, v.as.dict->values[i], indent, depth + 1, line);
        }
        if (indent >= 0 && v.as.dict->n) newline_indent(a, b, indent, depth);
        append_cstr(a, b, "}");
        return;
    case JV_FUNCTION: jinja_fail(a, line, "tojson: a function has no JSON form");
    }
}

/* A string as Python's repr writes it: in single quotes, or double ones when
 * it holds a single quote and no double one; backslash, that quote and
 * control characters escaped. */
static void write_python_string(JinjaArena *a, JinjaBuffer *b, const char *s, size_t len) {
    int has_single = memchr(s, '\'', len) != NULL, has_double = memchr(s, '"', len) != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    jinja_buffer_append(a, b, &quote, 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '\\' || c == (unsigned char)quote) snprintf(esc, sizeof esc, "\\%c", c);
        else if (c == '\n') snprintf(esc, sizeof esc, "\\n");
        else if (c == '\r') snprintf(esc, sizeof esc, "\\r");
        else if (c == '\t') snprintf(esc, sizeof esc, "\\t");
        else if (c < 0x20 || c == 0x7f) snprintf(esc, sizeof esc, "\\x%02x", c);
        else {
            jinja_buffer_append(a, b, s + i, 1);
            continue;
        }
        append_cstr(a, b, esc);
    }
    jinja_buffer_append(a, b, &quote, 1);
}

void jv_write_python(JinjaArena *a, JinjaBuffer *b, JinjaValue v, int depth, int line) {
    if (depth > JINJA_MAX_DEPTH) jinja_fail(a, line, "string: value nested more than %d deep", JINJA_MAX_DEPTH);
    switch (v.type) {
    case JV_UNDEFINED: case JV_NONE: append_cstr(a, b, "None"); return;
    case JV_BOOL: append_cstr(a, b, v.as.boolean ? "True" : "False"); return;
    case JV_FLOAT:
        if (isnan(v.as.number)) append_cstr(a, b, "nan");
        else if (isinf(v.as.number)) append_cstr(a, b, v.as.number > 0 ? "inf" : "-inf");
        else print_float(a, b, v.as.number);
        return;
    case JV_STRING: write_python_string(a, b, v.as.str.s, v.as.str.len); return;
    case JV_LIST:
        append_cstr(a, b, "[");
        for (size_t i = 0; i < v.as.list->n; i++) {
            if (i) append_cstr(a, b, ", ");
            jv_write_python(a, b, v.as.list->items[i], depth + 1, line);
        }
        append_cstr(a, b, "]");
        return;
    case JV_DICT: case JV_NAMESPACE:
        append_cstr(a, b, "{");
        for (size_t i = 0; i < v.as.dict->n; i++) {
            if (i) append_cstr(a, b, ", ");
            jv_write_python(a, b, v.as.dict->keys[i], depth + 1, line);
            append_cstr(a, b, ": ");
            jv_write_python(a, b, v.as.dict->values[i], depth + 1, line);
        }
        append_cstr(a, b, "}");
        return;
    default: jv_print(a, b, v); return;
    }
}

void jv_print(JinjaArena *a, JinjaBuffer *b, JinjaValue v) {
    switch (v.type) {
    case JV_UNDEFINED: return;
    case JV_NONE: append_cstr(a, b, "None"); return;
    case JV_BOOL: append_cstr(a, b, v.as.boolean ? "true" : "false"); return;
    case JV_INT: {
        char s[32];
        snprintf(s, sizeof s, "%lld", v.as.integer);
        append_cstr(a, b, s);
        return;
    }
    case JV_FLOAT: print_float(a, b, v.as.number); return;
    case JV_STRING: jinja_buffer_append(a, b, v.as.str.s, v.as.str.len); return;
    case JV_FUNCTION: append_cstr(a, b, "<function>"); return;
    default: jv_write_json(a, b, v, -1, 0, 0); return;
    }
}

JinjaValue jv_to_string(JinjaArena *a, JinjaValue v) {
    if (v.type == JV_STRING) return v;
    JinjaBuffer b = {0};
    jv_print(a, &b, v);
    return jv_string(b.data, b.len);
}

/* ---- scopes -------------------------------------------------------------------------- */
struct Scope {
    Scope *parent;
    JinjaDict vars;
};

static Scope *scope_new(Renderer *r, Scope *parent) {
    Scope *s = jinja_alloc(r->arena, sizeof *s);
    s->parent = parent;
    return s;
}

static JinjaValue scope_lookup(const Scope *s, const char *name) {
    size_t len = strlen(name);
    for (; s; s = s->parent) {
        JinjaValue *v = jv_dict_get(&s->vars, name, len);
        if (v) return *v;
    }
    return jv_undefined();
}

static void scope_set(Renderer *r, Scope *s, const char *name, JinjaValue v) {
    jv_dict_set(r->arena, &s->vars, jv_cstring(name), v);
}

/* ---- expressions ---------------------------------------------------------------------- */
static void step(Renderer *r, int line) {
    if (++r->steps > JINJA_MAX_STEPS)
        jinja_fail(r->arena, line, "the template runs for more than %lld steps", JINJA_MAX_STEPS);
}

static void eval_args(Renderer *r, Scope *scope, const Node *n, CallArgs *out) {
    memset(out, 0, sizeof *out);
    if (n->args.n) {
        out->args = jinja_alloc(r->arena, n->args.n * sizeof *out->args);
        for (size_t i = 0; i < n->args.n; i++) out->args[i] = jinja_eval(r, scope, n->args.items[i]);
        out->n_args = n->args.n;
    }
    if (n->kwargs.n) {
        out->kw_names = jinja_alloc(r->arena, n->kwargs.n * sizeof *out->kw_names);
        out->kw_values = jinja_alloc(r->arena, n->kwargs.n * sizeof *out->kw_values);
        for (size_t i = 0; i < n->kwargs.n; i++) {
            out->kw_names[i] = n->kwargs.items[i]->name;
            out->kw_values[i] = jinja_eval(r, scope, n->kwargs.items[i]->a);
        }
        out->n_kwargs = n->kwargs.n;
    }
}

static long long as_index(Renderer *r, JinjaValue v, int line, const char *what) {
    if (v.type == JV_INT) return v.as.integer;
    if (v.type == JV_BOOL) return v.as.boolean;
    jinja_fail(r->arena, line, "%s must be an integer, not %s", what, jv_type_name(v.type));
}

static JinjaValue eval_index(Renderer *r, JinjaValue obj, JinjaValue key, int line) {
    switch (obj.type) {
    case JV_LIST: {
        if (key.type != JV_INT) return jv_undefined();
        long long i = key.as.integer, n = (long long)obj.as.list->n;
        if (i < 0) i += n;
        return i >= 0 && i < n ? obj.as.list->items[i] : jv_undefined();
    }
    case JV_STRING: {
        if (key.type != JV_INT) return jv_undefined();
        long long n = (long long)jinja_utf8_length(r->arena, obj, line), i = key.as.integer;
        if (i < 0) i += n;
        return i >= 0 && i < n ? jinja_utf8_char(r->arena, obj, (size_t)i, line) : jv_undefined();
    }
    case JV_DICT: case JV_NAMESPACE: {
        if (key.type != JV_STRING) return jv_undefined();
        JinjaValue *v = jv_dict_get(obj.as.dict, key.as.str.s, key.as.str.len);
        return v ? *v : jv_undefined();
    }
    case JV_UNDEFINED:
        jinja_fail(r->arena, line, "cannot index an undefined value");
    default:
        return jv_undefined();
    }
}

/* Python's slice arithmetic on a sequence of n items. */
static void slice_bounds(Renderer *r, const JinjaValue *parts, long long n, long long *start, long long *stop,
                         long long *stride, int line) {
    *stride = parts[2].type == JV_UNDEFINED || parts[2].type == JV_NONE ? 1 : as_index(r, parts[2], line, "a slice step");
    if (*stride == 0) jinja_fail(r->arena, line, "slice step cannot be zero");
    long long lo = *stride > 0 ? 0 : -1, hi = *stride > 0 ? n : n - 1;
    for (int k = 0; k < 2; k++) {
        long long *out = k ? stop : start;
        if (parts[k].type == JV_UNDEFINED || parts[k].type == JV_NONE) {
            *out = (k == 0) == (*stride > 0) ? lo : hi;
            continue;
        }
        long long v = as_index(r, parts[k], line, "a slice index");
        if (v < 0) v += n;
        *out = v < lo ? lo : v > hi ? hi : v;
    }
}

/* Moves *i to the slice's next index; 0 when there is none (a step as
 * large as 9223372036854775807 would overflow *i + stride). */
static int slice_next(long long *i, long long stride, long long stop) {
    long long next;
    if (__builtin_add_overflow(*i, stride, &next) || (stride > 0 ? next >= stop : next <= stop)) return 0;
    *i = next;
    return 1;
}

static JinjaValue eval_slice(Renderer *r, Scope *scope, const Node *n) {
    JinjaValue obj = jinja_eval(r, scope, n->a);
    JinjaValue parts[3];
    for (int i = 0; i < 3; i++)
        parts[i] = n->args.items[i] ? jinja_eval(r, scope, n->args.items[i]) : jv_undefined();
    long long start, stop, stride;
    if (obj.type == JV_LIST) {
        slice_bounds(r, parts, (long long)obj.as.list->n, &start, &stop, &stride, n->line);
        JinjaValue out = jv_list(r->arena);
        if (stride > 0 ? start < stop : start > stop)
            for (long long i = start;; ) {
                jv_list_push(r->arena, out.as.list, obj.as.list->items[i]);
                if (!slice_next(&i, stride, stop)) break;
            }
        return out;
    }
    if (obj.type == JV_STRING) {
        const char *s = obj.as.str.s;
        slice_bounds(r, parts, (long long)jinja_utf8_length(r->arena, obj, n->line), &start, &stop, &stride, n->line);
        if (stride == 1) {
            size_t from = jinja_utf8_offset(r->arena, obj, (size_t)start, n->line);
            size_t to = stop > start ? jinja_utf8_offset(r->arena, obj, (size_t)stop, n->line) : from;
            return jv_string(s + from, to - from);
        }
        /* one walk over the string, from code point to code point (finding
         * each by its index made s[::2] quadratic) */
        JinjaBuffer b = {0};
        if (stride > 0 ? start < stop : start > stop) {
            size_t len = obj.as.str.len, at = jinja_utf8_offset(r->arena, obj, (size_t)start, n->line);
            jinja_examine(r->arena, len, n->line);
            for (long long i = start;;) {
                jinja_buffer_append(r->arena, &b, s + at, jinja_utf8_next(obj, at) - at);
                if (!slice_next(&i, stride, stop)) break;
                for (long long k = 0; k < stride; k++) at = jinja_utf8_next(obj, at);   /* forward */
                for (long long k = 0; k > stride; k--)   /* backward: to the start of each before */
                    do at--;
                    while (!jinja_utf8_starts(s[at]));
            }
        }
        return jv_string(b.data, b.len);
    }
    jinja_fail(r->arena, n->line, "cannot slice %s", jv_type_name(obj.type));
}

static JinjaValue eval_attr(Renderer *r, JinjaValue obj, const char *name, int line) {
    if (obj.type == JV_DICT || obj.type == JV_NAMESPACE) {
        JinjaValue *v = jv_dict_get(obj.as.dict, name, strlen(name));
        if (v) return *v;
    }
    if (obj.type == JV_UNDEFINED) jinja_fail(r->arena, line, "'%s' of an undefined value", name);
    return jinja_method(r, obj, name);
}

static JinjaValue arithmetic(Renderer *r, int op, JinjaValue a, JinjaValue b, int line) {
    if (op == OP_CONCAT) {
        JinjaBuffer buf = {0};
        jv_print(r->arena, &buf, a);
        jv_print(r->arena, &buf, b);
        return jv_string(buf.data, buf.len);
    }
    if (op == OP_ADD && a.type == JV_LIST && b.type == JV_LIST) {
        JinjaValue out = jv_list(r->arena);
        for (size_t i = 0; i < a.as.list->n; i++) jv_list_push(r->arena, out.as.list, a.as.list->items[i]);
        for (size_t i = 0; i < b.as.list->n; i++) jv_list_push(r->arena, out.as.list, b.as.list->items[i]);
        return out;
    }
    if (op == OP_ADD && (a.type == JV_STRING || b.type == JV_STRING) &&
        a.type != JV_UNDEFINED && b.type != JV_UNDEFINED && a.type != JV_NONE && b.type != JV_NONE) {
        /* @huggingface/jinja joins a string and any other value */
        JinjaBuffer buf = {0};
        jv_print(r->arena, &buf, a);
        jv_print(r->arena, &buf, b);
        return jv_string(buf.data, buf.len);
    }
    if (op == OP_MUL && a.type == JV_STRING && b.type == JV_INT) {
        /* '' * n and s * 0 are empty whatever n: the fuzzer's '' * 3 ** 22 * 3
         * used to append nothing 94 G times */
        size_t len = a.as.str.len;
        if (b.as.integer > 0 && len > 0 && (unsigned long long)b.as.integer > (size_t)JINJA_MAX_OUTPUT / len)
            jinja_fail(r->arena, line, "string repetition longer than %d MB", JINJA_MAX_OUTPUT >> 20);
        size_t n = b.as.integer > 0 && len > 0 ? (size_t)b.as.integer : 0;
        JinjaBuffer buf = {0};
        jinja_buffer_append(r->arena, &buf, "", 0);
        if (n) jinja_buffer_append(r->arena, &buf, a.as.str.s, len);
        /* doubling, from the copies already made (an arena block outlives a
         * move of the buffer): the work is the result's length */
        for (size_t done = n ? 1 : 0; done < n;) {
            size_t more = n - done < done ? n - done : done;
            jinja_buffer_append(r->arena, &buf, buf.data, more * len);
            done += more;
        }
        return jv_string(buf.data, buf.len);
    }
    if (!is_number(a) || !is_number(b) || a.type == JV_BOOL || b.type == JV_BOOL)
        jinja_fail(r->arena, line, "unsupported operand types %s and %s", jv_type_name(a.type), jv_type_name(b.type));
    if (a.type == JV_INT && b.type == JV_INT && op != OP_DIV) {
        long long x = a.as.integer, y = b.as.integer, z;
        switch (op) {
        case OP_ADD: if (__builtin_add_overflow(x, y, &z)) goto overflow; return jv_int(z);
        case OP_SUB: if (__builtin_sub_overflow(x, y, &z)) goto overflow; return jv_int(z);
        case OP_MUL: if (__builtin_mul_overflow(x, y, &z)) goto overflow; return jv_int(z);
        case OP_FLOORDIV: case OP_MOD:
            if (y == 0) jinja_fail(r->arena, line, "integer division or modulo by zero");
            if (x == LLONG_MIN && y == -1) goto overflow;
            z = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) z--;   /* floor, as Python */
            return op == OP_FLOORDIV ? jv_int(z) : jv_int(x - z * y);
        case OP_POW:
            if (y >= 0) {   /* by squaring: 1 ** 3e9 multiplied 3e9 times */
                long long p = 1, base = x;
                for (; y; y >>= 1) {
                    if ((y & 1) && __builtin_mul_overflow(p, base, &p)) goto overflow;
                    /* base squared is a factor of the result while y > 1 */
                    if (y > 1 && __builtin_mul_overflow(base, base, &base)) goto overflow;
                }
                return jv_int(p);
            }
            break;
        }
    }
    double x = number_of(a), y = number_of(b);
    switch (op) {
    case OP_ADD: return jv_float(x + y);
    case OP_SUB: return jv_float(x - y);
    case OP_MUL: return jv_float(x * y);
    case OP_DIV:
        if (y == 0) jinja_fail(r->arena, line, "division by zero");
        return jv_float(x / y);
    case OP_FLOORDIV:
        if (y == 0) jinja_fail(r->arena, line, "division by zero");
        return jv_float(floor(x / y));
    case OP_MOD:
        if (y == 0) jinja_fail(r->arena, line, "modulo by zero");
        return jv_float(x - floor(x / y) * y);
    default: return jv_float(pow(x, y));
    }
overflow:
    jinja_fail(r->arena, line, "integer overflow");
}

static int contains(Renderer *r, JinjaValue item, JinjaValue container, int line) {
    switch (container.type) {
    case JV_UNDEFINED: return 0;
    case JV_LIST:
        for (size_t i = 0; i < container.as.list->n; i++)
            if (jv_equal(r->arena, item, container.as.list->items[i], line)) return 1;
        return 0;
    case JV_DICT: case JV_NAMESPACE:
        return item.type == JV_STRING && jv_dict_get(container.as.dict, item.as.str.s, item.as.str.len);
    case JV_STRING:
        if (item.type != JV_STRING) jinja_fail(r->arena, line, "'in <string>' requires a string");
        return item.as.str.len == 0 || jinja_find(r->arena, container, 0, item, line);
    default:
        jinja_fail(r->arena, line, "'in' needs a list, dict or string, not %s", jv_type_name(container.type));
    }
}

static int compare(Renderer *r, int op, JinjaValue a, JinjaValue b, int line) {
    int c;
    if (is_number(a) && is_number(b)) {
        double x = number_of(a), y = number_of(b);
        c = x < y ? -1 : x > y ? 1 : 0;
    } else if (a.type == JV_STRING && b.type == JV_STRING) {
        size_t n = a.as.str.len < b.as.str.len ? a.as.str.len : b.as.str.len;
        jinja_examine(r->arena, n, line);
        c = memcmp(a.as.str.s, b.as.str.s, n);
        if (c == 0) c = a.as.str.len < b.as.str.len ? -1 : a.as.str.len > b.as.str.len;
    } else {
        jinja_fail(r->arena, line, "cannot order %s and %s", jv_type_name(a.type), jv_type_name(b.type));
    }
    switch (op) {
    case OP_LT: return c < 0;
    case OP_LE: return c <= 0;
    case OP_GT: return c > 0;
    default: return c >= 0;
    }
}

static JinjaValue eval_binary(Renderer *r, Scope *scope, const Node *n) {
    JinjaValue a = jinja_eval(r, scope, n->a);
    JinjaValue b = jinja_eval(r, scope, n->b);
    switch (n->op) {
    case OP_EQ: return jv_bool(jv_equal(r->arena, a, b, n->line));
    case OP_NE: return jv_bool(!jv_equal(r->arena, a, b, n->line));
    case OP_IN: return jv_bool(contains(r, a, b, n->line));
    case OP_NOT_IN: return jv_bool(!contains(r, a, b, n->line));
    case OP_LT: case OP_LE: case OP_GT: case OP_GE: return jv_bool(compare(r, n->op, a, b, n->line));
    default:
        if (n->op != OP_CONCAT && (a.type == JV_UNDEFINED || b.type == JV_UNDEFINED))
            jinja_fail(r->arena, n->line, "arithmetic on an undefined value");
        return arithmetic(r, n->op, a, b, n->line);
    }
}

static void render_body(Renderer *r, Scope *scope, const NodeList *body, JinjaBuffer *out, int *control);

static JinjaValue call_macro(Renderer *r, const JinjaFunction *fn, const CallArgs *args, int line) {
    const Node *macro = fn->macro;
    if (args->n_args > macro->params.n)
        jinja_fail(r->arena, line, "macro '%s' takes at most %zu arguments", macro->name, macro->params.n);
    if (++r->depth > JINJA_MAX_DEPTH) jinja_fail(r->arena, line, "macro calls nested more than %d deep", JINJA_MAX_DEPTH);
    Scope *scope = scope_new(r, fn->closure);
    for (size_t i = 0; i < macro->params.n; i++) {
        const Node *param = macro->params.items[i];
        JinjaValue v = jv_undefined();
        int given = 0;
        if (i < args->n_args) { v = args->args[i]; given = 1; }
        for (size_t k = 0; k < args->n_kwargs; k++)
            if (!strcmp(args->kw_names[k], param->name)) { v = args->kw_values[k]; given = 1; }
        if (!given && param->a) v = jinja_eval(r, scope, param->a);
        scope_set(r, scope, param->name, v);
    }
    for (size_t k = 0; k < args->n_kwargs; k++) {
        int known = 0;
        for (size_t i = 0; i < macro->params.n; i++) known |= !strcmp(args->kw_names[k], macro->params.items[i]->name);
        if (!known) jinja_fail(r->arena, line, "macro '%s' has no argument '%s'", macro->name, args->kw_names[k]);
    }
    JinjaBuffer out = {0};
    int control = 0;
    render_body(r, scope, &macro->body, &out, &control);
    r->depth--;
    return jv_string(out.data ? out.data : "", out.len);
}

static JinjaValue eval_call(Renderer *r, Scope *scope, const Node *n) {
    JinjaValue callee = jinja_eval(r, scope, n->a);
    CallArgs args;
    eval_args(r, scope, n, &args);
    if (callee.type != JV_FUNCTION) {
        const char *what = n->a->kind == N_NAME ? n->a->name : n->a->kind == N_ATTR ? n->a->attr : "the value";
        jinja_fail(r->arena, n->line, "'%s' is %s, not a function", posenc_escape(what).s,
                   callee.type == JV_UNDEFINED ? "not defined" : jv_type_name(callee.type));
    }
    const JinjaFunction *fn = callee.as.fn;
    switch (fn->kind) {
    case FN_RAISE: {
        JinjaValue msg = args.n_args ? jv_to_string(r->arena, args.args[0]) : jv_cstring("");
        char *s = jinja_alloc(r->arena, msg.as.str.len + 1);
        memcpy(s, msg.as.str.s, msg.as.str.len);
        jinja_fail(r->arena, n->line, "the template raised an exception: %s", posenc_escape(s).s);
    }
    case FN_NAMESPACE: {
        JinjaValue ns = jv_dict(r->arena);
        ns.type = JV_NAMESPACE;
        if (args.n_args > 1 || (args.n_args == 1 && args.args[0].type != JV_DICT))
            jinja_fail(r->arena, n->line, "namespace() takes keyword arguments or one dict");
        if (args.n_args == 1)
            for (size_t i = 0; i < args.args[0].as.dict->n; i++)
                jv_dict_set(r->arena, ns.as.dict, args.args[0].as.dict->keys[i], args.args[0].as.dict->values[i]);
        for (size_t i = 0; i < args.n_kwargs; i++)
            jv_dict_set(r->arena, ns.as.dict, jv_cstring(args.kw_names[i]), args.kw_values[i]);
        return ns;
    }
    case FN_RANGE: {
        long long bounds[3] = {0, 0, 1};
        if (args.n_args < 1 || args.n_args > 3) jinja_fail(r->arena, n->line, "range() takes 1 to 3 arguments");
        for (size_t i = 0; i < args.n_args; i++)
            bounds[args.n_args == 1 ? 1 : i] = as_index(r, args.args[i], n->line, "a range() argument");
        if (bounds[2] == 0) jinja_fail(r->arena, n->line, "range() step cannot be zero");
        JinjaValue out = jv_list(r->arena);
        for (long long i = bounds[0]; bounds[2] > 0 ? i < bounds[1] : i > bounds[1]; i += bounds[2]) {
            step(r, n->line);
            jv_list_push(r->arena, out.as.list, jv_int(i));
        }
        return out;
    }
    case FN_STRFTIME: {
        if (args.n_args != 1 || args.args[0].type != JV_STRING)
            jinja_fail(r->arena, n->line, "strftime_now() takes one format string");
        char fmt[128], s[256];
        if (args.args[0].as.str.len >= sizeof fmt) jinja_fail(r->arena, n->line, "strftime_now(): format too long");
        memcpy(fmt, args.args[0].as.str.s, args.args[0].as.str.len);
        fmt[args.args[0].as.str.len] = 0;
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        size_t len = strftime(s, sizeof s, fmt, &tm);
        return jv_string_copy(r->arena, s, len);
    }
    case FN_METHOD: return jinja_call_method(r, fn, &args, n->line);
    case FN_MACRO: return call_macro(r, fn, &args, n->line);
    }
    return jv_undefined();
}

JinjaValue jinja_eval(Renderer *r, Scope *scope, const Node *n) {
    step(r, n->line);
    if (++r->depth > JINJA_MAX_DEPTH) jinja_fail(r->arena, n->line, "expression nested more than %d deep", JINJA_MAX_DEPTH);
    JinjaValue v;
    switch (n->kind) {
    case N_LITERAL: v = n->value; break;
    case N_NAME: v = scope_lookup(scope, n->name); break;
    case N_ATTR: v = eval_attr(r, jinja_eval(r, scope, n->a), n->attr, n->line); break;
    case N_INDEX: {
        JinjaValue obj = jinja_eval(r, scope, n->a);
        v = eval_index(r, obj, jinja_eval(r, scope, n->b), n->line);
        break;
    }
    case N_SLICE: v = eval_slice(r, scope, n); break;
    case N_CALL: v = eval_call(r, scope, n); break;
    case N_FILTER: {
        JinjaValue operand = jinja_eval(r, scope, n->a);
        CallArgs args;
        eval_args(r, scope, n, &args);
        v = jinja_apply_filter(r, n->name, operand, &args, n->line);
        break;
    }
    case N_TEST: {
        JinjaValue operand = jinja_eval(r, scope, n->a);
        CallArgs args;
        eval_args(r, scope, n, &args);
        v = jv_bool(jinja_apply_test(r, n->name, operand, &args, n->line) != n->op);
        break;
    }
    case N_NOT: v = jv_bool(!jv_truthy(jinja_eval(r, scope, n->a))); break;
    case N_NEGATE: {
        JinjaValue x = jinja_eval(r, scope, n->a);
        if (x.type == JV_INT && x.as.integer != LLONG_MIN) v = jv_int(-x.as.integer);
        else if (x.type == JV_FLOAT) v = jv_float(-x.as.number);
        else jinja_fail(r->arena, n->line, "cannot negate %s", jv_type_name(x.type));
        break;
    }
    case N_BINARY: v = eval_binary(r, scope, n); break;
    case N_AND: v = jinja_eval(r, scope, n->a); if (jv_truthy(v)) v = jinja_eval(r, scope, n->b); break;
    case N_OR: v = jinja_eval(r, scope, n->a); if (!jv_truthy(v)) v = jinja_eval(r, scope, n->b); break;
    case N_TERNARY:
        if (jv_truthy(jinja_eval(r, scope, n->a))) v = jinja_eval(r, scope, n->b);
        else v = n->c ? jinja_eval(r, scope, n->c) : jv_undefined();
        break;
    case N_LIST:
        v = jv_list(r->arena);
        for (size_t i = 0; i < n->args.n; i++) jv_list_push(r->arena, v.as.list, jinja_eval(r, scope, n->args.items[i]));
        break;
    case N_DICT:
        v = jv_dict(r->arena);
        for (size_t i = 0; i < n->args.n; i++) {
            JinjaValue key = jinja_eval(r, scope, n->args.items[i]);
            if (key.type != JV_STRING) jinja_fail(r->arena, n->line, "dict keys must be strings here");
            jv_dict_set(r->arena, v.as.dict, key, jinja_eval(r, scope, n->kwargs.items[i]));
        }
        break;
    default: jinja_fail(r->arena, n->line, "internal: a statement where an expression belongs");
    }
    r->depth--;
    return v;
}

/* ---- statements ------------------------------------------------------------------------ */
enum { FLOW_NONE, FLOW_BREAK, FLOW_CONTINUE };

/* The items a for loop walks: a list's items, a dict's keys, a string's characters. */
static JinjaList *iteration_items(Renderer *r, JinjaValue v, int line) {
    JinjaValue out = jv_list(r->arena);
    switch (v.type) {
    case JV_LIST: return v.as.list;
    case JV_DICT:
        for (size_t i = 0; i < v.as.dict->n; i++) jv_list_push(r->arena, out.as.list, v.as.dict->keys[i]);
        return out.as.list;
    case JV_STRING: return jinja_string_chars(r->arena, v).as.list;
    case JV_UNDEFINED: case JV_NONE: return out.as.list;   /* Jinja iterates undefined as empty */
    default: jinja_fail(r->arena, line, "cannot iterate over %s", jv_type_name(v.type));
    }
}

/* A loop's or a set's targets: one name, or two unpacking a pair. */
static void bind_names(Renderer *r, Scope *scope, const Node *n, JinjaValue item) {
    if (n->n_names == 1) {
        scope_set(r, scope, n->names[0], item);
        return;
    }
    if (item.type != JV_LIST || item.as.list->n != 2)
        jinja_fail(r->arena, n->line, "cannot unpack %s into two names", jv_type_name(item.type));
    scope_set(r, scope, n->names[0], item.as.list->items[0]);
    scope_set(r, scope, n->names[1], item.as.list->items[1]);
}

static void render_for(Renderer *r, Scope *outer, const Node *n, JinjaBuffer *out) {
    JinjaList *all = iteration_items(r, jinja_eval(r, outer, n->a), n->line);
    Scope *scope = scope_new(r, outer);
    JinjaList *items = all;
    if (n->b) {   /* the loop's `if`: filtered before loop.length is known */
        items = jv_list(r->arena).as.list;
        for (size_t i = 0; i < all->n; i++) {
            bind_names(r, scope, n, all->items[i]);
            if (jv_truthy(jinja_eval(r, scope, n->b))) jv_list_push(r->arena, items, all->items[i]);
        }
    }
    size_t count = items->n;
    for (size_t i = 0; i < count; i++) {
        step(r, n->line);
        JinjaValue loop = jv_dict(r->arena);
        JinjaDict *d = loop.as.dict;
        jv_dict_set(r->arena, d, jv_cstring("index"), jv_int((long long)i + 1));
        jv_dict_set(r->arena, d, jv_cstring("index0"), jv_int((long long)i));
        jv_dict_set(r->arena, d, jv_cstring("revindex"), jv_int((long long)(count - i)));
        jv_dict_set(r->arena, d, jv_cstring("revindex0"), jv_int((long long)(count - i - 1)));
        jv_dict_set(r->arena, d, jv_cstring("first"), jv_bool(i == 0));
        jv_dict_set(r->arena, d, jv_cstring("last"), jv_bool(i + 1 == count));
        jv_dict_set(r->arena, d, jv_cstring("length"), jv_int((long long)count));
        jv_dict_set(r->arena, d, jv_cstring("previtem"), i > 0 ? items->items[i - 1] : jv_undefined());
        jv_dict_set(r->arena, d, jv_cstring("nextitem"), i + 1 < count ? items->items[i + 1] : jv_undefined());
        scope_set(r, scope, "loop", loop);
        bind_names(r, scope, n, items->items[i]);
        int control = FLOW_NONE;
        render_body(r, scope, &n->body, out, &control);
        if (control == FLOW_BREAK) break;
    }
    if (count == 0) {
        int control = FLOW_NONE;
        render_body(r, scope, &n->orelse, out, &control);
    }
}

static void render_set(Renderer *r, Scope *scope, const Node *n) {
    JinjaValue v = jinja_eval(r, scope, n->a);
    if (n->attr) {
        JinjaValue ns = scope_lookup(scope, n->names[0]);
        if (ns.type != JV_NAMESPACE)
            jinja_fail(r->arena, n->line, "cannot set '%s.%s': '%s' is not a namespace", n->names[0], n->attr, n->names[0]);
        jv_dict_set(r->arena, ns.as.dict, jv_cstring(n->attr), v);
        return;
    }
    bind_names(r, scope, n, v);
}

static void render_body(Renderer *r, Scope *scope, const NodeList *body, JinjaBuffer *out, int *control) {
    if (++r->depth > JINJA_MAX_DEPTH) jinja_fail(r->arena, 0, "statements nested more than %d deep", JINJA_MAX_DEPTH);
    for (size_t i = 0; i < body->n && *control == FLOW_NONE; i++) {
        const Node *n = body->items[i];
        step(r, n->line);
        switch (n->kind) {
        case N_TEXT: jinja_buffer_append(r->arena, out, n->value.as.str.s, n->value.as.str.len); break;
        case N_OUTPUT: jv_print(r->arena, out, jinja_eval(r, scope, n->a)); break;
        case N_IF:
            render_body(r, scope, jv_truthy(jinja_eval(r, scope, n->a)) ? &n->body : &n->orelse, out, control);
            break;
        case N_FOR: render_for(r, scope, n, out); break;
        case N_SET: render_set(r, scope, n); break;
        case N_SET_BLOCK: {
            JinjaBuffer captured = {0};
            int inner = FLOW_NONE;
            render_body(r, scope, &n->body, &captured, &inner);
            scope_set(r, scope, n->names[0], jv_string(captured.data, captured.len));
            break;
        }
        case N_MACRO: {
            JinjaFunction *fn = jinja_alloc(r->arena, sizeof *fn);
            fn->kind = FN_MACRO;
            fn->macro = n;
            fn->closure = scope;
            scope_set(r, scope, n->name, (JinjaValue){.type = JV_FUNCTION, .as.fn = fn});
            break;
        }
        case N_BREAK: *control = FLOW_BREAK; break;
        case N_CONTINUE: *control = FLOW_CONTINUE; break;
        default: jinja_fail(r->arena, n->line, "internal: an expression where a statement belongs");
        }
    }
    r->depth--;
}

/* ---- entry point --------------------------------------------------------------------------- */
static JinjaValue global_function(Renderer *r, FunctionKind kind) {
    JinjaFunction *fn = jinja_alloc(r->arena, sizeof *fn);
    fn->kind = kind;
    return (JinjaValue){.type = JV_FUNCTION, .as.fn = fn};
}

/* A JSON value as the template sees it: null as none, numbers without a
 * fraction as integers (as Python's json reads them), arrays as lists,
 * objects as dicts.  Strings point into the caller's document. */
static JinjaValue value_from_json(JinjaArena *a, const JsonValue *v) {
    switch (v->type) {
    case JSON_NULL: return jv_none();
    case JSON_FALSE: return jv_bool(0);
    case JSON_TRUE: return jv_bool(1);
    case JSON_NUMBER:
        return v->number == floor(v->number) && fabs(v->number) < 9007199254740992.0
                   ? jv_int((long long)v->number) : jv_float(v->number);
    case JSON_STRING: return jv_string(v->string, v->len);
    case JSON_ARRAY: {
        JinjaValue list = jv_list(a);
        for (uint32_t i = 0; i < v->len; i++) jv_list_push(a, list.as.list, value_from_json(a, &v->items[i]));
        return list;
    }
    case JSON_OBJECT: {
        JinjaValue dict = jv_dict(a);
        for (uint32_t i = 0; i < v->len; i++)
            jv_dict_set(a, dict.as.dict, jv_string(v->items[i].key, v->items[i].key_len),
                        value_from_json(a, &v->items[i]));
        return dict;
    }
    }
    return jv_none();
}

char *jinja_render_chat(const JinjaTemplate *t, const ChatVariables *vars, size_t *len, PosencError *err) {
    JinjaArena arena = {0};
    jmp_buf fail;
    arena.fail = &fail;
    arena.err = err;
    if (setjmp(fail)) {
        jinja_arena_free(&arena);
        return NULL;
    }
    Renderer r = {.arena = &arena};
    Scope *globals = scope_new(&r, NULL);
    scope_set(&r, globals, "raise_exception", global_function(&r, FN_RAISE));
    scope_set(&r, globals, "namespace", global_function(&r, FN_NAMESPACE));
    scope_set(&r, globals, "range", global_function(&r, FN_RANGE));
    scope_set(&r, globals, "strftime_now", global_function(&r, FN_STRFTIME));

    JinjaValue messages = jv_list(&arena);
    for (int i = 0; i < vars->n_messages; i++) {
        JinjaValue m = jv_dict(&arena);
        jv_dict_set(&arena, m.as.dict, jv_cstring("role"), jv_cstring(vars->messages[i].role));
        jv_dict_set(&arena, m.as.dict, jv_cstring("content"), jv_cstring(vars->messages[i].content));
        jv_list_push(&arena, messages.as.list, m);
    }
    scope_set(&r, globals, "messages", messages);
    scope_set(&r, globals, "add_generation_prompt", jv_bool(vars->add_generation_prompt));
    if (vars->bos_token) scope_set(&r, globals, "bos_token", jv_cstring(vars->bos_token));
    if (vars->eos_token) scope_set(&r, globals, "eos_token", jv_cstring(vars->eos_token));
    if (vars->date_string) scope_set(&r, globals, "date_string", jv_cstring(vars->date_string));
    for (uint32_t i = 0; vars->kwargs && i < vars->kwargs->len; i++) {
        const JsonValue *member = &vars->kwargs->items[i];
        jv_dict_set(&arena, &globals->vars, jv_string(member->key, member->key_len),
                    value_from_json(&arena, member));
    }

    Scope *top = scope_new(&r, globals);
    int control = FLOW_NONE;
    render_body(&r, top, &t->body, &r.out, &control);

    char *text = malloc_or_exit(r.out.len + 1, "the rendered chat template");
    if (r.out.len) memcpy(text, r.out.data, r.out.len);
    text[r.out.len] = 0;
    *len = r.out.len;
    jinja_arena_free(&arena);
    return text;
}
