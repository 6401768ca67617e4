#include "base/json.h"

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
