/* The Unicode classes of GPT-2's pre-tokenizer. */
#include "tokenizer/tokenizer_impl.h"

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

UnicodeClass utf8_class(const char *s, size_t n, size_t *clen) {
    uint32_t cp;
    int k = utf8_decode((const unsigned char *)s, n, &cp);
    *clen = k > 0 ? (size_t)k : 1;
    return k > 0 ? unicode_class(cp) : UCLASS_OTHER;
}
