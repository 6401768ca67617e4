/* Writing JSON strings and numbers: the one escaper for every JSON the engine and the
 * command line print (inspect, ppl, generate, --logits-out).  Strings may
 * come from files: the output is valid JSON and carries no control
 * character a terminal would act on. */
#ifndef POSENC_JSON_H
#define POSENC_JSON_H
#include <stddef.h>
#include <stdio.h>

/* s[0..len) as a quoted JSON string: '"', '\\' and control characters
 * (C0, DEL, C1) escaped; bytes that are not valid UTF-8 (a byte-fallback piece can be a
 * lone byte) become U+FFFD, since JSON text must be UTF-8. */
void json_write_string(FILE *out, const char *s, size_t len);

/* x with 9 significant digits (a float's round trip), or null where it is
 * not finite: JSON has no NaN or infinity. */
void json_write_number(FILE *out, double x);
/* [x0,x1,...] of n values, each as json_write_number. */
void json_write_doubles(FILE *out, const double *x, size_t n);
void json_write_floats(FILE *out, const float *x, size_t n);
/* [[row 0],[row 1],...] of a (rows, cols) matrix. */
void json_write_matrix(FILE *out, const double *x, size_t rows, size_t cols);
#endif
