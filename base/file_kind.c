/* What a file is, from its first bytes (base/file_kind.h). */
#include "base/file_kind.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define SNIFF_BYTES 256

/* Every byte printable ASCII, whitespace, or part of a UTF-8 sequence
 * (a sequence cut at the end of the sample counts). */
static int looks_like_text(const unsigned char *b, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = b[i];
        if (c == '\n' || c == '\r' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
            i++;
            continue;
        }
        size_t len = c >= 0xf0 && c < 0xf8 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
        if (!len) return 0;
        for (size_t k = 1; k < len && i + k < n; k++)
            if ((b[i + k] & 0xc0) != 0x80) return 0;
        i += len;
    }
    return 1;
}

/* A protobuf varint at b[*at]; 0 when it runs past n or past 5 bytes. */
static uint64_t varint(const unsigned char *b, size_t n, size_t *at) {
    uint64_t v = 0;
    for (int shift = 0; *at < n && shift < 35; shift += 7) {
        unsigned char c = b[(*at)++];
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return v;
    }
    return 0;
}

/* SentencePiece's ModelProto starts with field 1 (pieces, length-delimited)
 * holding field 1 (the piece, a string): 0x0a LEN 0x0a LEN ... */
static int looks_like_sentencepiece(const unsigned char *b, size_t n) {
    size_t at = 1;
    if (n < 4 || b[0] != 0x0a || !varint(b, n, &at)) return 0;
    return at < n && b[at] == 0x0a;
}

FileKind file_kind(const char *path, const char **what) {
    const char *name_unused;
    if (!what) what = &name_unused;
    *what = "a file";
    struct stat st;
    if (stat(path, &st) != 0) return FILE_KIND_UNREADABLE;
    if (S_ISDIR(st.st_mode)) {
        *what = "a directory";
        return FILE_KIND_DIRECTORY;
    }
    if (!S_ISREG(st.st_mode)) return FILE_KIND_OTHER; /* a FIFO is never read here: no waiting */
    FILE *f = fopen(path, "rb");
    if (!f) return FILE_KIND_UNREADABLE;
    unsigned char b[SNIFF_BYTES];
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    if (n == 0) {
        *what = "an empty file";
        return FILE_KIND_EMPTY;
    }
    static const struct { const char *magic; size_t len; const char *name; } images[] = {
        {"\x89PNG", 4, "a PNG image"}, {"\xff\xd8\xff", 3, "a JPEG image"},
        {"GIF8", 4, "a GIF image"}, {"%PDF", 4, "a PDF document"}};
    for (size_t k = 0; k < sizeof images / sizeof *images; k++)
        if (n >= images[k].len && !memcmp(b, images[k].magic, images[k].len)) {
            *what = images[k].name;
            return FILE_KIND_IMAGE;
        }
    if (n >= 4 && !memcmp(b, "GGUF", 4)) {
        *what = "a GGUF file";
        return FILE_KIND_GGUF;
    }
    /* safetensors: a little-endian u64 header length, then the JSON header */
    uint64_t header = 0;
    for (int i = 7; n >= 9 && i >= 0; i--) header = header << 8 | b[i];
    if (n >= 9 && b[8] == '{' && header >= 2 && header < (uint64_t)1 << 30) {
        *what = "a safetensors file";
        return FILE_KIND_SAFETENSORS;
    }
    if (looks_like_sentencepiece(b, n)) {
        *what = "a SentencePiece tokenizer";
        return FILE_KIND_SENTENCEPIECE;
    }
    if (looks_like_text(b, n)) {
        size_t i = 0;
        while (i < n && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t')) i++;
        if (i < n && (b[i] == '{' || b[i] == '[')) {
            *what = "a JSON file";
            return FILE_KIND_JSON;
        }
        *what = "a text file";
        return FILE_KIND_TEXT;
    }
    return FILE_KIND_OTHER;
}
