/* Helpers shared by the fuzz targets: see fuzz.h. */
#include "fuzz/fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void fuzz_fail(const char *file, int line, const char *what) {
    fprintf(stderr, "%s:%d: fuzz property failed: %s\n", file, line, what);
    abort();
}

void fuzz_split(const uint8_t *data, size_t size, const uint8_t **a, size_t *na,
                const uint8_t **b, size_t *nb) {
    const size_t k = sizeof FUZZ_SPLIT - 1;
    const uint8_t *at = memmem(data, size, FUZZ_SPLIT, k);
    *a = data;
    *na = at ? (size_t)(at - data) : size;
    *b = at ? at + k : data + size;
    *nb = at ? size - *na - k : 0;
}

/* ---- scratch files ------------------------------------------------------------ */

#define MAX_FILES 8
static char scratch_dir[256];
static struct {
    char name[32];
    int fd;
} files[MAX_FILES];
static int n_files;
#define PATH_LEN (sizeof scratch_dir + sizeof files[0].name + 1)
static char path_buf[MAX_FILES][PATH_LEN];

static void remove_scratch(void) {
    for (int i = 0; i < n_files; i++) {
        unlink(path_buf[i]);
    }
    rmdir(scratch_dir);
}

const char *fuzz_dir(void) {
    if (scratch_dir[0]) return scratch_dir;
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch_dir, sizeof scratch_dir, "%s/posenc-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(scratch_dir)) {
        perror("fuzz: mkdtemp");
        exit(1);
    }
    atexit(remove_scratch);
    return scratch_dir;
}

const char *fuzz_file(const char *name, const uint8_t *data, size_t size) {
    int i = 0;
    while (i < n_files && strcmp(files[i].name, name) != 0) i++;
    if (i == n_files) {
        if (n_files == MAX_FILES || strlen(name) >= sizeof files[i].name) {
            fprintf(stderr, "fuzz: too many scratch files or name too long: %s\n", name);
            exit(1);
        }
        int fd = memfd_create(name, MFD_CLOEXEC);
        char target[64];
        snprintf(target, sizeof target, "/proc/self/fd/%d", fd);
        snprintf(path_buf[i], sizeof path_buf[i], "%s/%s", fuzz_dir(), name);
        if (fd < 0 || symlink(target, path_buf[i]) != 0) {
            perror("fuzz: memfd_create/symlink");
            exit(1);
        }
        snprintf(files[i].name, sizeof files[i].name, "%s", name);
        files[i].fd = fd;
        n_files++;
    }
    int fd = files[i].fd;
    if (ftruncate(fd, 0) != 0) {
        perror("fuzz: ftruncate");
        exit(1);
    }
    for (size_t off = 0; off < size;) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        if (w <= 0) {
            perror("fuzz: pwrite");
            exit(1);
        }
        off += (size_t)w;
    }
    return path_buf[i];
}

/* ---- properties ------------------------------------------------------------- */

void fuzz_check_error(const PosencError *err) {
    FUZZ_ASSERT(err->msg[0] != '\0');
    FUZZ_ASSERT(strchr(err->msg, '\n') == NULL);
}

void fuzz_check_printable(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = utf8_decode((const unsigned char *)s + i, n - i, &cp);
        FUZZ_ASSERT(k > 0 && (cp >= 0x20 || cp == '\n') && cp != 0x7f &&
                    !(cp >= 0x80 && cp < 0xa0));
        i += (size_t)k;
    }
}

int fuzz_encode_decode(const Tokenizer *t, const char *text, size_t len) {
    int *ids, n;
    PosencError err = {{0}};
    if (tokenizer_encode_alloc(t, text, len, 1, 1, &ids, &n, &err)) {
        fuzz_check_error(&err);
        return -1;
    }
    for (int i = 0; i < n; i++) FUZZ_ASSERT(ids[i] >= 0 && ids[i] < t->vocab_size);
    /* Only a SentencePiece normalizer may expand text past len + 3 ids. */
    if (t->kind == TOKENIZER_LLAMA2C || t->kind == TOKENIZER_GPT2)
        FUZZ_ASSERT((size_t)n <= len + 3);

    int *bounded = malloc((len + 3) * sizeof(int)), m = -1;
    PosencError err2 = {{0}};
    if (tokenizer_encode(t, text, len, 1, 1, bounded, &m, &err2) == 0) {
        FUZZ_ASSERT(m == n && memcmp(bounded, ids, (size_t)n * sizeof(int)) == 0);
    } else {
        FUZZ_ASSERT((size_t)n > len + 3);
        fuzz_check_error(&err2);
    }
    free(bounded);

    size_t dlen;
    char *decoded = tokenizer_decode_text(t, ids, n, &dlen);
    FUZZ_ASSERT(decoded[dlen] == '\0');
    free(decoded);
    for (int i = 0, prev = -1; i < n; prev = ids[i++]) {
        size_t k;
        const char *piece = tokenizer_decode(t, prev, ids[i], &k);
        FUZZ_ASSERT(piece[k] == '\0');
    }
    free(ids);
    return n;
}

void fuzz_tokenizer_texts(const Tokenizer *t, const uint8_t *own, size_t n) {
    fuzz_encode_decode(t, FUZZ_SAMPLE_TEXT, sizeof FUZZ_SAMPLE_TEXT - 1);
    fuzz_encode_decode(t, (const char *)own, n < 256 ? n : 256);
}
