/* A recursive-descent JSON reader.  Members of a container are collected on
 * one shared stack and copied to the arena when the container closes, so
 * every container's members are one array; the depth is bounded. */
#include "base/json_parse.h"

#include <stdlib.h>
#include <string.h>

struct JsonChunk {
    JsonChunk *next;
    size_t used, cap;
    max_align_t data[]; /* (cap bytes) */
};

typedef struct {
    const char *start, *s, *end;
    JsonDoc *doc;
    JsonValue *stack; /* (n, cap) members of the open containers */
    size_t n, cap;
    int depth;
    PosencError *err;
} JsonParser;

static void *arena_alloc(JsonDoc *doc, size_t size) {
    size = (size + 15) & ~(size_t)15;
    JsonChunk *c = doc->chunks;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > ((size_t)1 << 20) ? size : (size_t)1 << 20, bytes;
        if (!size_add(&bytes, sizeof(JsonChunk), cap)) posenc_out_of_memory(SIZE_MAX, 1, "JSON");
        c = malloc_or_exit(bytes, "a JSON document");
        c->cap = cap;
        c->used = 0;
        c->next = doc->chunks;
        doc->chunks = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += size;
    return p;
}

static int fail(JsonParser *p, const char *what) {
    return posenc_error(p->err, "invalid JSON at byte %zu: %s", (size_t)(p->s - p->start), what);
}

static void skip_ws(JsonParser *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static int hex4(const char *s, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* A string at p->s into the arena.  Escapes never lengthen the text, so
 * the raw length bounds the decoded one. */
static int parse_string(JsonParser *p, const char **out, uint32_t *out_len) {
    if (p->s >= p->end || *p->s != '"') return fail(p, "expected a string");
    const char *q = ++p->s;
    while (q < p->end && *q != '"') q += *q == '\\' && q + 1 < p->end ? 2 : 1;
    if (q >= p->end) return fail(p, "unterminated string");
    if ((size_t)(q - p->s) >= UINT32_MAX) return fail(p, "string over 4 GB");
    char *dst = arena_alloc(p->doc, (size_t)(q - p->s) + 1), *w = dst;
    while (p->s < q) {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20) return fail(p, "control character in string");
        p->s++;
        if (c != '\\') {
            *w++ = (char)c;
            continue;
        }
        char e = *p->s++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            *w++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            continue;
        }
        uint32_t cp, lo;
        if (e != 'u' || q - p->s < 4 || hex4(p->s, &cp)) {
            p->s -= 2; /* the error names the backslash */
            return fail(p, "bad escape");
        }
        p->s += 4;
        if (cp >= 0xDC00 && cp < 0xE000) return fail(p, "lone low surrogate");
        if (cp >= 0xD800 && cp < 0xDC00) {
            if (q - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u' || hex4(p->s + 2, &lo) ||
                lo < 0xDC00 || lo >= 0xE000)
                return fail(p, "lone high surrogate");
            p->s += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        w += utf8_encode(cp, w);
    }
    *w = '\0';
    p->s = q + 1;
    *out = dst;
    *out_len = (uint32_t)(w - dst);
    return 0;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int parse_number(JsonParser *p, double *v) {
    const char *q = p->s;
    char buf[64];
    if (q < p->end && *q == '-') q++;
    if (q >= p->end || *q < '0' || *q > '9') return fail(p, "expected a value");
    if (*q == '0') q++;
    else
        while (q < p->end && *q >= '0' && *q <= '9') q++;
    if (q < p->end && *q == '.') {
        if (++q >= p->end || *q < '0' || *q > '9') return fail(p, "bad number");
        while (q < p->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < p->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < p->end && (*q == '+' || *q == '-')) q++;
        if (q >= p->end || *q < '0' || *q > '9') return fail(p, "bad number");
        while (q < p->end && *q >= '0' && *q <= '9') q++;
    }
    if ((size_t)(q - p->s) >= sizeof buf) return fail(p, "number longer than 63 characters");
    memcpy(buf, p->s, (size_t)(q - p->s));
    buf[q - p->s] = '\0';
    *v = strtod(buf, NULL);
    p->s = q;
    return 0;
}

static void push(JsonParser *p, const JsonValue *v) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256, bytes;
        if (!size_mul(&bytes, cap, sizeof(JsonValue))) posenc_out_of_memory(cap, sizeof(JsonValue), "JSON");
        JsonValue *s = realloc(p->stack, bytes);
        if (!s) posenc_out_of_memory(cap, sizeof(JsonValue), "a JSON document");
        p->stack = s;
        p->cap = cap;
    }
    p->stack[p->n++] = *v;
}

