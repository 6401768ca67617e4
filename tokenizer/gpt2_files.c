/* Reads GPT-2's tokenizer files: vocab.json (a JSON object of token -> id)
 * and merges.txt (one "left right" merge per line in rank order, an optional
 * "#version" first line).  `path` is their directory or the vocab.json. */
#include "tokenizer/tokenizer_impl.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

/* The whole file, NUL-terminated (merges.txt may be empty: no mmap). */
static char *read_file(const char *path, size_t *size, PosencError *err) {
    int fd = posenc_open_regular(path, err);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        posenc_error(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *text = posenc_read_stream(f, size, path, err);
    fclose(f);
    return text;
}

typedef struct {
    const char *s, *end, *start;
    CharBuf strings; /* decoded keys, NUL-terminated */
    IntBuf entries;  /* (offset into strings, id) pairs */
} Json;

static int json_fail(Json *j, PosencError *err, const char *what) {
    return posenc_error(err, "invalid JSON at byte %zu: %s", (size_t)(j->s - j->start), what);
}

static void json_ws(Json *j) {
    while (j->s < j->end && (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r'))
        j->s++;
}

static int hex4(const char *s, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* A JSON string into j->strings (the \u escapes of vocab.json included). */
static int json_string(Json *j, PosencError *err) {
    if (j->s >= j->end || *j->s != '"') return json_fail(j, err, "expected a string");
    j->s++;
    for (;;) {
        if (j->s >= j->end) return json_fail(j, err, "unterminated string");
        unsigned char c = (unsigned char)*j->s++;
        if (c == '"') break;
        if (c < 0x20) return json_fail(j, err, "control character in string");
        if (c != '\\') {
            charbuf_append(&j->strings, (const char *)&c, 1);
            continue;
        }
        if (j->s >= j->end) return json_fail(j, err, "unterminated escape");
        char e = *j->s++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            charbuf_append(&j->strings, &"\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"], 1);
            continue;
        }
        uint32_t cp, lo;
        if (e != 'u' || j->end - j->s < 4 || hex4(j->s, &cp))
            return json_fail(j, err, "bad escape");
        j->s += 4;
        if (cp >= 0xDC00 && cp < 0xE000) return json_fail(j, err, "lone low surrogate");
        if (cp >= 0xD800 && cp < 0xDC00) {
            if (j->end - j->s < 6 || j->s[0] != '\\' || j->s[1] != 'u' || hex4(j->s + 2, &lo) ||
                lo < 0xDC00 || lo >= 0xE000)
                return json_fail(j, err, "lone high surrogate");
            j->s += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        char u[4];
        charbuf_append(&j->strings, u, (size_t)utf8_encode(cp, u));
    }
    charbuf_append(&j->strings, "", 1);
    return 0;
}

static int json_id(Json *j, long *v, PosencError *err) {
    if (j->s >= j->end || *j->s < '0' || *j->s > '9')
        return json_fail(j, err, "expected a non-negative integer id");
    *v = 0;
    while (j->s < j->end && *j->s >= '0' && *j->s <= '9') {
        *v = *v * 10 + (*j->s++ - '0');
        if (*v > INT32_MAX) return json_fail(j, err, "id too large");
    }
    return 0;
}

/* {"token": id, ...} into j->entries. */
static int json_vocab(Json *j, PosencError *err) {
    json_ws(j);
    if (j->s >= j->end || *j->s++ != '{') return json_fail(j, err, "expected '{'");
    json_ws(j);
    if (j->s < j->end && *j->s == '}') j->s++;
    else
        for (;;) {
            size_t off = j->strings.n;
            long id = 0;
            json_ws(j);
            if (json_string(j, err)) return -1;
            json_ws(j);
            if (j->s >= j->end || *j->s++ != ':') return json_fail(j, err, "expected ':'");
            json_ws(j);
            if (json_id(j, &id, err)) return -1;
            intbuf_push(&j->entries, (int)off);
            intbuf_push(&j->entries, (int)id);
            json_ws(j);
            if (j->s < j->end && *j->s == ',') {
                j->s++;
                continue;
            }
            if (j->s < j->end && *j->s == '}') {
                j->s++;
                break;
            }
            return json_fail(j, err, "expected ',' or '}'");
        }
    json_ws(j);
    return j->s == j->end ? 0 : json_fail(j, err, "trailing data after the object");
}

/* Places each token at its id; ids must be exactly 0..N-1. */
static int vocab_pieces(Json *j, const char ***pieces, int *n, PosencError *err) {
    *n = (int)(j->entries.n / 2);
    *pieces = callocCheck(*n ? (size_t)*n : 1, sizeof(char *), "the vocabulary");
    for (size_t e = 0; e < j->entries.n; e += 2) {
        const char *tok = j->strings.v + j->entries.v[e];
        int id = j->entries.v[e + 1];
        if (id >= *n)
            return posenc_error(err, "token '%s' has id %d but there are %d tokens (ids must "
                                     "be 0..N-1)", posenc_escape(tok).s, id, *n);
        if ((*pieces)[id])
            return posenc_error(err, "id %d is given to both '%s' and '%s'", id,
                                posenc_escape((*pieces)[id]).s, posenc_escape(tok).s);
        (*pieces)[id] = tok;
    }
    return 0;
}

/* Splits merges.txt in place into lines, skipping "#version" and blank lines. */
static int merge_lines(char *text, size_t size, const char ***merges) {
    IntBuf offs = {0};
    for (size_t i = 0, line = 0; i < size; line++) {
        char *nl = memchr(text + i, '\n', size - i);
        size_t end = nl ? (size_t)(nl - text) : size;
        text[end] = '\0';
        if (end > i && text[end - 1] == '\r') text[end - 1] = '\0';
        if (text[i] && !(line == 0 && strncmp(text + i, "#version", 8) == 0))
            intbuf_push(&offs, (int)i);
        i = end + 1;
    }
    *merges = mallocCheck((offs.n ? offs.n : 1) * sizeof(char *), "the merges");
    for (size_t k = 0; k < offs.n; k++) (*merges)[k] = text + offs.v[k];
    free(offs.v);
    return (int)(offs.n);
}

int gpt2_read(Tokenizer *t, const char *path, PosencError *err) {
    char vocab_path[4096], merges_path[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(vocab_path, sizeof vocab_path, "%s/vocab.json", path);
        snprintf(merges_path, sizeof merges_path, "%s/merges.txt", path);
    } else {
        const char *slash = strrchr(path, '/');
        int dir_len = slash ? (int)(slash - path + 1) : 0;
        snprintf(vocab_path, sizeof vocab_path, "%s", path);
        snprintf(merges_path, sizeof merges_path, "%.*smerges.txt", dir_len, path);
    }
    size_t vsize, msize;
    char *vtext = read_file(vocab_path, &vsize, err);
    if (!vtext) return -1;
    char *mtext = read_file(merges_path, &msize, err);
    if (!mtext) {
        free(vtext);
        return -1;
    }
    if (vsize > INT32_MAX || msize > INT32_MAX) {
        free(vtext);
        free(mtext);
        return posenc_error(err, "%s: tokenizer files over 2 GB", path);
    }
    Json j = {vtext, vtext + vsize, vtext, {0}, {0}};
    const char **pieces = NULL, **merges = NULL;
    int n = 0, rc;
    PosencError e;
    rc = json_vocab(&j, &e) || vocab_pieces(&j, &pieces, &n, &e);
    const char *failed = vocab_path;
    if (rc == 0) {
        TokenizerSpec spec = {.kind = TOKENIZER_GPT2, .n_pieces = n, .pieces = pieces,
                              .bos_id = -1, .eos_id = -1};
        spec.n_merges = merge_lines(mtext, msize, &merges);
        spec.merges = merges;
        for (int id = 0; id < n; id++)
            if (strcmp(pieces[id], "<|endoftext|>") == 0) spec.bos_id = spec.eos_id = id;
        rc = tokenizer_build(t, &spec, &e);
        if (rc && strncmp(e.msg, "merge ", 6) == 0) failed = merges_path;
    }
    if (rc) posenc_error(err, "%s: %s", failed, e.msg);
    free(pieces);
    free(merges);
    free(j.strings.v);
    free(j.entries.v);
    free(vtext);
    free(mtext);
    return rc ? -1 : 0;
}
