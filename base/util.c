#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int size_mul(size_t *out, size_t a, size_t b) {
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) return 0;
    *out = r;
    return 1;
}

int size_mul3(size_t *out, size_t a, size_t b, size_t c) {
    size_t ab;
    return size_mul(&ab, a, b) && size_mul(out, ab, c);
}

int size_add(size_t *out, size_t a, size_t b) {
    size_t r;
    if (__builtin_add_overflow(a, b, &r)) return 0;
    *out = r;
    return 1;
}

int posenc_error(PosencError *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int utf8_is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len == 0 || (size_t)len > n) return 0;
    uint32_t v = c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if (!utf8_is_cont(s[i])) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    static const uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_for_len[len] || v > 0x10FFFF || (v >= 0xD800 && v < 0xE000)) return 0;
    *cp = v;
    return len;
}

int utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    int n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    for (int i = n - 1; i > 0; i--, cp >>= 6) out[i] = (char)(0x80 | (cp & 0x3F));
    static const unsigned char lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    out[0] = (char)(lead[n] | cp);
    return n;
}

int posenc_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

EscapedString posenc_escape(const char *s) {
    EscapedString e;
    size_t at = 0, room = sizeof e.s - 4; /* "..." and the NUL always fit */
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        char piece[17];
        uint32_t cp;
        int n = utf8_decode(p, strnlen((const char *)p, 4), &cp);
        if (n == 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
            /* not UTF-8: one byte; a control character: all of its bytes */
            int k = n ? n : 1, w = 0;
            for (int i = 0; i < k; i++)
                w += snprintf(piece + w, sizeof piece - (size_t)w, "\\x%02x", p[i]);
            n = k;
        } else if (cp == '\'' || cp == '"' || cp == '\\') {
            snprintf(piece, sizeof piece, "\\%c", (char)cp);
        } else {
            memcpy(piece, p, (size_t)n);
            piece[n] = '\0';
        }
        size_t len = strlen(piece);
        if (at + len > room) {
            memcpy(e.s + at, "...", 4);
            return e;
        }
        memcpy(e.s + at, piece, len);
        at += len;
        p += n;
    }
    e.s[at] = '\0';
    return e;
}

int posenc_error_prefix(PosencError *err, const char *prefix) {
    if (!err || !*prefix) return -1;
    PosencError inner = *err;
    return posenc_error(err, "%s: %s", prefix, inner.msg);
}

int posenc_error_oom(PosencError *err, size_t count, size_t size, const char *what) {
    size_t n;
    if (size_mul(&n, count, size))
        return posenc_error(err, "out of memory allocating %zu bytes for %s", n, what);
    return posenc_error(err, "out of memory allocating %zu x %zu bytes for %s", count, size, what);
}

void posenc_out_of_memory(size_t count, size_t size, const char *what) {
    PosencError err;
    posenc_error_oom(&err, count, size, what);
    fprintf(stderr, "error: %s\n", err.msg);
    exit(EXIT_FAILURE);
}

void *malloc_lines(size_t n) {
    if (n > SIZE_MAX - 64) return NULL;
    return aligned_alloc(64, (n + 63) / 64 * 64 + (n ? 0 : 64));
}

void *malloc_or_exit(size_t n, const char *what) {
    void *p = malloc(n ? n : 1);
    if (!p) posenc_out_of_memory(1, n, what);
    return p;
}

void *calloc_or_exit(size_t count, size_t size, const char *what) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) posenc_out_of_memory(count, size, what);
    return p;
}

char *posenc_read_stream(FILE *f, size_t *len, const char *what, PosencError *err) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc_or_exit(cap, what);
    for (size_t got; (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) { /* grown whenever full, so n < cap and the NUL fits */
            char *grown = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!grown) posenc_out_of_memory(2, cap, what);
            buf = grown;
            cap *= 2;
        }
    }
    if (ferror(f)) {
        free(buf);
        posenc_error(err, "%s: read error", what);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

int posenc_open_regular(const char *path, PosencError *err) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer; on a regular file it changes nothing. */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return posenc_error(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return posenc_error(err, "%s: not a regular file", path);
    }
    return fd;
}

int mapped_file_open(MappedFile *mf, const char *path, PosencError *err) {
    mf->data = NULL;
    mf->size = 0;
    int fd = posenc_open_regular(path, err);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size == 0) {
        close(fd);
        return posenc_error(err, "%s: file is empty", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return posenc_error(err, "%s: mmap failed: %s", path, strerror(errno));
    mf->data = p;
    mf->size = (size_t)st.st_size;
    return 0;
}

void mapped_file_close(MappedFile *mf) {
    if (mf->data) munmap((void *)mf->data, mf->size);
    mf->data = NULL;
    mf->size = 0;
}

float fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float f;
    if (exp == 0) {                     /* zero or subnormal: mant * 2^-24 */
        f = ldexpf((float)mant, -24);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        bits |= sign;
        memcpy(&f, &bits, 4);
        return f;
    }
    uint32_t bits = exp == 31 ? sign | 0x7f800000u | (mant << 13)
                              : sign | ((exp + 112) << 23) | (mant << 13);
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t fp32_to_fp16(float f) {
    /* Round to nearest even, as numpy's float16 cast does. */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t abs = x & 0x7fffffff;
    if (abs >= 0x7f800000) return (uint16_t)(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
    if (abs >= 0x477ff000) return (uint16_t)(sign | 0x7c00);          /* overflow to inf */
    if (abs < 0x38800000) {                                            /* subnormal half */
        float a;
        memcpy(&a, &abs, 4);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));   /* a / 2^-24 */
    }
    uint32_t r = abs + 0xfff + ((abs >> 13) & 1);
    return (uint16_t)(sign | ((r - 0x38000000) >> 13));
}

float bf16_to_fp32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

double time_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
