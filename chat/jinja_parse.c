/* Jinja subset: the arena, the lexer (with Hugging Face's whitespace
 * settings) and a recursive-descent parser to the AST of jinja_impl.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_impl.h"

/* ---- arena --------------------------------------------------------------------- */
struct ArenaBlock {
    ArenaBlock *next;
    size_t used, cap;
    max_align_t data[];
};

void jinja_fail(JinjaArena *a, int line, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0) posenc_error(a->err, "line %d: %s", line, msg);
    else posenc_error(a->err, "%s", msg);
    longjmp(*a->fail, 1);
}

void *jinja_alloc(JinjaArena *a, size_t size) {
    size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (size > JINJA_MAX_ARENA || a->total > JINJA_MAX_ARENA - size)
        jinja_fail(a, 0, "the template needs more than %d MB of memory", JINJA_MAX_ARENA >> 20);
    ArenaBlock *b = a->head;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > (64u << 10) ? size : (64u << 10);
        b = malloc_or_exit(sizeof *b + cap, "the chat template");
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    a->total += size;
    memset(p, 0, size);
    return p;
}

void jinja_examine(JinjaArena *a, size_t bytes, int line) {
    if (bytes > JINJA_MAX_EXAMINED || a->examined > JINJA_MAX_EXAMINED - bytes)
        jinja_fail(a, line, "the template reads more than %d MB of values", JINJA_MAX_EXAMINED >> 20);
    a->examined += bytes;
}

void jinja_arena_free(JinjaArena *a) {
    for (ArenaBlock *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    a->head = NULL;
    a->total = 0;
}

void jinja_nodes_push(JinjaArena *a, NodeList *l, Node *n) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4;
        Node **items = jinja_alloc(a, cap * sizeof *items);
        if (l->n) memcpy(items, l->items, l->n * sizeof *items);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = n;
}

/* ---- lexer ----------------------------------------------------------------------- */
typedef enum {
    T_TEXT, T_EXPR_BEGIN, T_EXPR_END, T_STMT_BEGIN, T_STMT_END,
    T_NAME, T_STRING, T_INT, T_FLOAT, T_PUNCT, T_EOF,
} TokenKind;

typedef struct {
    TokenKind kind;
    int line;
    const char *s;      /* T_TEXT, T_STRING (unescaped), T_NAME, T_PUNCT: arena copy, NUL-terminated */
    size_t len;
    long long integer;
    double number;
} Token;

typedef struct {
    JinjaArena *arena;
    const char *src;
    size_t len, pos;
    int line;
    Token *tokens;
    size_t n, cap;
    int strip_next_text;     /* a '-' closed the last tag: the next text loses its leading whitespace */
} Lexer;

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

static char *arena_strndup(JinjaArena *a, const char *s, size_t len) {
    char *d = jinja_alloc(a, len + 1);
    memcpy(d, s, len);
    return d;
}

