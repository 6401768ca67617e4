/* Unicode normalization form C (Hugging Face's NFC normalizer, which Qwen2
 * and Qwen3 vocabularies use): canonical decomposition, canonical ordering
 * of combining marks, canonical composition (UAX #15), with the tables of
 * nfc_tables.c and Hangul syllables computed.  Bytes that are not UTF-8 pass
 * through unchanged and block composition, as a starter that composes with
 * nothing would. */
#include "tokenizer/tokenizer_impl.h"

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7, L_COUNT = 19,
       V_COUNT = 21, T_COUNT = 28, S_COUNT = L_COUNT * V_COUNT * T_COUNT };

/* An invalid byte b is stored as -1 - b among the code points. */
static int combining_class(int cp) {
    int lo = 0, hi = n_nfc_classes - 1;
    while (cp >= 0x300 && lo <= hi) {
        int mid = (lo + hi) / 2;
        if ((uint32_t)cp < nfc_classes[mid].first) hi = mid - 1;
        else if ((uint32_t)cp > nfc_classes[mid].last) lo = mid + 1;
        else return nfc_classes[mid].ccc;
    }
    return 0;
}

static void decompose(int cp, IntBuf *out) {
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        int s = cp - S_BASE;
        intbuf_push(out, L_BASE + s / (V_COUNT * T_COUNT));
        intbuf_push(out, V_BASE + (s % (V_COUNT * T_COUNT)) / T_COUNT);
        if (s % T_COUNT) intbuf_push(out, T_BASE + s % T_COUNT);
        return;
    }
    int lo = 0, hi = n_nfc_decompositions - 1;
    while (cp >= 0xC0 && lo <= hi) {
        int mid = (lo + hi) / 2;
        if ((uint32_t)cp < nfc_decompositions[mid].cp) hi = mid - 1;
        else if ((uint32_t)cp > nfc_decompositions[mid].cp) lo = mid + 1;
        else {
            const NfcDecomposition *d = &nfc_decompositions[mid];
            for (int k = 0; k < d->len; k++) intbuf_push(out, (int)nfc_decomposition_pool[d->off + k]);
            return;
        }
    }
    intbuf_push(out, cp);
}

/* The primary composite of a + b, or -1. */
static int compose(int a, int b) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE &&
        b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    int lo = 0, hi = n_nfc_compositions - 1;
    while (a >= 0 && b >= 0 && lo <= hi) {
        int mid = (lo + hi) / 2;
        const NfcComposition *c = &nfc_compositions[mid];
        int cmp = (uint32_t)a != c->first ? ((uint32_t)a < c->first ? -1 : 1)
                  : (uint32_t)b != c->second ? ((uint32_t)b < c->second ? -1 : 1) : 0;
        if (cmp == 0) return (int)c->composite;
        if (cmp < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return -1;
}

/* Sorts a run of combining marks by class, stably: insertion for the short
 * runs of real text, counting (linear) for long ones, so no text costs
 * quadratic time. */
static void canonical_order(int *v, size_t n) {
    if (n <= 32) {
        for (size_t r = 1; r < n; r++)
            for (size_t j = r; j > 0 && combining_class(v[j - 1]) > combining_class(v[j]); j--) {
                int tmp = v[j];
                v[j] = v[j - 1];
                v[j - 1] = tmp;
            }
        return;
    }
    size_t start[257] = {0};
    for (size_t i = 0; i < n; i++) start[combining_class(v[i]) + 1]++;
    for (int c = 1; c <= 256; c++) start[c] += start[c - 1];
    int *sorted = malloc_or_exit(n * sizeof(int), "combining marks");
    for (size_t i = 0; i < n; i++) sorted[start[combining_class(v[i])]++] = v[i];
    memcpy(v, sorted, n * sizeof(int));
    free(sorted);
}

const char *nfc_normalize(const char *s, size_t n, size_t *out_len, CharBuf *out, IntBuf *cps) {
    size_t i = 0;
    while (i < n && (unsigned char)s[i] < 0xCC) i++; /* below U+0300 nothing changes */
    if (i == n) {
        *out_len = n;
        return s;
    }
    cps->n = 0;
    for (i = 0; i < n;) {
        uint32_t cp;
        int k = utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (k == 0) intbuf_push(cps, -1 - (unsigned char)s[i]);
        else decompose((int)cp, cps);
        i += k ? (size_t)k : 1;
    }
    int *v = cps->v;
    size_t m = cps->n;
    for (size_t a = 0, b; a < m; a = b + 1) { /* each run of marks between starters */
        while (a < m && combining_class(v[a]) == 0) a++;
        for (b = a; b < m && combining_class(v[b]) != 0; b++) {}
        if (b - a > 1) canonical_order(v + a, b - a);
    }
    size_t w = 1, starter = 0;
    int last_class = combining_class(v[0]) ? 256 : 0;
    for (size_t r = 1; r < m; r++) {
        int c = v[r], cls = combining_class(c), comp = compose(v[starter], c);
        if (comp >= 0 && (last_class < cls || last_class == 0)) {
            v[starter] = comp;
            continue;
        }
        if (cls == 0) starter = w;
        last_class = cls;
        v[w++] = c;
    }
    out->n = 0;
    for (size_t r = 0; r < w; r++) {
        char u[4];
        if (v[r] < 0) {
            u[0] = (char)(-1 - v[r]);
            charbuf_append(out, u, 1);
        } else {
            charbuf_append(out, u, (size_t)utf8_encode((uint32_t)v[r], u));
        }
    }
    *out_len = out->n;
    return out->v;
}
