/* GGUF reader: see gguf.h.  Parsing walks the mapping with a bounds-checked
 * cursor; nothing is allocated from a count the file merely claims, only in
 * proportion to bytes that were actually parsed, so a lying header cannot
 * make us allocate gigabytes. */
#include "base/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c reads little-endian data in place: port it before using a big-endian host"
#endif

/* ---- cursor ---------------------------------------------------------------- */

/* Bounds-checked reader over the mapping.  `ctx` names the item being parsed
 * ("kv 3 'general.name'") so that a truncation error says where it happened. */
typedef struct {
    const char *path;
    const uint8_t *base;
    size_t size, pos;
    char ctx[192];
    PosencError *err;
} Reader;

static int rd_fail(Reader *r, const char *fmt_problem, size_t need) {
    return posenc_error(r->err, "%s: %s: %s (%zu bytes needed at offset %zu, %zu left)",
                        r->path, r->ctx, fmt_problem, need, r->pos, r->size - r->pos);
}

static int rd_bytes(Reader *r, size_t n, const uint8_t **out) {
    if (n > r->size - r->pos) {
        rd_fail(r, "truncated", n);
        return -1;   /* explicit, so the compiler sees *out is set on success */
    }
    *out = r->base + r->pos;
    r->pos += n;
    return 0;
}

static int rd_u32(Reader *r, uint32_t *out) {
    const uint8_t *p;
    if (rd_bytes(r, 4, &p)) return -1;
    memcpy(out, p, 4);
    return 0;
}

static int rd_u64(Reader *r, uint64_t *out) {
    const uint8_t *p;
    if (rd_bytes(r, 8, &p)) return -1;
    memcpy(out, p, 8);
    return 0;
}

/* A length-prefixed string; the length is checked against the bytes left
 * before anything trusts it. */
static int rd_str(Reader *r, GgufString *s) {
    uint64_t len;
    if (rd_u64(r, &len)) return -1;
    if (len > r->size - r->pos)
        return posenc_error(r->err, "%s: %s: string length %llu exceeds the %zu bytes left",
                            r->path, r->ctx, (unsigned long long)len, r->size - r->pos);
    s->ptr = (const char *)(r->base + r->pos);
    s->len = (size_t)len;
    r->pos += (size_t)len;
    return 0;
}

/* ---- type tables ----------------------------------------------------------- */

static const char *const gguf_type_names[GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};

const char *gguf_type_name(uint32_t type) {
    return type < GGUF_TYPE_COUNT ? gguf_type_names[type] : "unknown";
}

/* Size of a fixed-size value; 0 for STRING and ARRAY. */
static size_t gguf_scalar_size(GgufType t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

static int gguf_type_is_uint(GgufType t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 ||
           t == GGUF_TYPE_UINT64;
}

static int gguf_type_is_sint(GgufType t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 ||
           t == GGUF_TYPE_INT64;
}

/* ---- parsing ----------------------------------------------------------------- */

/* Keys and tensor names end up in error messages, which must stay one line,
 * and are looked up as C strings: refuse control characters and NUL. */
static int name_is_printable(GgufString s) {
    for (size_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c < 0x20 || c == 0x7f) return 0;
    }
    return 1;
}

static char *str_dup(GgufString s) {
    char *p = malloc_or_exit(s.len + 1, "a string of the GGUF file");
    memcpy(p, s.ptr, s.len);
    p[s.len] = '\0';
    return p;
}

/* Grows a file-order array by one element; capacity doubles so parsing n
 * items costs O(n) and memory tracks what was really parsed. */
static void *grow(void *arr, size_t n, size_t *cap, size_t elem) {
    if (n < *cap) return arr;
    size_t new_cap = *cap ? *cap * 2 : 16, bytes;
    void *p = size_mul(&bytes, new_cap, elem) ? realloc(arr, bytes) : NULL;
    if (!p) posenc_out_of_memory(new_cap, elem, "the GGUF metadata table");
    *cap = new_cap;
    return p;
}

