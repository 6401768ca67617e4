#include "base/json.h"

#include <math.h>
#include <stdint.h>

#include "base/util.h"

void json_write_string(FILE *out, const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    fputc('"', out);
    while (p < end) {
        uint32_t cp;
        int n = utf8_decode(p, (size_t)(end - p), &cp);
        if (n == 0) {
            fputs("\\ufffd", out);
            n = 1;
        } else if (cp == '"' || cp == '\\') {
            fprintf(out, "\\%c", (char)cp);
        } else if (cp == '\n' || cp == '\t' || cp == '\r') {
            fputs(cp == '\n' ? "\\n" : cp == '\t' ? "\\t" : "\\r", out);
        } else if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
            /* C0, DEL and C1: valid JSON raw, but never sent to a terminal */
            fprintf(out, "\\u%04x", (unsigned)cp);
        } else {
            fwrite(p, 1, (size_t)n, out);
        }
        p += n;
    }
    fputc('"', out);
}

void json_write_number(FILE *out, double x) {
    if (isfinite(x)) fprintf(out, "%.9g", x);
    else fputs("null", out);
}

void json_write_doubles(FILE *out, const double *x, size_t n) {
    fputc('[', out);
    for (size_t i = 0; i < n; i++) {
        if (i) fputc(',', out);
        json_write_number(out, x[i]);
    }
    fputc(']', out);
}

void json_write_floats(FILE *out, const float *x, size_t n) {
    fputc('[', out);
    for (size_t i = 0; i < n; i++) {
        if (i) fputc(',', out);
        json_write_number(out, x[i]);
    }
    fputc(']', out);
}

void json_write_matrix(FILE *out, const double *x, size_t rows, size_t cols) {
    fputc('[', out);
    for (size_t r = 0; r < rows; r++) {
        if (r) fputc(',', out);
        json_write_doubles(out, x + r * cols, cols);
    }
    fputc(']', out);
}
