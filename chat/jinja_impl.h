/* Internals shared by the Jinja parser (jinja_parse.c), the evaluator
 * (jinja_eval.c) and the built-in filters, tests and methods
 * (jinja_builtins.c).
 *
 * Memory: everything a parse or a render allocates — AST nodes, strings,
 * lists, dicts, scopes — comes from one arena, freed at once at the end.
 * Errors unwind with longjmp to the entry point (jinja_parse or
 * jinja_render_chat), which frees the arena; so no code below needs a
 * cleanup path, and nothing outside an arena is allocated in between. */
#ifndef POSENC_JINJA_IMPL_H
#define POSENC_JINJA_IMPL_H
#include <limits.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"
#include "chat/jinja.h"

/* ---- limits (untrusted templates) ------------------------------------------ */
enum {
    JINJA_MAX_DEPTH = 200,                    /* nesting of expressions, statements, macro calls */
    JINJA_MAX_ARENA = 256 << 20,              /* bytes a parse or a render may allocate */
    JINJA_MAX_OUTPUT = 64 << 20,              /* bytes of rendered text */
    /* Bytes a render may read without allocating: compared, searched, counted
     * as code points, or passed over item by item (a list item counts as
     * sizeof(JinjaValue)).  One step can read a whole string, so the step
     * limit alone bounds nothing: `'b' in s` over a 30 MB s took 0.45 s a
     * step under the fuzzers' sanitizers.  Code points count at ~130 MB/s
     * there, so this is ~1 s; a chat of 1 MB could be read 128 times. */
    JINJA_MAX_EXAMINED = 128 << 20,
};
/* Expressions and statements evaluated per render.  A 4-message
 * conversation takes at most 267 with the npm packages' templates; 1 M is
 * 3,700 times that.  Templates of nested loops over strings found by the
 * fuzzer (tests/fixtures/fuzz/jinja/nested-for-*) run to the limit: 20 M
 * steps took 5 s under the fuzzers' sanitizers, 2 M 2.7 s, which passed
 * their 10-s timeout on a machine shared with the test suite. */
#define JINJA_MAX_STEPS 1000000LL

/* ---- arena and failure ------------------------------------------------------ */
typedef struct ArenaBlock ArenaBlock;
typedef struct {
    ArenaBlock *head;
    size_t total;        /* bytes allocated so far, checked against JINJA_MAX_ARENA */
    size_t examined;     /* bytes read so far, checked against JINJA_MAX_EXAMINED */
    jmp_buf *fail;       /* where jinja_fail unwinds to */
    PosencError *err;
} JinjaArena;

void *jinja_alloc(JinjaArena *a, size_t size);
void jinja_arena_free(JinjaArena *a);
/* Counts bytes read (see JINJA_MAX_EXAMINED); fails past the limit. */
void jinja_examine(JinjaArena *a, size_t bytes, int line);
/* Fills a->err with "line N: ..." (no line when line <= 0) and unwinds. */
__attribute__((noreturn, format(printf, 3, 4)))
void jinja_fail(JinjaArena *a, int line, const char *fmt, ...);

/* ---- values ------------------------------------------------------------------ */
typedef enum {
    JV_UNDEFINED, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STRING,
    JV_LIST, JV_DICT, JV_NAMESPACE, JV_FUNCTION,
} JinjaType;

typedef struct JinjaList JinjaList;
typedef struct JinjaDict JinjaDict;
typedef struct JinjaFunction JinjaFunction;

typedef struct {
    JinjaType type;
    union {
        int boolean;
        long long integer;
        double number;
        struct { const char *s; size_t len; } str;   /* UTF-8, not NUL-terminated */
        JinjaList *list;
        JinjaDict *dict;                             /* JV_DICT and JV_NAMESPACE */
        const JinjaFunction *fn;
    } as;
} JinjaValue;

struct JinjaList {
    JinjaValue *items;
    size_t n, cap;
};

/* Insertion-ordered, as Python dicts are; looked up linearly (chat data is small). */
struct JinjaDict {
    JinjaValue *keys;    /* strings */
    JinjaValue *values;
    size_t n, cap;
};

JinjaValue jv_undefined(void);
JinjaValue jv_none(void);
JinjaValue jv_bool(int b);
JinjaValue jv_int(long long i);
JinjaValue jv_float(double f);
JinjaValue jv_string(const char *s, size_t len);        /* s must outlive the value */
JinjaValue jv_cstring(const char *s);
JinjaValue jv_string_copy(JinjaArena *a, const char *s, size_t len);
JinjaValue jv_list(JinjaArena *a);
JinjaValue jv_dict(JinjaArena *a);
void jv_list_push(JinjaArena *a, JinjaList *l, JinjaValue v);
void jv_dict_set(JinjaArena *a, JinjaDict *d, JinjaValue key, JinjaValue v);
/* The value under key, or NULL. */
JinjaValue *jv_dict_get(const JinjaDict *d, const char *key, size_t len);

int jv_truthy(JinjaValue v);
/* Python's ==; reads are counted, and values nested more than
 * JINJA_MAX_DEPTH deep (a list holding itself) fail. */
int jv_equal(JinjaArena *a, JinjaValue x, JinjaValue y, int line);
const char *jv_type_name(JinjaType t);