/* A scalar of fixed size `t` at p, decoded into kv->v. */
static int decode_scalar(Reader *r, GgufType t, const uint8_t *p, GgufKV *kv) {
    switch (t) {
    case GGUF_TYPE_UINT8: kv->v.u64 = p[0]; break;
    case GGUF_TYPE_INT8: kv->v.i64 = (int8_t)p[0]; break;
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, p, 2); kv->v.u64 = x; break; }
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, p, 2); kv->v.i64 = x; break; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, p, 4); kv->v.u64 = x; break; }
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, p, 4); kv->v.i64 = x; break; }
    case GGUF_TYPE_UINT64: memcpy(&kv->v.u64, p, 8); break;
    case GGUF_TYPE_INT64: memcpy(&kv->v.i64, p, 8); break;
    case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, p, 4); kv->v.f64 = x; break; }
    case GGUF_TYPE_FLOAT64: memcpy(&kv->v.f64, p, 8); break;
    case GGUF_TYPE_BOOL:
        /* Only 0 and 1 are written by any GGUF writer; anything else means
         * we are reading garbage. */
        if (p[0] > 1)
            return posenc_error(r->err, "%s: %s: bool value %u is neither 0 nor 1",
                                r->path, r->ctx, p[0]);
        kv->v.b = p[0];
        break;
    default: break;
    }
    return 0;
}

static int read_array(Reader *r, GgufArray *arr) {
    uint32_t elem;
    uint64_t n;
    if (rd_u32(r, &elem) || rd_u64(r, &n)) return -1;
    if (elem == GGUF_TYPE_ARRAY)
        return posenc_error(r->err, "%s: %s: nested arrays are not supported", r->path, r->ctx);
    if (elem >= GGUF_TYPE_COUNT)
        return posenc_error(r->err, "%s: %s: unknown array element type %u", r->path, r->ctx,
                            elem);
    arr->type = (GgufType)elem;
    arr->data = NULL;
    arr->strs = NULL;
    size_t left = r->size - r->pos;
    if (elem != GGUF_TYPE_STRING) {
        size_t esize = gguf_scalar_size(arr->type);
        if (n > left / esize)
            return posenc_error(r->err, "%s: %s: array of %llu %s exceeds the %zu bytes left",
                                r->path, r->ctx, (unsigned long long)n, gguf_type_name(elem),
                                left);
        arr->n = (size_t)n;
        arr->data = r->base + r->pos;
        if (elem == GGUF_TYPE_BOOL)
            for (size_t i = 0; i < arr->n; i++)
                if (arr->data[i] > 1)
                    return posenc_error(r->err, "%s: %s: element %zu: bool value %u is neither "
                                        "0 nor 1", r->path, r->ctx, i, arr->data[i]);
        r->pos += arr->n * esize;
        return 0;
    }
    /* Strings: each needs at least its 8-byte length.  Walk them once to
     * validate before allocating the index, so the allocation is bounded by
     * bytes that really are in the file. */
    if (n > left / 8)
        return posenc_error(r->err, "%s: %s: array of %llu strings exceeds the %zu bytes left",
                            r->path, r->ctx, (unsigned long long)n, left);
    arr->n = (size_t)n;
    size_t start = r->pos;
    for (size_t i = 0; i < arr->n; i++) {
        GgufString s;
        if (rd_str(r, &s)) {
            /* Say which element; the message already names file and item. */
            char msg[sizeof r->err->msg];
            snprintf(msg, sizeof msg, "%s", r->err->msg);
            return posenc_error(r->err, "%s [element %zu]", msg, i);
        }
    }
    GgufString *strs = calloc_or_exit(arr->n, sizeof *strs, "a GGUF string array");
    r->pos = start;
    for (size_t i = 0; i < arr->n; i++) rd_str(r, &strs[i]);
    arr->strs = strs;
    return 0;
}

