/* The Unicode classes of the pre-tokenizers' patterns. */
#include "tokenizer/tokenizer_impl.h"

/* The class of cp in sorted, disjoint ranges; 0 outside them. */
static int range_class(const UnicodeRange *r, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].first) hi = mid - 1;
        else if (cp > r[mid].last) lo = mid + 1;
        else return r[mid].cls;
    }
    return 0;
}

UnicodeClass unicode_class(uint32_t cp) {
    return (UnicodeClass)range_class(unicode_ranges, n_unicode_ranges, cp);
}

UnicodeCase unicode_case(uint32_t cp) {
    return (UnicodeCase)range_class(unicode_case_ranges, n_unicode_case_ranges, cp);
}

UnicodeClass utf8_class(const char *s, size_t n, size_t *clen) {
    uint32_t cp;
    int k = utf8_decode((const unsigned char *)s, n, &cp);
    *clen = k > 0 ? (size_t)k : 1;
    return k > 0 ? unicode_class(cp) : UCLASS_OTHER;
}