static Token *push_token(Lexer *lx, TokenKind kind) {
    if (lx->n == lx->cap) {
        size_t cap = lx->cap ? 2 * lx->cap : 64;
        Token *t = jinja_alloc(lx->arena, cap * sizeof *t);
        if (lx->n) memcpy(t, lx->tokens, lx->n * sizeof *t);
        lx->tokens = t;
        lx->cap = cap;
    }
    Token *t = &lx->tokens[lx->n++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->line = lx->line;
    return t;
}

static void advance(Lexer *lx, size_t k) {
    for (size_t i = 0; i < k && lx->pos < lx->len; i++)
        if (lx->src[lx->pos++] == '\n') lx->line++;
}

static int at(const Lexer *lx, const char *s) {
    size_t k = strlen(s);
    return lx->len - lx->pos >= k && memcmp(lx->src + lx->pos, s, k) == 0;
}

/* The text before the next tag.  A '-' on the previous tag's close strips
 * its leading whitespace; the next tag's '-' or lstrip_blocks strips its end
 * (done by the tag, which sees whether it has one). */
static void lex_text(Lexer *lx) {
    size_t start = lx->pos;
    int line = lx->line;
    while (lx->pos < lx->len) {
        if (lx->src[lx->pos] == '{' && lx->pos + 1 < lx->len &&
            (lx->src[lx->pos + 1] == '{' || lx->src[lx->pos + 1] == '%' || lx->src[lx->pos + 1] == '#'))
            break;
        advance(lx, 1);
    }
    size_t end = lx->pos;
    if (lx->strip_next_text)
        while (start < end && is_space(lx->src[start])) start++;
    lx->strip_next_text = 0;
    if (start == end) return;
    Token *t = push_token(lx, T_TEXT);
    t->line = line;
    t->s = lx->src + start;   /* trimmed later, see strip_previous_text */
    t->len = end - start;
}

/* '{%-', '{{-', '{#-': the text before loses its trailing whitespace. */
static void strip_previous_text(Lexer *lx) {
    if (lx->n == 0 || lx->tokens[lx->n - 1].kind != T_TEXT) return;
    Token *t = &lx->tokens[lx->n - 1];
    while (t->len && is_space(t->s[t->len - 1])) t->len--;
    if (t->len == 0) lx->n--;
}

/* lstrip_blocks: spaces and tabs between the start of a line and a block or
 * comment tag are not text. */
static void lstrip_block(Lexer *lx) {
    size_t p = lx->pos;
    while (p > 0 && (lx->src[p - 1] == ' ' || lx->src[p - 1] == '\t')) p--;
    if (p > 0 && lx->src[p - 1] != '\n') return;
    size_t run = lx->pos - p;
    if (run == 0 || lx->n == 0 || lx->tokens[lx->n - 1].kind != T_TEXT) return;
    Token *t = &lx->tokens[lx->n - 1];
    if (t->s + t->len != lx->src + lx->pos) return;   /* the run was already stripped */
    t->len = t->len > run ? t->len - run : 0;
    if (t->len == 0) lx->n--;
}

/* trim_blocks: the first newline after a block or comment tag is dropped. */
static void trim_block(Lexer *lx) {
    if (lx->pos < lx->len && lx->src[lx->pos] == '\n') advance(lx, 1);
}

static void lex_string(Lexer *lx) {
    char quote = lx->src[lx->pos];
    int line = lx->line;
    advance(lx, 1);
    JinjaBuffer b = {0};
    for (;;) {
        if (lx->pos >= lx->len) jinja_fail(lx->arena, line, "unterminated string literal");
        char c = lx->src[lx->pos];
        if (c == quote) { advance(lx, 1); break; }
        if (c != '\\') {
            size_t run = 1;
            while (lx->pos + run < lx->len && lx->src[lx->pos + run] != quote && lx->src[lx->pos + run] != '\\')
                run++;
            jinja_buffer_append(lx->arena, &b, lx->src + lx->pos, run);
            advance(lx, run);
            continue;
        }
        if (lx->pos + 1 >= lx->len) jinja_fail(lx->arena, line, "unterminated string literal");
        char e = lx->src[lx->pos + 1];
        const char *map = "n\nt\tr\rb\bf\fv\v''\"\"\\\\";
        const char *hit = NULL;
        for (const char *m = map; *m; m += 2)
            if (*m == e) { hit = m + 1; break; }
        if (hit) {
            jinja_buffer_append(lx->arena, &b, hit, 1);
            advance(lx, 2);
            continue;
        }
        if (e == 'x' || e == 'u') {
            int digits = e == 'x' ? 2 : 4;
            uint32_t cp = 0;
            if (lx->pos + 2 + (size_t)digits > lx->len) jinja_fail(lx->arena, line, "bad \\%c escape", e);
            for (int i = 0; i < digits; i++) {
                char h = lx->src[lx->pos + 2 + i];
                int v = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                      : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                if (v < 0) jinja_fail(lx->arena, line, "bad \\%c escape", e);
                cp = cp * 16 + (uint32_t)v;
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) jinja_fail(lx->arena, line, "\\u escape of a surrogate");
            char u[4];
            size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
            if (n == 1) u[0] = (char)cp;
            else if (n == 2) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3F)); }
            else { u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F)); }
            jinja_buffer_append(lx->arena, &b, u, n);
            advance(lx, 2 + (size_t)digits);
            continue;
        }
        if ((unsigned char)e < 0x20 || (unsigned char)e >= 0x7F)
            jinja_fail(lx->arena, line, "unknown escape '\\' + byte 0x%02x in a string literal", (unsigned char)e);
        jinja_fail(lx->arena, line, "unknown escape '\\%c' in a string literal", e);
    }
    Token *t = push_token(lx, T_STRING);
    t->line = line;
    t->s = b.data ? b.data : "";
    t->len = b.len;
}