static int parse_value(JsonParser *p, JsonValue *v);

/* The members of an array or object after its opening bracket. */
static int parse_container(JsonParser *p, JsonValue *v, char close) {
    size_t base = p->n;
    if (++p->depth > JSON_MAX_DEPTH) return fail(p, "nesting deeper than 128");
    skip_ws(p);
    if (p->s < p->end && *p->s == close) p->s++;
    else
        for (;;) {
            JsonValue m = {0};
            skip_ws(p);
            if (close == '}') {
                if (parse_string(p, &m.key, &m.key_len)) return -1;
                skip_ws(p);
                if (p->s >= p->end || *p->s != ':') return fail(p, "expected ':'");
                p->s++;
                skip_ws(p);
            }
            const char *key = m.key;
            uint32_t key_len = m.key_len;
            if (parse_value(p, &m)) return -1;
            m.key = key;
            m.key_len = key_len;
            push(p, &m);
            skip_ws(p);
            if (p->s < p->end && *p->s == ',') {
                p->s++;
                continue;
            }
            if (p->s < p->end && *p->s == close) {
                p->s++;
                break;
            }
            return fail(p, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    size_t count = p->n - base;
    if (count >= UINT32_MAX) return fail(p, "container with over 2^32 members");
    v->type = close == '}' ? JSON_OBJECT : JSON_ARRAY;
    v->len = (uint32_t)count;
    v->items = arena_alloc(p->doc, count * sizeof(JsonValue)); /* count < size of the text */
    if (count) memcpy(v->items, p->stack + base, count * sizeof(JsonValue));
    p->n = base;
    p->depth--;
    return 0;
}

static int literal(JsonParser *p, const char *word, JsonType type, JsonValue *v) {
    size_t n = strlen(word);
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0)
        return fail(p, "expected a value");
    p->s += n;
    v->type = type;
    return 0;
}

static int parse_value(JsonParser *p, JsonValue *v) {
    memset(v, 0, sizeof *v);
    if (p->s >= p->end) return fail(p, "expected a value");
    switch (*p->s) {
    case '{': p->s++; return parse_container(p, v, '}');
    case '[': p->s++; return parse_container(p, v, ']');
    case '"': v->type = JSON_STRING; return parse_string(p, &v->string, &v->len);
    case 't': return literal(p, "true", JSON_TRUE, v);
    case 'f': return literal(p, "false", JSON_FALSE, v);
    case 'n': return literal(p, "null", JSON_NULL, v);
    default: v->type = JSON_NUMBER; return parse_number(p, &v->number);
    }
}

int json_parse(JsonDoc *doc, const char *text, size_t len, PosencError *err) {
    memset(doc, 0, sizeof *doc);
    JsonParser p = {text, text, text + len, doc, NULL, 0, 0, 0, err};
    skip_ws(&p);
    int rc = parse_value(&p, &doc->root);
    if (rc == 0) {
        skip_ws(&p);
        if (p.s != p.end) rc = fail(&p, "trailing data after the value");
    }
    free(p.stack);
    if (rc) json_free(doc);
    return rc;
}

void json_free(JsonDoc *doc) {
    for (JsonChunk *c = doc->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    memset(doc, 0, sizeof *doc);
}

const JsonValue *json_get(const JsonValue *v, const char *key) {
    if (!v || v->type != JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (uint32_t i = v->len; i-- > 0;)
        if (v->items[i].key_len == n && memcmp(v->items[i].key, key, n) == 0) return &v->items[i];
    return NULL;
}

const char *json_get_string(const JsonValue *v, const char *key) {
    const JsonValue *m = json_get(v, key);
    return m && m->type == JSON_STRING ? m->string : NULL;
}

int json_get_bool(const JsonValue *v, const char *key, int absent) {
    const JsonValue *m = json_get(v, key);
    if (!m || m->type == JSON_NULL) return absent;
    return m->type == JSON_TRUE ? 1 : m->type == JSON_FALSE ? 0 : -1;
}

int json_is_string(const JsonValue *v, const char *s) {
    return v && v->type == JSON_STRING && v->len == strlen(s) && memcmp(v->string, s, v->len) == 0;
}
