/* --html: one self-contained page per run — tables and charts inline (SVG), the
 * run's data as JSON (--json's values) in a script element, a small script for reading values (no
 * network, no library) — which a browser opens as a file. */
#ifndef POSENC_HTML_REPORT_H
#define POSENC_HTML_REPORT_H
#include <stdio.h>

#include "base/util.h"

/* Opens `path` and writes the page's head, title and `how_to_read` (a line
 * on what the page's charts answer to); NULL with the reason. */
FILE *html_report_open(const char *path, const char *title, const char *how_to_read,
                       PosencError *err);
/* The data: what write(f, arg) prints (one JSON document) inside
 * <script type="application/json" id="posenc-data">, with every "</"
 * written "<\/" so that no string in it can end the element. */
void html_report_data(FILE *f, void (*write)(FILE *out, const void *arg), const void *arg);
/* The script, the page's end; closes the file.  0, or -1 with the reason. */
int html_report_close(FILE *f, const char *path, PosencError *err);
#endif