/* The inside of '{{ ... }}' or '{% ... %}' up to and including its close. */
static void lex_tag(Lexer *lx, int is_stmt) {
    int line = lx->line;
    int braces = 0;   /* '}' closes a dict literal, not the tag, while braces > 0 */
    for (;;) {
        while (lx->pos < lx->len && is_space(lx->src[lx->pos])) advance(lx, 1);
        if (lx->pos >= lx->len)
            jinja_fail(lx->arena, line, "missing '%s' for the tag opened here", is_stmt ? "%}" : "}}");
        const char *close = is_stmt ? "%}" : "}}";
        int dash = lx->src[lx->pos] == '-' && lx->pos + 2 < lx->len &&
                   memcmp(lx->src + lx->pos + 1, close, 2) == 0;
        if ((dash || at(lx, close)) && (is_stmt || braces == 0)) {
            push_token(lx, is_stmt ? T_STMT_END : T_EXPR_END);
            advance(lx, dash ? 3 : 2);
            if (dash) lx->strip_next_text = 1;
            if (is_stmt) trim_block(lx);
            return;
        }
        char c = lx->src[lx->pos];
        if (c == '\'' || c == '"') { lex_string(lx); continue; }
        if (is_digit(c)) {
            size_t start = lx->pos;
            while (lx->pos < lx->len && (is_digit(lx->src[lx->pos]) || lx->src[lx->pos] == '_')) advance(lx, 1);
            int is_float = 0;
            int after_dot = lx->n > 0 && lx->tokens[lx->n - 1].kind == T_PUNCT && lx->tokens[lx->n - 1].s[0] == '.';
            if (!after_dot && lx->pos + 1 < lx->len && lx->src[lx->pos] == '.' && is_digit(lx->src[lx->pos + 1])) {
                is_float = 1;
                advance(lx, 1);
                while (lx->pos < lx->len && is_digit(lx->src[lx->pos])) advance(lx, 1);
            }
            char num[64];
            size_t k = 0;
            for (size_t i = start; i < lx->pos && k + 1 < sizeof num; i++)
                if (lx->src[i] != '_') num[k++] = lx->src[i];
            num[k] = 0;
            if (lx->pos - start >= sizeof num) jinja_fail(lx->arena, line, "number literal too long");
            Token *t = push_token(lx, is_float ? T_FLOAT : T_INT);
            if (is_float) t->number = strtod(num, NULL);
            else {
                errno = 0;
                t->integer = strtoll(num, NULL, 10);
                if (errno == ERANGE) jinja_fail(lx->arena, line, "integer literal too large");
            }
            continue;
        }
        if (is_word(c)) {
            size_t start = lx->pos;
            while (lx->pos < lx->len && is_word(lx->src[lx->pos])) advance(lx, 1);
            Token *t = push_token(lx, T_NAME);
            t->s = arena_strndup(lx->arena, lx->src + start, lx->pos - start);
            t->len = lx->pos - start;
            continue;
        }
        static const char *const puncts[] = {
            "**", "//", "==", "!=", "<=", ">=",
            "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "=", "+", "-", "*", "/", "%", "~", "<", ">",
        };
        const char *hit = NULL;
        for (size_t i = 0; i < sizeof puncts / sizeof *puncts; i++)
            if (at(lx, puncts[i])) { hit = puncts[i]; break; }
        if (!hit) {
            if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7F)
                jinja_fail(lx->arena, lx->line, "unexpected byte 0x%02x inside a tag", (unsigned char)c);
            jinja_fail(lx->arena, lx->line, "unexpected character '%c' inside a tag", c);
        }
        if (*hit == '{') braces++;
        if (*hit == '}') braces--;
        Token *t = push_token(lx, T_PUNCT);
        t->s = hit;
        t->len = strlen(hit);
        advance(lx, t->len);
    }
}

static void lex(Lexer *lx) {
    while (lx->pos < lx->len) {
        lex_text(lx);
        if (lx->pos >= lx->len) break;
        char kind = lx->src[lx->pos + 1];
        int dash = lx->pos + 2 < lx->len && lx->src[lx->pos + 2] == '-';
        if (kind != '{') lstrip_block(lx);
        if (dash) strip_previous_text(lx);
        int line = lx->line;
        if (kind == '#') {
            advance(lx, dash ? 3 : 2);
            for (;;) {
                if (lx->pos + 1 >= lx->len) jinja_fail(lx->arena, line, "unterminated comment");
                if (at(lx, "#}")) break;
                advance(lx, 1);
            }
            if (lx->src[lx->pos - 1] == '-') lx->strip_next_text = 1;
            advance(lx, 2);
            trim_block(lx);
            continue;
        }
        push_token(lx, kind == '%' ? T_STMT_BEGIN : T_EXPR_BEGIN);
        advance(lx, dash ? 3 : 2);
        lex_tag(lx, kind == '%');
    }
    /* text tokens point into the source: copy them so the template owns them */
    for (size_t i = 0; i < lx->n; i++)
        if (lx->tokens[i].kind == T_TEXT)
            lx->tokens[i].s = arena_strndup(lx->arena, lx->tokens[i].s, lx->tokens[i].len);
    push_token(lx, T_EOF);
}