static int read_kv(Reader *r, size_t i, GgufKV *kv) {
    snprintf(r->ctx, sizeof r->ctx, "kv %zu key", i);
    GgufString key;
    if (rd_str(r, &key)) return -1;
    if (key.len == 0) return posenc_error(r->err, "%s: kv %zu: empty key", r->path, i);
    if (key.len > GGUF_MAX_KEY_LEN)
        return posenc_error(r->err, "%s: kv %zu: key of %zu bytes exceeds the maximum of %d",
                            r->path, i, key.len, GGUF_MAX_KEY_LEN);
    if (!name_is_printable(key))
        return posenc_error(r->err, "%s: kv %zu: key contains control characters", r->path, i);
    kv->key = str_dup(key);
    snprintf(r->ctx, sizeof r->ctx, "kv %zu '%.120s'", i, posenc_escape(kv->key).s);

    uint32_t type;
    if (rd_u32(r, &type)) return -1;
    if (type >= GGUF_TYPE_COUNT)
        return posenc_error(r->err, "%s: %s: unknown value type %u", r->path, r->ctx, type);
    kv->type = (GgufType)type;
    if (type == GGUF_TYPE_ARRAY) return read_array(r, &kv->v.arr);
    if (type == GGUF_TYPE_STRING) {
        GgufString s;
        if (rd_str(r, &s)) return -1;
        kv->v.str.ptr = str_dup(s);
        kv->v.str.len = s.len;
        return 0;
    }
    const uint8_t *p;
    if (rd_bytes(r, gguf_scalar_size(kv->type), &p)) return -1;
    return decode_scalar(r, kv->type, p, kv);
}

static int read_tensor_info(Reader *r, size_t i, GgufTensor *t) {
    snprintf(r->ctx, sizeof r->ctx, "tensor %zu name", i);
    GgufString name;
    if (rd_str(r, &name)) return -1;
    if (name.len == 0) return posenc_error(r->err, "%s: tensor %zu: empty name", r->path, i);
    if (name.len > GGUF_MAX_NAME_LEN)
        return posenc_error(r->err, "%s: tensor %zu: name of %zu bytes exceeds the maximum of %d",
                            r->path, i, name.len, GGUF_MAX_NAME_LEN);
    if (!name_is_printable(name))
        return posenc_error(r->err, "%s: tensor %zu: name contains control characters",
                            r->path, i);
    t->name = str_dup(name);
    snprintf(r->ctx, sizeof r->ctx, "tensor '%.160s'", posenc_escape(t->name).s);

    uint32_t n_dims;
    if (rd_u32(r, &n_dims)) return -1;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return posenc_error(r->err, "%s: %s: %u dimensions (must be 1..%d)", r->path, r->ctx,
                            n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    size_t nelem = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims && rd_u64(r, &ne)) return -1;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return posenc_error(r->err, "%s: %s: dimension %d has invalid size %llu", r->path,
                                r->ctx, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        if ((uint64_t)(size_t)ne != ne || !size_mul(&nelem, nelem, (size_t)ne) ||
            nelem > (size_t)INT64_MAX)
            return posenc_error(r->err, "%s: %s: element count overflows", r->path, r->ctx);
    }
    t->nelem = nelem;

    uint32_t type;
    if (rd_u32(r, &type)) return -1;
    if (!tensor_type_supported(type))
        return posenc_error(r->err, "%s: %s: unsupported tensor type %u (%s); supported: f32, "
                            "f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, "
                            "q6_k, mxfp4", r->path, r->ctx, type, tensor_type_name(type));
    t->type = (TensorType)type;
    if ((size_t)t->ne[0] % tensor_block_size(t->type) != 0)
        return posenc_error(r->err, "%s: %s: row length %lld is not a multiple of the %s block "
                            "size %zu", r->path, r->ctx, (long long)t->ne[0],
                            tensor_type_name(type), tensor_block_size(t->type));
    /* nelem fits size_t and the row splits into whole blocks, so
     * nelem/blck*size is the exact byte count; check its multiplication. */
    if (!size_mul(&t->nbytes, nelem / tensor_block_size(t->type), tensor_block_bytes(t->type)))
        return posenc_error(r->err, "%s: %s: byte size overflows", r->path, r->ctx);
    return rd_u64(r, &t->offset);
}

static int cmp_kv_key(const void *a, const void *b, void *arg) {
    const GgufKV *kv = arg;
    return strcmp(kv[*(const size_t *)a].key, kv[*(const size_t *)b].key);
}

static int cmp_tensor_name(const void *a, const void *b, void *arg) {
    const GgufTensor *t = arg;
    return strcmp(t[*(const size_t *)a].name, t[*(const size_t *)b].name);
}

static int cmp_tensor_offset(const void *a, const void *b, void *arg) {
    const GgufTensor *t = arg;
    uint64_t x = t[*(const size_t *)a].offset, y = t[*(const size_t *)b].offset;
    return (x > y) - (x < y);
}