/* Growable byte buffer in the arena. */
typedef struct {
    char *data;
    size_t len, cap;
} JinjaBuffer;
void jinja_buffer_append(JinjaArena *a, JinjaBuffer *b, const char *s, size_t len);
/* v as {{ v }} prints it (see docs/chat.md "Chat templates" for the formats). */
void jv_print(JinjaArena *a, JinjaBuffer *b, JinjaValue v);
JinjaValue jv_to_string(JinjaArena *a, JinjaValue v);
/* tojson: Python json.dumps' layout; indent < 0 means no indentation. */
void jv_write_json(JinjaArena *a, JinjaBuffer *b, JinjaValue v, int indent, int depth, int line);
/* v as Python's repr writes it (None, True, 'text', [..], {'k': v}): what
 * the string filter makes of a list or a dict in transformers' Jinja. */
void jv_write_python(JinjaArena *a, JinjaBuffer *b, JinjaValue v, int depth, int line);

/* ---- AST ------------------------------------------------------------------- */
typedef enum {
    /* statements */
    N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SET_BLOCK, N_MACRO, N_BREAK, N_CONTINUE,
    /* expressions */
    N_LITERAL, N_NAME, N_ATTR, N_INDEX, N_SLICE, N_CALL, N_FILTER, N_TEST,
    N_NOT, N_NEGATE, N_BINARY, N_AND, N_OR, N_TERNARY, N_LIST, N_DICT,
} NodeKind;

typedef enum {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOT_IN,
} BinaryOp;

typedef struct Node Node;
typedef struct {
    Node **items;
    size_t n, cap;
} NodeList;

/* One struct for every node; which fields mean what depends on kind:
 *   N_TEXT, N_LITERAL      value
 *   N_OUTPUT               a: expression
 *   N_IF                   a: condition, body, orelse
 *   N_FOR                  names (loop variables), a: iterable, b: filter or NULL, body, orelse
 *   N_SET                  names (targets) or name + attr (ns.attr), a: value
 *   N_SET_BLOCK            names[0], body
 *   N_MACRO                name, params (N_NAME, default in a), body
 *   N_NAME                 name
 *   N_ATTR                 a: object, name
 *   N_INDEX                a: object, b: index
 *   N_SLICE                a: object, args: start, stop, step (NULL when absent)
 *   N_CALL                 a: callee, args, kwargs (N_NAME with the value in a)
 *   N_FILTER, N_TEST       a: operand, name, args, kwargs; op = 1 for "is not"
 *   N_NOT, N_NEGATE        a
 *   N_BINARY               op, a, b;   N_AND, N_OR: a, b
 *   N_TERNARY              a: condition, b: then, c: else (NULL: undefined)
 *   N_LIST                 args;  N_DICT: args (keys), kwargs (values) */
struct Node {
    NodeKind kind;
    int line;
    int op;
    const char *name;
    const char *attr;
    JinjaValue value;
    Node *a, *b, *c;
    NodeList args, kwargs, body, orelse, params;
    const char *names[2];
    int n_names;
};

void jinja_nodes_push(JinjaArena *a, NodeList *l, Node *n);

struct JinjaTemplate {
    JinjaArena arena;
    NodeList body;
};

/* ---- evaluation --------------------------------------------------------------- */
typedef struct Scope Scope;
typedef struct Renderer Renderer;

/* Callables: the global functions, a method bound to its object, a macro. */
typedef enum { FN_RAISE, FN_NAMESPACE, FN_RANGE, FN_STRFTIME, FN_METHOD, FN_MACRO } FunctionKind;
struct JinjaFunction {
    FunctionKind kind;
    const char *name;       /* method name */
    JinjaValue self;        /* FN_METHOD */
    const Node *macro;      /* FN_MACRO */
    Scope *closure;         /* FN_MACRO: the scope it was defined in, which its body sees */
};

/* The evaluated arguments of a call or filter. */
typedef struct {
    JinjaValue *args;
    size_t n_args;
    const char **kw_names;
    JinjaValue *kw_values;
    size_t n_kwargs;
} CallArgs;

struct Renderer {
    JinjaArena *arena;
    JinjaBuffer out;
    long long steps;
    int depth;
};

JinjaValue jinja_eval(Renderer *r, Scope *scope, const Node *n);

/* jinja_builtins.c: filters, tests, methods of strings, lists and dicts. */
JinjaValue jinja_apply_filter(Renderer *r, const char *name, JinjaValue v, const CallArgs *args, int line);
int jinja_apply_test(Renderer *r, const char *name, JinjaValue v, const CallArgs *args, int line);
/* obj.name for strings, lists and dicts: a bound method, or undefined when
 * there is none (then the caller looks further). */
JinjaValue jinja_method(Renderer *r, JinjaValue obj, const char *name);
JinjaValue jinja_call_method(Renderer *r, const JinjaFunction *fn, const CallArgs *args, int line);

/* UTF-8 helpers: code points are what Python's len, indexes and slices
 * count, each starting at a byte that is not 10xxxxxx.  Those taking the
 * arena count the bytes they read (jinja_examine). */
static inline int jinja_utf8_starts(char c) { return ((unsigned char)c & 0xC0) != 0x80; }
/* The byte after the code point that starts at byte at (< the length). */
size_t jinja_utf8_next(JinjaValue str, size_t at);
size_t jinja_utf8_length(JinjaArena *a, JinjaValue str, int line);
size_t jinja_utf8_offset(JinjaArena *a, JinjaValue str, size_t index, int line);
/* The index-th code point of a string value (index < its length). */
JinjaValue jinja_utf8_char(JinjaArena *a, JinjaValue str, size_t index, int line);
/* The first needle in str at or after byte from, or NULL; linear in what
 * it reads, which it counts.  needle is not empty. */
const char *jinja_find(JinjaArena *a, JinjaValue str, size_t from, JinjaValue needle, int line);
/* A string's code points as a list of strings, in one pass. */
JinjaValue jinja_string_chars(JinjaArena *a, JinjaValue str);
#endif
