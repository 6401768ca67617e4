/* Checked helpers in the style of llm.c: every failure names the call site
 * (file:line) and what went wrong, then exits non-zero.  Library code that
 * must report errors to a caller (loaders) uses posenc_error() instead. */
#ifndef POSENC_UTIL_H
#define POSENC_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

void *malloc_check_(size_t n, const char *file, int line);
void *calloc_check_(size_t count, size_t size, const char *file, int line);
FILE *fopen_check_(const char *path, const char *mode, const char *file, int line);
#define mallocCheck(n)        malloc_check_((n), __FILE__, __LINE__)
#define callocCheck(c, s)     calloc_check_((c), (s), __FILE__, __LINE__)
#define fopenCheck(p, m)      fopen_check_((p), (m), __FILE__, __LINE__)

/* Overflow-checked size arithmetic: returns 0 and leaves *out untouched when
 * the result would not fit in size_t. */
int size_mul(size_t *out, size_t a, size_t b);
int size_mul3(size_t *out, size_t a, size_t b, size_t c);
int size_add(size_t *out, size_t a, size_t b);

/* One-line error buffer that loaders fill and callers print.  Formats like
 * printf; returns -1 so that `return posenc_error(...)` reads naturally. */
typedef struct { char msg[512]; } PosencError;
int posenc_error(PosencError *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Decodes one strictly valid UTF-8 sequence of s[0..n) (no overlongs,
 * surrogates or values past U+10FFFF): returns its length and sets *cp, or
 * returns 0 when the bytes at s are not one. */
int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* A string read from a file, fit to print inside a one-line message: C0
 * and C1 control characters, DEL and bytes that are not UTF-8 become \xNN,
 * quotes and backslash are escaped, valid UTF-8 text stays as it is.  So a
 * newline or a terminal escape in a file can neither split an error line
 * nor reach the terminal.  Longer strings are cut and end in "...".  Use
 * the returned array within the expression (it is a temporary):
 *   posenc_error(err, "unknown scheme '%s'", posenc_escape(name).s) */
typedef struct { char s[300]; } EscapedString;
EscapedString posenc_escape(const char *s);

/* A read-only memory mapping of a whole file. */
typedef struct {
    const uint8_t *data;
    size_t size;
} MappedFile;
int mapped_file_open(MappedFile *mf, const char *path, PosencError *err);
void mapped_file_close(MappedFile *mf);

/* IEEE half and bfloat16 to float. */
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);

double time_now_s(void);
#endif
