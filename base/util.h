/* Errors, checked allocation and small helpers shared by every layer.
 * Library code reports errors to its caller through a PosencError; only an
 * allocation nothing can recover from ends the process here. */
#ifndef POSENC_UTIL_H
#define POSENC_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
/* Puts "prefix: " before the message in err (nothing when prefix is empty),
 * e.g. the file a lower layer did not know of; returns -1. */
int posenc_error_prefix(PosencError *err, const char *prefix);

/* Out of memory is one message everywhere: "out of memory allocating N
 * bytes for WHAT" (N x M when the product overflows size_t).
 * posenc_error_oom puts it in err, for sizes a user chose (--ctx), which
 * the caller reports with the flag; posenc_out_of_memory prints it as the
 * process's one "error: " line and exits 1, for allocations nothing can
 * recover from: malloc_or_exit and calloc_or_exit (llm.c's mallocCheck). */
int posenc_error_oom(PosencError *err, size_t count, size_t size, const char *what);
__attribute__((noreturn)) void posenc_out_of_memory(size_t count, size_t size, const char *what);
void *malloc_or_exit(size_t n, const char *what);
void *calloc_or_exit(size_t count, size_t size, const char *what);
/* n bytes (rounded up to whole lines) starting on a 64-byte cache line, or
 * NULL; freed with free().  The kernels' 64-byte loads of rows that are a
 * multiple of 16 floats then never straddle two lines, as they do in
 * malloc's large blocks, which start 16 bytes into a page. */
void *malloc_lines(size_t n);

/* Decodes one strictly valid UTF-8 sequence of s[0..n) (no overlongs,
 * surrogates or values past U+10FFFF): returns its length and sets *cp, or
 * returns 0 when the bytes at s are not one. */
int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Writes cp (<= U+10FFFF) as UTF-8 into out; returns the length. */
int utf8_encode(uint32_t cp, char out[4]);

/* A string read from a file, fit to print inside a one-line message: C0
 * and C1 control characters, DEL and bytes that are not UTF-8 become \xNN,
 * quotes and backslash are escaped, valid UTF-8 text stays as it is.  So a
 * newline or a terminal escape in a file can neither split an error line
 * nor reach the terminal.  Longer strings are cut and end in "...".  Use
 * the returned array within the expression (it is a temporary):
 *   posenc_error(err, "unknown scheme '%s'", posenc_escape(name).s) */
typedef struct { char s[300]; } EscapedString;
EscapedString posenc_escape(const char *s);

/* 1 if s ends with suffix. */
int posenc_ends_with(const char *s, const char *suffix);

/* Opens a regular file for reading: a descriptor, or -1 with "PATH: cannot
 * open: ..." or "PATH: not a regular file".  The open never blocks, so a
 * FIFO named as a model or tokenizer is refused instead of waiting
 * forever for a writer. */
int posenc_open_regular(const char *path, PosencError *err);

/* Everything left in f, NUL-terminated (*len excludes the NUL), malloc'd;
 * NULL with "WHAT: read error" in err.  For files that may be empty or a
 * pipe, where a mapping will not do. */
char *posenc_read_stream(FILE *f, size_t *len, const char *what, PosencError *err);

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