static size_t *sorted_index(size_t n, int (*cmp)(const void *, const void *, void *),
                            void *arg) {
    size_t *idx = calloc_or_exit(n, sizeof *idx, "a GGUF lookup index");
    for (size_t i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, n, sizeof *idx, cmp, arg);
    return idx;
}

static int read_alignment(GgufFile *g, PosencError *err) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (!gguf_find_kv(g, "general.alignment")) return 0;
    uint32_t a;
    if (gguf_get_u32(g, "general.alignment", &a, err)) return -1;
    if (a == 0 || (a & (a - 1)) != 0)
        return posenc_error(err, "%s: general.alignment %u is not a power of two", g->path, a);
    g->alignment = a;
    return 0;
}

/* Extents inside the file, alignment of each tensor, no two overlapping. */
static int check_tensor_data(GgufFile *g, PosencError *err) {
    size_t rem = (size_t)-1;
    /* data_offset = round_up(end of tensor infos, alignment), checked. */
    if (!size_add(&rem, g->data_offset, g->alignment - 1))
        return posenc_error(err, "%s: data offset overflows", g->path);
    g->data_offset = rem & ~(g->alignment - 1);
    for (size_t i = 0; i < g->n_tensors; i++) {
        GgufTensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0)
            return posenc_error(err, "%s: tensor '%s': offset %llu is not a multiple of the "
                                "alignment %zu", g->path, posenc_escape(t->name).s,
                                (unsigned long long)t->offset, g->alignment);
        size_t start, end;
        if ((uint64_t)(size_t)t->offset != t->offset ||
            !size_add(&start, g->data_offset, (size_t)t->offset) ||
            !size_add(&end, start, t->nbytes) || end > g->map.size)
            return posenc_error(err, "%s: tensor '%s': data [%llu, +%zu) at file offset %zu "
                                "extends past the end of the file (%zu bytes)", g->path,
                                posenc_escape(t->name).s, (unsigned long long)t->offset, t->nbytes,
                                g->data_offset, g->map.size);
        /* The engine reads F32/F16 in place, so a small general.alignment
         * must still leave each element naturally aligned (quantized
         * blocks are read bytewise). */
        size_t elem_align = tensor_block_size(t->type) > 1 ? 1 : tensor_block_bytes(t->type);
        if (start % elem_align != 0)
            return posenc_error(err, "%s: tensor '%s': data at file offset %zu is not %zu-byte "
                                "aligned", g->path, posenc_escape(t->name).s, start, elem_align);
        t->data = g->map.data + start;
    }
    size_t *by_offset = sorted_index(g->n_tensors, cmp_tensor_offset, g->tensors);
    int rc = 0;
    for (size_t i = 1; i < g->n_tensors && rc == 0; i++) {
        const GgufTensor *a = &g->tensors[by_offset[i - 1]], *b = &g->tensors[by_offset[i]];
        if (a->offset + a->nbytes > b->offset)   /* both fit in the file: no overflow */
            rc = posenc_error(err, "%s: tensors '%s' and '%s' overlap", g->path,
                              posenc_escape(a->name).s, posenc_escape(b->name).s);
    }
    free(by_offset);
    return rc;
}

static int check_duplicates(GgufFile *g, PosencError *err) {
    g->kv_sorted = sorted_index(g->n_kv, cmp_kv_key, g->kv);
    for (size_t i = 1; i < g->n_kv; i++) {
        const char *k = g->kv[g->kv_sorted[i]].key;
        if (strcmp(g->kv[g->kv_sorted[i - 1]].key, k) == 0)
            return posenc_error(err, "%s: duplicate key '%.200s'", g->path, posenc_escape(k).s);
    }
    g->tensor_sorted = sorted_index(g->n_tensors, cmp_tensor_name, g->tensors);
    for (size_t i = 1; i < g->n_tensors; i++) {
        const char *n = g->tensors[g->tensor_sorted[i]].name;
        if (strcmp(g->tensors[g->tensor_sorted[i - 1]].name, n) == 0)
            return posenc_error(err, "%s: duplicate tensor name '%s'", g->path, posenc_escape(n).s);
    }
    return 0;
}