/* ---- parser ------------------------------------------------------------------------ */
typedef struct {
    JinjaArena *arena;
    const Token *tok;
    size_t pos, n;
    int depth;
} Parser;

static const Token *peek(const Parser *p) { return &p->tok[p->pos]; }
static const Token *next(Parser *p) {
    const Token *t = &p->tok[p->pos];
    if (t->kind != T_EOF) p->pos++;
    return t;
}
static int is_punct(const Token *t, const char *s) { return t->kind == T_PUNCT && strcmp(t->s, s) == 0; }
static int is_name(const Token *t, const char *s) { return t->kind == T_NAME && strcmp(t->s, s) == 0; }

static const char *describe(const Token *t) {
    switch (t->kind) {
    case T_TEXT: return "text";
    case T_EXPR_BEGIN: return "'{{'";
    case T_EXPR_END: return "'}}'";
    case T_STMT_BEGIN: return "'{%'";
    case T_STMT_END: return "'%}'";
    case T_STRING: return "a string";
    case T_INT: case T_FLOAT: return "a number";
    case T_EOF: return "the end of the template";
    default: return t->s;
    }
}

static void expect_punct(Parser *p, const char *s) {
    const Token *t = next(p);
    if (!is_punct(t, s)) jinja_fail(p->arena, t->line, "expected '%s', found %s", s, describe(t));
}

static const char *expect_name(Parser *p) {
    const Token *t = next(p);
    if (t->kind != T_NAME) jinja_fail(p->arena, t->line, "expected a name, found %s", describe(t));
    return t->s;
}

static void expect_kind(Parser *p, TokenKind kind, const char *what) {
    const Token *t = next(p);
    if (t->kind != kind) jinja_fail(p->arena, t->line, "expected %s, found %s", what, describe(t));
}

static Node *new_node(Parser *p, NodeKind kind, int line) {
    Node *n = jinja_alloc(p->arena, sizeof *n);
    n->kind = kind;
    n->line = line;
    return n;
}

static void enter(Parser *p, int line) {
    if (++p->depth > JINJA_MAX_DEPTH) jinja_fail(p->arena, line, "nested more than %d deep", JINJA_MAX_DEPTH);
}

static Node *parse_expr(Parser *p);
static Node *parse_or(Parser *p);
static Node *parse_unary(Parser *p);

/* '(' args ')' after the '(' was consumed: positional, then name=value. */
static void parse_args(Parser *p, Node *n) {
    while (!is_punct(peek(p), ")")) {
        const Token *t = peek(p);
        if (t->kind == T_NAME && is_punct(&p->tok[p->pos + 1], "=")) {
            next(p);
            next(p);
            Node *kw = new_node(p, N_NAME, t->line);
            kw->name = t->s;
            kw->a = parse_expr(p);
            jinja_nodes_push(p->arena, &n->kwargs, kw);
        } else {
            if (n->kwargs.n) jinja_fail(p->arena, t->line, "positional argument after a keyword argument");
            jinja_nodes_push(p->arena, &n->args, parse_expr(p));
        }
        if (!is_punct(peek(p), ",")) break;
        next(p);
    }
    expect_punct(p, ")");
}

