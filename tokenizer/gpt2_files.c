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

/* A JSON object {"token": id, ...} (vocab.json, a tokenizer.json BPE
 * model's "vocab") as pieces placed at their ids, which must be exactly
 * 0..N-1.  The pieces point into the document. */
int json_vocab_pieces(const JsonValue *vocab, const char ***pieces, uint32_t **lens, int *n,
                      PosencError *err) {
    if (vocab->type != JSON_OBJECT)
        return posenc_error(err, "expected '{': the vocabulary is a JSON object of token: id");
    if (vocab->len > INT32_MAX) return posenc_error(err, "too many tokens");
    *n = (int)vocab->len;
    *pieces = calloc_or_exit(*n ? (size_t)*n : 1, sizeof(char *), "the vocabulary");
    *lens = calloc_or_exit(*n ? (size_t)*n : 1, sizeof(uint32_t), "the vocabulary");
    for (uint32_t e = 0; e < vocab->len; e++) {
        const JsonValue *m = &vocab->items[e];
        const char *tok = m->key;
        if (m->type != JSON_NUMBER || !(m->number >= 0))
            return posenc_error(err, "token '%s': its id is not a non-negative integer",
                                posenc_escape(tok).s);
        if (m->number > INT32_MAX) /* checked before any cast to an integer */
            return posenc_error(err, "token '%s': id too large", posenc_escape(tok).s);
        if (m->number != (double)(int)m->number)
            return posenc_error(err, "token '%s': its id is not an integer", posenc_escape(tok).s);
        int id = (int)m->number;
        if (id >= *n)
            return posenc_error(err, "token '%s' has id %d but there are %d tokens (ids must "
                                     "be 0..N-1)", posenc_escape(tok).s, id, *n);
        if ((*pieces)[id])
            return posenc_error(err, "id %d is given to both '%s' and '%s'", id,
                                posenc_escape((*pieces)[id]).s, posenc_escape(tok).s);
        (*pieces)[id] = tok;
        (*lens)[id] = m->key_len;
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
    *merges = malloc_or_exit((offs.n ? offs.n : 1) * sizeof(char *), "the merges");
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
    JsonDoc doc;
    const char **pieces = NULL, **merges = NULL;
    uint32_t *lens = NULL;
    int n = 0, rc;
    PosencError e;
    rc = json_parse(&doc, vtext, vsize, &e);
    if (rc == 0) rc = json_vocab_pieces(&doc.root, &pieces, &lens, &n, &e);
    const char *failed = vocab_path;
    if (rc == 0) {
        TokenizerSpec spec = {.kind = TOKENIZER_GPT2, .n_pieces = n, .pieces = pieces,
                              .piece_lens = lens, .bos_id = -1, .eos_id = -1};
        spec.n_merges = merge_lines(mtext, msize, &merges);
        spec.merges = merges;
        for (int id = 0; id < n; id++)
            if (strcmp(pieces[id], "<|endoftext|>") == 0) spec.bos_id = spec.eos_id = id;
        rc = tokenizer_build(t, &spec, &e);
        if (rc && strncmp(e.msg, "merge ", 6) == 0) failed = merges_path;
    }
    if (rc) posenc_error(err, "%s: %s", failed, e.msg);
    free(pieces);
    free(lens);
    free(merges);
    json_free(&doc);
    free(vtext);
    free(mtext);
    return rc ? -1 : 0;
}