static int read_header(Reader *r, GgufFile *g, uint64_t *n_tensors, uint64_t *n_kv) {
    snprintf(r->ctx, sizeof r->ctx, "header");
    const uint8_t *magic;
    if (rd_bytes(r, 4, &magic)) return -1;
    if (memcmp(magic, "GGUF", 4) != 0)
        return posenc_error(r->err, "%s: not a GGUF file (bad magic)", r->path);
    if (rd_u32(r, &g->version)) return -1;
    /* v3 only added big-endian files, which show up here byte-swapped. */
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return posenc_error(r->err, "%s: big-endian GGUF is not supported", r->path);
    if (g->version == 1)
        return posenc_error(r->err, "%s: GGUF version 1 is not supported (convert it again)",
                            r->path);
    if (g->version != 2 && g->version != 3)
        return posenc_error(r->err, "%s: unsupported GGUF version %u", r->path, g->version);
    if (rd_u64(r, n_tensors) || rd_u64(r, n_kv)) return -1;
    /* The smallest kv is 14 bytes (8 key length + 1 key + 4 type + 1 value),
     * the smallest tensor info 33; a count claiming more than that cannot be
     * true, and saying so here beats a confusing truncation later. */
    size_t left = r->size - r->pos;
    if (*n_kv > left / 14)
        return posenc_error(r->err, "%s: kv count %llu is impossible for a %zu-byte file",
                            r->path, (unsigned long long)*n_kv, r->size);
    if (*n_tensors > left / 33)
        return posenc_error(r->err, "%s: tensor count %llu is impossible for a %zu-byte file",
                            r->path, (unsigned long long)*n_tensors, r->size);
    return 0;
}

static int gguf_parse(GgufFile *g, PosencError *err) {
    Reader r = {.path = g->path, .base = g->map.data, .size = g->map.size, .err = err};
    uint64_t n_tensors = 0, n_kv = 0;
    if (read_header(&r, g, &n_tensors, &n_kv)) return -1;

    size_t cap = 0;
    for (size_t i = 0; i < (size_t)n_kv; i++) {
        g->kv = grow(g->kv, g->n_kv, &cap, sizeof *g->kv);
        GgufKV *kv = &g->kv[g->n_kv++];
        memset(kv, 0, sizeof *kv);
        if (read_kv(&r, i, kv)) return -1;
    }
    cap = 0;
    for (size_t i = 0; i < (size_t)n_tensors; i++) {
        g->tensors = grow(g->tensors, g->n_tensors, &cap, sizeof *g->tensors);
        GgufTensor *t = &g->tensors[g->n_tensors++];
        memset(t, 0, sizeof *t);
        if (read_tensor_info(&r, i, t)) return -1;
    }
    g->data_offset = r.pos;
    if (check_duplicates(g, err) || read_alignment(g, err)) return -1;
    return check_tensor_data(g, err);
}

int gguf_open(GgufFile *g, const char *path, PosencError *err) {
    memset(g, 0, sizeof *g);
    GgufString p = {path, strlen(path)};
    g->path = str_dup(p);
    if (mapped_file_open(&g->map, path, err) || gguf_parse(g, err)) {
        gguf_close(g);
        return -1;
    }
    return 0;
}

int gguf_file_has_magic(const char *path, PosencError *err) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0; /* a GPT-2 tokenizer directory */
    int fd = posenc_open_regular(path, err);
    if (fd < 0) return -1;
    char magic[4] = {0};
    ssize_t got = read(fd, magic, sizeof magic);
    close(fd);
    return got == (ssize_t)sizeof magic && memcmp(magic, "GGUF", sizeof magic) == 0;
}

void gguf_close(GgufFile *g) {
    for (size_t i = 0; i < g->n_kv; i++) {
        GgufKV *kv = &g->kv[i];
        free((void *)kv->key);
        if (kv->type == GGUF_TYPE_STRING) free((void *)kv->v.str.ptr);
        if (kv->type == GGUF_TYPE_ARRAY) free((void *)kv->v.arr.strs);
    }
    for (size_t i = 0; i < g->n_tensors; i++) free((void *)g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->kv_sorted);
    free(g->tensor_sorted);
    mapped_file_close(&g->map);
    free(g->path);
    memset(g, 0, sizeof *g);
}

/* ---- lookups ----------------------------------------------------------------- */

