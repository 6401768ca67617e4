/* Strict UTF-8 decoding and the Unicode classes of GPT-2's pre-tokenizer. */
#include "tokenizer/tokenizer_impl.h"

static int is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

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
        if (!is_cont(s[i])) return 0;
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

UnicodeClass unicode_class(uint32_t cp) {
    int lo = 0, hi = n_unicode_ranges - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < unicode_ranges[mid].first) hi = mid - 1;
        else if (cp > unicode_ranges[mid].last) lo = mid + 1;
        else return (UnicodeClass)unicode_ranges[mid].cls;
    }
    return UCLASS_OTHER;
}