static Node *parse_primary(Parser *p) {
    const Token *t = next(p);
    Node *n;
    switch (t->kind) {
    case T_STRING: {
        n = new_node(p, N_LITERAL, t->line);
        /* adjacent literals concatenate, as in Python */
        if (peek(p)->kind == T_STRING) {
            JinjaBuffer b = {0};
            jinja_buffer_append(p->arena, &b, t->s, t->len);
            while (peek(p)->kind == T_STRING) {
                const Token *u = next(p);
                jinja_buffer_append(p->arena, &b, u->s, u->len);
            }
            n->value = jv_string(b.data, b.len);
        } else {
            n->value = jv_string(t->s, t->len);
        }
        return n;
    }
    case T_INT:
        n = new_node(p, N_LITERAL, t->line);
        n->value = jv_int(t->integer);
        return n;
    case T_FLOAT:
        n = new_node(p, N_LITERAL, t->line);
        n->value = jv_float(t->number);
        return n;
    case T_NAME:
        n = new_node(p, N_LITERAL, t->line);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) n->value = jv_bool(1);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) n->value = jv_bool(0);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) n->value = jv_none();
        else {
            n->kind = N_NAME;
            n->name = t->s;
        }
        return n;
    case T_PUNCT:
        if (is_punct(t, "(")) {
            enter(p, t->line);
            Node *first = parse_expr(p);
            if (is_punct(peek(p), ",")) {   /* a tuple: a list here */
                n = new_node(p, N_LIST, t->line);
                jinja_nodes_push(p->arena, &n->args, first);
                while (is_punct(peek(p), ",")) {
                    next(p);
                    if (is_punct(peek(p), ")")) break;
                    jinja_nodes_push(p->arena, &n->args, parse_expr(p));
                }
                first = n;
            }
            expect_punct(p, ")");
            p->depth--;
            return first;
        }
        if (is_punct(t, "[")) {
            enter(p, t->line);
            n = new_node(p, N_LIST, t->line);
            while (!is_punct(peek(p), "]")) {
                jinja_nodes_push(p->arena, &n->args, parse_expr(p));
                if (!is_punct(peek(p), ",")) break;
                next(p);
            }
            expect_punct(p, "]");
            p->depth--;
            return n;
        }
        if (is_punct(t, "{")) {
            enter(p, t->line);
            n = new_node(p, N_DICT, t->line);
            while (!is_punct(peek(p), "}")) {
                jinja_nodes_push(p->arena, &n->args, parse_expr(p));
                expect_punct(p, ":");
                jinja_nodes_push(p->arena, &n->kwargs, parse_expr(p));
                if (!is_punct(peek(p), ",")) break;
                next(p);
            }
            expect_punct(p, "}");
            p->depth--;
            return n;
        }
        /* fall through */
    default:
        jinja_fail(p->arena, t->line, "expected an expression, found %s", describe(t));
    }
}

/* x.name, x[i], x[a:b:c], x(args), then filters and tests. */
static Node *parse_postfix(Parser *p) {
    Node *n = parse_primary(p);
    for (;;) {
        const Token *t = peek(p);
        if (is_punct(t, ".")) {
            next(p);
            const Token *a = next(p);
            Node *m = new_node(p, N_ATTR, t->line);
            m->a = n;
            if (a->kind == T_NAME) m->attr = a->s;
            else if (a->kind == T_INT) {   /* x.0 is x[0] */
                m->kind = N_INDEX;
                m->b = new_node(p, N_LITERAL, a->line);
                m->b->value = jv_int(a->integer);
            } else jinja_fail(p->arena, a->line, "expected a name after '.', found %s", describe(a));
            n = m;
        } else if (is_punct(t, "[")) {
            next(p);
            enter(p, t->line);
            Node *parts[3] = {NULL, NULL, NULL};
            int colons = 0;
            for (;;) {
                const Token *u = peek(p);
                if (is_punct(u, "]")) break;
                if (is_punct(u, ":")) {
                    if (++colons > 2) jinja_fail(p->arena, u->line, "too many ':' in a slice");
                    next(p);
                    continue;
                }
                if (parts[colons]) jinja_fail(p->arena, u->line, "expected ']' or ':', found %s", describe(u));
                parts[colons] = parse_expr(p);
            }
            expect_punct(p, "]");
            p->depth--;
            Node *m;
            if (colons == 0) {
                if (!parts[0]) jinja_fail(p->arena, t->line, "empty subscript");
                m = new_node(p, N_INDEX, t->line);
                m->b = parts[0];
            } else {
                m = new_node(p, N_SLICE, t->line);
                for (int i = 0; i < 3; i++) jinja_nodes_push(p->arena, &m->args, parts[i]);
            }
            m->a = n;
            n = m;
        } else if (is_punct(t, "(")) {
            next(p);
            enter(p, t->line);
            Node *m = new_node(p, N_CALL, t->line);
            m->a = n;
            parse_args(p, m);
            p->depth--;
            n = m;
        } else if (is_punct(t, "|")) {
            next(p);
            Node *m = new_node(p, N_FILTER, t->line);
            m->a = n;
            m->name = expect_name(p);
            if (is_punct(peek(p), "(")) {
                next(p);
                parse_args(p, m);
            }
            n = m;
        } else if (is_name(t, "is")) {
            next(p);
            Node *m = new_node(p, N_TEST, t->line);
            m->a = n;
            if (is_name(peek(p), "not")) {
                next(p);
                m->op = 1;
            }
            const Token *name = next(p);
            if (name->kind != T_NAME) jinja_fail(p->arena, name->line, "expected a test name after 'is'");
            m->name = name->s;
            const Token *u = peek(p);
            if (is_punct(u, "(")) {
                next(p);
                parse_args(p, m);
            } else if (u->kind == T_STRING || u->kind == T_INT || u->kind == T_FLOAT ||
                       (u->kind == T_NAME && !is_name(u, "and") && !is_name(u, "or") && !is_name(u, "else") &&
                        !is_name(u, "if") && !is_name(u, "in") && !is_name(u, "is") && !is_name(u, "not"))) {
                jinja_nodes_push(p->arena, &m->args, parse_primary(p));   /* `is equalto 'x'` */
            }
            n = m;
        } else {
            return n;
        }
    }
}