const GgufKV *gguf_find_kv(const GgufFile *g, const char *key) {
    size_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const GgufKV *kv = &g->kv[g->kv_sorted[mid]];
        int c = strcmp(key, kv->key);
        if (c == 0) return kv;
        if (c < 0) hi = mid; else lo = mid + 1;
    }
    return NULL;
}

const GgufTensor *gguf_find_tensor(const GgufFile *g, const char *name) {
    size_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const GgufTensor *t = &g->tensors[g->tensor_sorted[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid; else lo = mid + 1;
    }
    return NULL;
}

static const GgufKV *require_kv(const GgufFile *g, const char *key, PosencError *err) {
    const GgufKV *kv = gguf_find_kv(g, key);
    if (!kv) posenc_error(err, "%s: missing key '%s'", g->path, key);
    return kv;
}

static int type_mismatch(const GgufFile *g, const GgufKV *kv, const char *want,
                         PosencError *err) {
    if (kv->type == GGUF_TYPE_ARRAY)
        return posenc_error(err, "%s: key '%s' is an array of %s, expected %s", g->path,
                            posenc_escape(kv->key).s,
                            gguf_type_name(kv->v.arr.type), want);
    return posenc_error(err, "%s: key '%s' has type %s, expected %s", g->path,
                        posenc_escape(kv->key).s,
                        gguf_type_name(kv->type), want);
}

/* A non-negative integer value of any integer type, at most max. */
static int get_uint_in(const GgufFile *g, const char *key, uint64_t max, uint64_t *out,
                       PosencError *err) {
    const GgufKV *kv = require_kv(g, key, err);
    if (!kv) return -1;
    if (gguf_type_is_uint(kv->type)) {
        if (kv->v.u64 > max)
            return posenc_error(err, "%s: key '%s' = %llu is out of range (max %llu)", g->path,
                                key, (unsigned long long)kv->v.u64, (unsigned long long)max);
        *out = kv->v.u64;
        return 0;
    }
    if (gguf_type_is_sint(kv->type)) {
        if (kv->v.i64 < 0 || (uint64_t)kv->v.i64 > max)
            return posenc_error(err, "%s: key '%s' = %lld is out of range (0..%llu)", g->path,
                                key, (long long)kv->v.i64, (unsigned long long)max);
        *out = (uint64_t)kv->v.i64;
        return 0;
    }
    return type_mismatch(g, kv, "an unsigned integer", err);
}

int gguf_get_u32(const GgufFile *g, const char *key, uint32_t *out, PosencError *err) {
    uint64_t v;
    if (get_uint_in(g, key, UINT32_MAX, &v, err)) return -1;
    *out = (uint32_t)v;
    return 0;
}

int gguf_get_u64(const GgufFile *g, const char *key, uint64_t *out, PosencError *err) {
    return get_uint_in(g, key, UINT64_MAX, out, err);
}

int gguf_get_i64(const GgufFile *g, const char *key, int64_t *out, PosencError *err) {
    const GgufKV *kv = require_kv(g, key, err);
    if (!kv) return -1;
    if (gguf_type_is_sint(kv->type)) {
        *out = kv->v.i64;
        return 0;
    }
    if (gguf_type_is_uint(kv->type)) {
        if (kv->v.u64 > (uint64_t)INT64_MAX)
            return posenc_error(err, "%s: key '%s' = %llu does not fit int64", g->path, key,
                                (unsigned long long)kv->v.u64);
        *out = (int64_t)kv->v.u64;
        return 0;
    }
    return type_mismatch(g, kv, "an integer", err);
}

int gguf_get_f32(const GgufFile *g, const char *key, float *out, PosencError *err) {
    const GgufKV *kv = require_kv(g, key, err);
    if (!kv) return -1;
    if (kv->type != GGUF_TYPE_FLOAT32 && kv->type != GGUF_TYPE_FLOAT64)
        return type_mismatch(g, kv, "a float", err);
    *out = (float)kv->v.f64;
    return 0;
}

int gguf_get_bool(const GgufFile *g, const char *key, int *out, PosencError *err) {
    const GgufKV *kv = require_kv(g, key, err);
    if (!kv) return -1;
    if (kv->type != GGUF_TYPE_BOOL) return type_mismatch(g, kv, "bool", err);
    *out = kv->v.b;
    return 0;
}

int gguf_get_str(const GgufFile *g, const char *key, const char **out, PosencError *err) {
    const GgufKV *kv = require_kv(g, key, err);
    if (!kv) return -1;
    if (kv->type != GGUF_TYPE_STRING) return type_mismatch(g, kv, "string", err);
    if (memchr(kv->v.str.ptr, 0, kv->v.str.len))
        return posenc_error(err, "%s: key '%s': string contains a NUL byte", g->path, key);
    *out = kv->v.str.ptr;
    return 0;
}

int gguf_get_arr(const GgufFile *g, const char *key, GgufType elem, const GgufArray **out,
                 PosencError *err) {
    const GgufKV *kv = require_kv(g, key, err);
    if (!kv) return -1;
    if (kv->type != GGUF_TYPE_ARRAY || kv->v.arr.type != elem) {
        char want[48];
        snprintf(want, sizeof want, "an array of %s", gguf_type_name(elem));
        return type_mismatch(g, kv, want, err);
    }
    *out = &kv->v.arr;
    return 0;
}

int gguf_get_arr_int(const GgufFile *g, const char *key, const GgufArray **out,
                     PosencError *err) {
    const GgufKV *kv = require_kv(g, key, err);
    if (!kv) return -1;
    if (kv->type != GGUF_TYPE_ARRAY ||
        !(gguf_type_is_uint(kv->v.arr.type) || gguf_type_is_sint(kv->v.arr.type)))
        return type_mismatch(g, kv, "an array of integers", err);
    *out = &kv->v.arr;
    return 0;
}

int64_t gguf_arr_int(const GgufArray *arr, size_t i) {
    const uint8_t *p = arr->data + i * gguf_scalar_size(arr->type);
    switch (arr->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: return p[0];
    case GGUF_TYPE_INT8: return (int8_t)p[0];
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_TYPE_UINT64: { uint64_t x; memcpy(&x, p, 8); return (int64_t)x; }
    case GGUF_TYPE_INT64: { int64_t x; memcpy(&x, p, 8); return x; }
    default: return 0;
    }
}

float gguf_arr_f32(const GgufArray *arr, size_t i) {
    if (arr->type == GGUF_TYPE_FLOAT32) {
        float x;
        memcpy(&x, arr->data + i * 4, 4);
        return x;
    }
    if (arr->type == GGUF_TYPE_FLOAT64) {
        double x;
        memcpy(&x, arr->data + i * 8, 8);
        return (float)x;
    }
    return 0.0f;
}

GgufString gguf_arr_str(const GgufArray *arr, size_t i) {
    if (arr->type != GGUF_TYPE_STRING) return (GgufString){"", 0};
    return arr->strs[i];
}

const GgufTensor *gguf_get_tensor(const GgufFile *g, const char *name, int n_dims,
                                  const int64_t *ne, PosencError *err) {
    const GgufTensor *t = gguf_find_tensor(g, name);
    if (!t) {
        posenc_error(err, "%s: missing tensor '%s'", g->path, name);
        return NULL;
    }
    int same = t->n_dims == n_dims;
    for (int d = 0; same && d < n_dims; d++) same = t->ne[d] == ne[d];
    if (!same) {
        char have[96] = "", want[96] = "";
        for (int d = 0, o = 0; d < t->n_dims; d++)
            o += snprintf(have + o, sizeof have - (size_t)o, "%s%lld", d ? ", " : "",
                          (long long)t->ne[d]);
        for (int d = 0, o = 0; d < n_dims && d < GGUF_MAX_DIMS; d++)
            o += snprintf(want + o, sizeof want - (size_t)o, "%s%lld", d ? ", " : "",
                          (long long)ne[d]);
        posenc_error(err, "%s: tensor '%s' has shape [%s], expected [%s]", g->path, name, have,
                     want);
        return NULL;
    }
    return t;
}

int gguf_tensor_row_f32(const GgufTensor *t, size_t row, float *out) {
    size_t n = (size_t)t->ne[0];
    if (row >= t->nelem / n) return -1;
    size_t rs = tensor_row_bytes(t->type, n);
    tensor_dequantize(t->type, (const uint8_t *)t->data + row * rs, out, n);
    return 0;
}
