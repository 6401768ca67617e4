/* UTF-8 encoding and the Unicode classes of GPT-2's pre-tokenizer. */
#include "tokenizer/tokenizer_impl.h"

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