static Node *parse_unary(Parser *p) {
    const Token *t = peek(p);
    if (is_punct(t, "-") || is_punct(t, "+")) {
        next(p);
        enter(p, t->line);
        Node *operand = parse_unary(p);
        p->depth--;
        if (is_punct(t, "+")) return operand;
        Node *n = new_node(p, N_NEGATE, t->line);
        n->a = operand;
        return n;
    }
    return parse_postfix(p);
}

static Node *binary(Parser *p, int op, int line, Node *a, Node *b) {
    Node *n = new_node(p, N_BINARY, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static Node *parse_pow(Parser *p) {
    Node *n = parse_unary(p);
    while (is_punct(peek(p), "**")) {
        int line = next(p)->line;
        n = binary(p, OP_POW, line, n, parse_unary(p));
    }
    return n;
}

static Node *parse_math2(Parser *p) {
    Node *n = parse_pow(p);
    for (;;) {
        const Token *t = peek(p);
        int op = is_punct(t, "*") ? OP_MUL : is_punct(t, "/") ? OP_DIV
               : is_punct(t, "//") ? OP_FLOORDIV : is_punct(t, "%") ? OP_MOD : -1;
        if (op < 0) return n;
        next(p);
        n = binary(p, op, t->line, n, parse_pow(p));
    }
}

static Node *parse_concat(Parser *p) {
    Node *n = parse_math2(p);
    while (is_punct(peek(p), "~")) {
        int line = next(p)->line;
        n = binary(p, OP_CONCAT, line, n, parse_math2(p));
    }
    return n;
}

static Node *parse_math1(Parser *p) {
    Node *n = parse_concat(p);
    for (;;) {
        const Token *t = peek(p);
        int op = is_punct(t, "+") ? OP_ADD : is_punct(t, "-") ? OP_SUB : -1;
        if (op < 0) return n;
        next(p);
        n = binary(p, op, t->line, n, parse_concat(p));
    }
}

static Node *parse_compare(Parser *p) {
    Node *n = parse_math1(p);
    for (;;) {
        const Token *t = peek(p);
        int op = is_punct(t, "==") ? OP_EQ : is_punct(t, "!=") ? OP_NE : is_punct(t, "<") ? OP_LT
               : is_punct(t, "<=") ? OP_LE : is_punct(t, ">") ? OP_GT : is_punct(t, ">=") ? OP_GE
               : is_name(t, "in") ? OP_IN : -1;
        if (op < 0 && is_name(t, "not") && is_name(&p->tok[p->pos + 1], "in")) {
            next(p);
            op = OP_NOT_IN;
        }
        if (op < 0) return n;
        next(p);
        n = binary(p, op, t->line, n, parse_math1(p));
    }
}

static Node *parse_not(Parser *p) {
    const Token *t = peek(p);
    if (is_name(t, "not")) {
        next(p);
        enter(p, t->line);
        Node *n = new_node(p, N_NOT, t->line);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static Node *parse_and(Parser *p) {
    Node *n = parse_not(p);
    while (is_name(peek(p), "and")) {
        int line = next(p)->line;
        Node *m = new_node(p, N_AND, line);
        m->a = n;
        m->b = parse_not(p);
        n = m;
    }
    return n;
}

static Node *parse_or(Parser *p) {
    Node *n = parse_and(p);
    while (is_name(peek(p), "or")) {
        int line = next(p)->line;
        Node *m = new_node(p, N_OR, line);
        m->a = n;
        m->b = parse_and(p);
        n = m;
    }
    return n;
}

/* `a if cond else b`; without else the value is undefined when cond fails. */
static Node *parse_expr(Parser *p) {
    enter(p, peek(p)->line);
    Node *n = parse_or(p);
    if (is_name(peek(p), "if")) {
        int line = next(p)->line;
        Node *m = new_node(p, N_TERNARY, line);
        m->b = n;
        m->a = parse_or(p);
        if (is_name(peek(p), "else")) {
            next(p);
            m->c = parse_expr(p);
        }
        n = m;
    }
    p->depth--;
    return n;
}

/* ---- statements ---------------------------------------------------------------------- */
/* Parses nodes into out until a '{% NAME' with NAME in ends (NULL-terminated;
 * NULL ends: until the end of the template) and returns NAME, leaving the
 * parser just after it. */
static const char *parse_block(Parser *p, NodeList *out, const char *const *ends, const char *opener, int open_line);

static void parse_for(Parser *p, Node *n) {
    n->names[n->n_names++] = expect_name(p);
    if (is_punct(peek(p), ",")) {
        next(p);
        n->names[n->n_names++] = expect_name(p);
        if (is_punct(peek(p), ","))
            jinja_fail(p->arena, n->line, "for loops unpack at most two names here");
    }
    if (!is_name(next(p), "in")) jinja_fail(p->arena, n->line, "expected 'in' in a for loop");
    n->a = parse_or(p);
    if (is_name(peek(p), "if")) {
        next(p);
        n->b = parse_or(p);
    }
    if (is_name(peek(p), "recursive")) jinja_fail(p->arena, n->line, "recursive for loops are not supported");
    expect_kind(p, T_STMT_END, "'%}'");
    static const char *const ends[] = {"else", "endfor", NULL};
    const char *end = parse_block(p, &n->body, ends, "for", n->line);
    if (!strcmp(end, "else")) {
        expect_kind(p, T_STMT_END, "'%}'");
        static const char *const endfor[] = {"endfor", NULL};
        parse_block(p, &n->orelse, endfor, "for", n->line);
    }
    expect_kind(p, T_STMT_END, "'%}'");
}

static void parse_if(Parser *p, Node *n) {
    n->a = parse_expr(p);
    expect_kind(p, T_STMT_END, "'%}'");
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    const char *end = parse_block(p, &n->body, ends, "if", n->line);
    if (!strcmp(end, "elif")) {
        Node *elif = new_node(p, N_IF, peek(p)->line);
        enter(p, elif->line);
        parse_if(p, elif);   /* consumes through endif */
        p->depth--;
        jinja_nodes_push(p->arena, &n->orelse, elif);
        return;
    }
    if (!strcmp(end, "else")) {
        expect_kind(p, T_STMT_END, "'%}'");
        static const char *const endif[] = {"endif", NULL};
        parse_block(p, &n->orelse, endif, "if", n->line);
    }
    expect_kind(p, T_STMT_END, "'%}'");
}

static void parse_set(Parser *p, Node *n) {
    n->names[n->n_names++] = expect_name(p);
    if (is_punct(peek(p), ".")) {
        next(p);
        n->attr = expect_name(p);
    } else if (is_punct(peek(p), ",")) {
        next(p);
        n->names[n->n_names++] = expect_name(p);
    }
    if (is_punct(peek(p), "=")) {
        next(p);
        n->a = parse_expr(p);
        if (is_punct(peek(p), ",")) jinja_fail(p->arena, n->line, "tuple assignment is not supported");
        expect_kind(p, T_STMT_END, "'%}'");
        return;
    }
    if (n->attr || n->n_names != 1) jinja_fail(p->arena, n->line, "expected '=' in set");
    expect_kind(p, T_STMT_END, "'%}'");
    n->kind = N_SET_BLOCK;
    static const char *const ends[] = {"endset", NULL};
    parse_block(p, &n->body, ends, "set", n->line);
    expect_kind(p, T_STMT_END, "'%}'");
}

static void parse_macro(Parser *p, Node *n) {
    n->name = expect_name(p);
    expect_punct(p, "(");
    while (!is_punct(peek(p), ")")) {
        Node *param = new_node(p, N_NAME, peek(p)->line);
        param->name = expect_name(p);
        if (is_punct(peek(p), "=")) {
            next(p);
            param->a = parse_expr(p);
        }
        jinja_nodes_push(p->arena, &n->params, param);
        if (!is_punct(peek(p), ",")) break;
        next(p);
    }
    expect_punct(p, ")");
    expect_kind(p, T_STMT_END, "'%}'");
    static const char *const ends[] = {"endmacro", NULL};
    parse_block(p, &n->body, ends, "macro", n->line);
    if (peek(p)->kind == T_NAME) next(p);   /* {% endmacro name %} */
    expect_kind(p, T_STMT_END, "'%}'");
}

static const char *parse_block(Parser *p, NodeList *out, const char *const *ends, const char *opener, int open_line) {
    enter(p, open_line);
    for (;;) {
        const Token *t = next(p);
        if (t->kind == T_EOF) {
            if (ends) {
                const char *const *closer = ends;
                while (closer[1]) closer++;   /* the last one closes: elif and else continue */
                jinja_fail(p->arena, open_line, "'%s' is never closed (expected {%% %s %%})", opener, *closer);
            }
            p->depth--;
            return NULL;
        }
        if (t->kind == T_TEXT) {
            Node *n = new_node(p, N_TEXT, t->line);
            n->value = jv_string(t->s, t->len);
            jinja_nodes_push(p->arena, out, n);
            continue;
        }
        if (t->kind == T_EXPR_BEGIN) {
            Node *n = new_node(p, N_OUTPUT, t->line);
            n->a = parse_expr(p);
            expect_kind(p, T_EXPR_END, "'}}'");
            jinja_nodes_push(p->arena, out, n);
            continue;
        }
        if (t->kind != T_STMT_BEGIN) jinja_fail(p->arena, t->line, "unexpected %s", describe(t));
        const Token *kw = next(p);
        if (kw->kind != T_NAME) jinja_fail(p->arena, kw->line, "expected a statement name after '{%%'");
        for (const char *const *e = ends; e && *e; e++)
            if (!strcmp(kw->s, *e)) {
                p->depth--;
                return *e;
            }
        Node *n = new_node(p, N_TEXT, kw->line);
        if (!strcmp(kw->s, "if")) { n->kind = N_IF; parse_if(p, n); }
        else if (!strcmp(kw->s, "for")) { n->kind = N_FOR; parse_for(p, n); }
        else if (!strcmp(kw->s, "set")) { n->kind = N_SET; parse_set(p, n); }
        else if (!strcmp(kw->s, "macro")) { n->kind = N_MACRO; parse_macro(p, n); }
        else if (!strcmp(kw->s, "break") || !strcmp(kw->s, "continue")) {
            n->kind = kw->s[0] == 'b' ? N_BREAK : N_CONTINUE;
            expect_kind(p, T_STMT_END, "'%}'");
        } else if (!strcmp(kw->s, "generation") || !strcmp(kw->s, "endgeneration")) {
            /* transformers' marker of the assistant's tokens: no output of its own */
            expect_kind(p, T_STMT_END, "'%}'");
            continue;
        } else {
            static const char *const closers[] = {"endif", "endfor", "endset", "endmacro", "elif", "else", NULL};
            for (const char *const *c = closers; *c; c++)
                if (!strcmp(kw->s, *c)) jinja_fail(p->arena, kw->line, "'{%% %s %%}' without its opening statement", kw->s);
            jinja_fail(p->arena, kw->line, "the statement '{%% %s %%}' is not supported",
                       posenc_escape(kw->s).s);
        }
        jinja_nodes_push(p->arena, out, n);
    }
}

static void parse_template(JinjaTemplate *t, const char *source, size_t len) {
    /* Jinja drops one trailing newline of the template */
    if (len && source[len - 1] == '\n') len--;
    Lexer lx = {.arena = &t->arena, .src = source, .len = len, .line = 1};
    lex(&lx);
    Parser p = {.arena = &t->arena, .tok = lx.tokens, .n = lx.n};
    parse_block(&p, &t->body, NULL, NULL, 1);
}

JinjaTemplate *jinja_parse(const char *source, size_t len, PosencError *err) {
    JinjaTemplate *t = calloc_or_exit(1, sizeof *t, "the chat template");
    jmp_buf fail;
    t->arena.fail = &fail;
    t->arena.err = err;
    if (setjmp(fail)) {
        jinja_free(t);
        return NULL;
    }
    parse_template(t, source, len);
    t->arena.fail = NULL;
    t->arena.err = NULL;
    return t;
}

void jinja_free(JinjaTemplate *t) {
    if (!t) return;
    jinja_arena_free(&t->arena);
    free(t);
}
