/* GGUF reader: valid files read back exactly; every kind of malformed file
 * (truncated, lying counts and lengths, bad offsets, bad types, duplicates)
 * is refused with one line naming the file, never a crash.  The files are
 * built here by a tiny writer that records where each field lies, so that a
 * test can corrupt exactly one field.  The last tests run tools/convert.py
 * on the shared models when Python is available. */
#include "base/gguf.h"
#include "tests/common.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a tiny GGUF writer ------------------------------------------------------ */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} Buf;

static void put(Buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u8(Buf *b, uint8_t x) { put(b, &x, 1); }
static void put_u16(Buf *b, uint16_t x) { put(b, &x, 2); }
static void put_u32(Buf *b, uint32_t x) { put(b, &x, 4); }
static void put_u64(Buf *b, uint64_t x) { put(b, &x, 8); }
static void put_f32(Buf *b, float x) { put(b, &x, 4); }
static void put_f64(Buf *b, double x) { put(b, &x, 8); }
static void put_str(Buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void put_key(Buf *b, const char *key, GgufType type) {
    put_str(b, key);
    put_u32(b, type);
}
static void pad_to(Buf *b, size_t align) {
    while (b->n % align) put_u8(b, 0);
}
static void patch_u32(Buf *b, size_t at, uint32_t x) { memcpy(b->p + at, &x, 4); }
static void patch_u64(Buf *b, size_t at, uint64_t x) { memcpy(b->p + at, &x, 8); }
static void buf_free(Buf *b) { free(b->p); }

static uint16_t bf16_of(float f) {   /* exact for the values used here */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* Knobs for variants that cannot be made by patching one field. */
typedef struct {
    int dup_key;            /* write "a.u8" twice */
    int dup_tensor;         /* second tensor named like the first */
    int overlap;            /* second tensor at the first one's offset */
    uint32_t alignment;     /* nonzero: write general.alignment (u32) */
    int alignment_as_str;   /* general.alignment written as a string */
    const char *extra_key;  /* an extra uint8 kv with this key */
    const char *name0;      /* replaces the first tensor's name */
    int q8_row;             /* Q8_0 tensor row length (default 32) */
} Spec;

#define N_TENSORS 4
/* Where each field went, for patching. */
typedef struct {
    size_t version_at, n_tensors_at, n_kv_at;
    size_t key0_len_at, type0_at;          /* first kv */
    size_t arr_str_type_at, arr_str_n_at;  /* "a.arr_str" */
    size_t arr_f32_n_at, bool_at;
    size_t ndims_at[N_TENSORS], ne_at[N_TENSORS], type_at[N_TENSORS], offset_at[N_TENSORS];
    size_t name_len_at[N_TENSORS];
    uint64_t offset[N_TENSORS];
    size_t infos_end, data_at;
    uint64_t n_kv;
} Layout;

static const char *const tensor_names[N_TENSORS] = {"t.f32", "t.f16", "t.bf16", "t.q8"};

/* Builds a valid (unless the spec says otherwise) GGUF v3 file in b whose
 * last tensor ends exactly at the end of the file. */
static void build(Buf *b, const Spec *s, Layout *L) {
    memset(L, 0, sizeof *L);
    size_t align = s->alignment ? s->alignment : 32;
    int q8_row = s->q8_row ? s->q8_row : 32;
    put(b, "GGUF", 4);
    L->version_at = b->n;
    put_u32(b, 3);
    L->n_tensors_at = b->n;
    put_u64(b, N_TENSORS);
    L->n_kv_at = b->n;
    put_u64(b, 0);   /* patched below */

    uint64_t n_kv = 0;
    L->key0_len_at = b->n;
    put_key(b, "general.architecture", GGUF_TYPE_STRING);
    L->type0_at = b->n - 4;
    put_str(b, "test");
    n_kv++;
    put_key(b, "a.u8", GGUF_TYPE_UINT8); put_u8(b, 200); n_kv++;
    put_key(b, "a.i8", GGUF_TYPE_INT8); put_u8(b, (uint8_t)-100); n_kv++;
    put_key(b, "a.u16", GGUF_TYPE_UINT16); put_u16(b, 60000); n_kv++;
    put_key(b, "a.i16", GGUF_TYPE_INT16); put_u16(b, (uint16_t)-30000); n_kv++;
    put_key(b, "a.u32", GGUF_TYPE_UINT32); put_u32(b, 4000000000u); n_kv++;
    put_key(b, "a.i32", GGUF_TYPE_INT32); put_u32(b, (uint32_t)-2000000000); n_kv++;
    put_key(b, "a.f32", GGUF_TYPE_FLOAT32); put_f32(b, 1.5f); n_kv++;
    put_key(b, "a.bool", GGUF_TYPE_BOOL);
    L->bool_at = b->n;
    put_u8(b, 1);
    n_kv++;
    put_key(b, "a.u64", GGUF_TYPE_UINT64); put_u64(b, (1ull << 63) + 5); n_kv++;
    put_key(b, "a.i64", GGUF_TYPE_INT64); put_u64(b, (uint64_t)-(1ll << 40)); n_kv++;
    put_key(b, "a.f64", GGUF_TYPE_FLOAT64); put_f64(b, 0.1); n_kv++;
    put_key(b, "a.small", GGUF_TYPE_INT64); put_u64(b, 7); n_kv++;
    put_key(b, "a.arr_str", GGUF_TYPE_ARRAY);
    L->arr_str_type_at = b->n;
    put_u32(b, GGUF_TYPE_STRING);
    L->arr_str_n_at = b->n;
    put_u64(b, 3);
    put_str(b, "hello"); put_str(b, ""); put_str(b, "w\xc3\xb6rld");
    n_kv++;
    put_key(b, "a.arr_i32", GGUF_TYPE_ARRAY);
    put_u32(b, GGUF_TYPE_INT32); put_u64(b, 3);
    put_u32(b, 1); put_u32(b, (uint32_t)-2); put_u32(b, 3);
    n_kv++;
    put_key(b, "a.arr_f32", GGUF_TYPE_ARRAY);
    put_u32(b, GGUF_TYPE_FLOAT32);
    L->arr_f32_n_at = b->n;
    put_u64(b, 2);
    put_f32(b, 0.5f); put_f32(b, -1.25f);
    n_kv++;
    put_key(b, "a.arr_empty", GGUF_TYPE_ARRAY); put_u32(b, GGUF_TYPE_UINT8); put_u64(b, 0);
    n_kv++;
    put_key(b, "a.arr_bool", GGUF_TYPE_ARRAY); put_u32(b, GGUF_TYPE_BOOL); put_u64(b, 2);
    put_u8(b, 1); put_u8(b, 0);
    n_kv++;
    if (s->dup_key) { put_key(b, "a.u8", GGUF_TYPE_UINT8); put_u8(b, 1); n_kv++; }
    if (s->alignment) {
        if (s->alignment_as_str) {
            put_key(b, "general.alignment", GGUF_TYPE_STRING);
            put_str(b, "32");
        } else {
            put_key(b, "general.alignment", GGUF_TYPE_UINT32);
            put_u32(b, s->alignment);
        }
        n_kv++;
    }
    if (s->extra_key) { put_key(b, s->extra_key, GGUF_TYPE_UINT8); put_u8(b, 0); n_kv++; }
    patch_u64(b, L->n_kv_at, n_kv);
    L->n_kv = n_kv;

    /* Tensor infos; offsets laid out back to back, each aligned. */
    const int64_t ne[N_TENSORS][2] = {{3, 2}, {4, 1}, {2, 2}, {q8_row, 2}};
    const int n_dims[N_TENSORS] = {2, 1, 2, 2};
    const TensorType types[N_TENSORS] = {TENSOR_F32, TENSOR_F16, TENSOR_BF16,
                                       TENSOR_Q8_0};
    const size_t nbytes[N_TENSORS] = {24, 8, 8, (size_t)(q8_row / 32) * 34 * 2};
    uint64_t off = 0;
    for (int i = 0; i < N_TENSORS; i++) {
        const char *name = tensor_names[i];
        if (i == 0 && s->name0) name = s->name0;
        if (i == 1 && s->dup_tensor) name = tensor_names[0];
        L->name_len_at[i] = b->n;
        put_str(b, name);
        L->ndims_at[i] = b->n;
        put_u32(b, (uint32_t)n_dims[i]);
        L->ne_at[i] = b->n;
        for (int d = 0; d < n_dims[i]; d++) put_u64(b, (uint64_t)ne[i][d]);
        L->type_at[i] = b->n;
        put_u32(b, types[i]);
        L->offset[i] = (i == 1 && s->overlap) ? L->offset[0] : off;
        L->offset_at[i] = b->n;
        put_u64(b, L->offset[i]);
        off += nbytes[i];
        off = (off + align - 1) / align * align;
    }
    L->infos_end = b->n;
    pad_to(b, align);
    L->data_at = b->n;

    /* Data.  F32: -1, -0.5, ..., 1.5; F16: 1, -2, 0.5, 65504;
     * BF16: 1.5, -3, 256, 2^-7; Q8_0: block k has d = 0.5/(k+1), q[j] = j-16. */
    for (int i = 0; i < N_TENSORS; i++) {
        if (i == 1 && s->overlap) continue;
        while (b->n < L->data_at + L->offset[i]) put_u8(b, 0);
        switch (i) {
        case 0: for (int j = 0; j < 6; j++) put_f32(b, -1.0f + 0.5f * (float)j); break;
        case 1: {
            const float v[4] = {1.0f, -2.0f, 0.5f, 65504.0f};
            for (int j = 0; j < 4; j++) put_u16(b, fp32_to_fp16(v[j]));
            break;
        }
        case 2: {
            const float v[4] = {1.5f, -3.0f, 256.0f, 0.0078125f};
            for (int j = 0; j < 4; j++) put_u16(b, bf16_of(v[j]));
            break;
        }
        case 3:
            for (int k = 0; k < q8_row / 32 * 2; k++) {
                put_u16(b, fp32_to_fp16(0.5f / (float)(k + 1)));
                for (int j = 0; j < 32; j++) put_u8(b, (uint8_t)(int8_t)(j - 16));
            }
            break;
        }
    }
}

static void build_valid(Buf *b, Layout *L) {
    Spec s = {0};
    build(b, &s, L);
}

/* ---- helpers -------------------------------------------------------------------- */

/* gguf_open must refuse the bytes: -1, one line starting with the file's
 * name, mentioning `needle` (if given), and *g left with nothing to close. */
static void expect_fail_at(const Buf *b, const char *needle, const char *what) {
    const char *path = tests_write_temp(b->p, b->n, ".gguf");
    GgufFile g;
    PosencError err = {{0}};
    int rc = gguf_open(&g, path, &err);
    ck_assert_msg(rc == -1, "%s: gguf_open accepted a malformed file", what);
    tests_expect_file_error(err.msg, path, needle);
    ck_assert_ptr_null(g.kv);
    ck_assert_ptr_null(g.tensors);
    ck_assert_ptr_null(g.map.data);
    gguf_close(&g);   /* harmless after a failed open */
}
#define expect_fail(b, needle) expect_fail_at((b), (needle), #needle)

static void open_ok(GgufFile *g, const Buf *b) {
    const char *path = tests_write_temp(b->p, b->n, ".gguf");
    PosencError err = {{0}};
    int rc = gguf_open(g, path, &err);
    ck_assert_msg(rc == 0, "gguf_open failed: %s", err.msg);
}

/* ---- valid files ------------------------------------------------------------------ */

START_TEST(test_reads_every_kv_type) {
    Buf b = {0};
    Layout L;
    build_valid(&b, &L);
    GgufFile g;
    open_ok(&g, &b);
    PosencError err = {{0}};
    ck_assert_uint_eq(g.version, 3);
    ck_assert_uint_eq(g.n_kv, L.n_kv);
    ck_assert_uint_eq(g.alignment, 32);

    const char *s;
    ck_assert_int_eq(gguf_get_str(&g, "general.architecture", &s, &err), 0);
    ck_assert_str_eq(s, "test");
    uint32_t u32;
    ck_assert_int_eq(gguf_get_u32(&g, "a.u8", &u32, &err), 0);
    ck_assert_uint_eq(u32, 200);
    ck_assert_int_eq(gguf_get_u32(&g, "a.u16", &u32, &err), 0);
    ck_assert_uint_eq(u32, 60000);
    ck_assert_int_eq(gguf_get_u32(&g, "a.u32", &u32, &err), 0);
    ck_assert_uint_eq(u32, 4000000000u);
    ck_assert_int_eq(gguf_get_u32(&g, "a.small", &u32, &err), 0);   /* int64 that fits */
    ck_assert_uint_eq(u32, 7);
    int64_t i64;
    ck_assert_int_eq(gguf_get_i64(&g, "a.i8", &i64, &err), 0);
    ck_assert_int_eq(i64, -100);
    ck_assert_int_eq(gguf_get_i64(&g, "a.i16", &i64, &err), 0);
    ck_assert_int_eq(i64, -30000);
    ck_assert_int_eq(gguf_get_i64(&g, "a.i32", &i64, &err), 0);
    ck_assert_int_eq(i64, -2000000000);
    ck_assert_int_eq(gguf_get_i64(&g, "a.i64", &i64, &err), 0);
    ck_assert_int_eq(i64, -(1ll << 40));
    uint64_t u64;
    ck_assert_int_eq(gguf_get_u64(&g, "a.u64", &u64, &err), 0);
    ck_assert_uint_eq(u64, (1ull << 63) + 5);
    float f;
    ck_assert_int_eq(gguf_get_f32(&g, "a.f32", &f, &err), 0);
    ck_assert_float_eq(f, 1.5f);
    ck_assert_int_eq(gguf_get_f32(&g, "a.f64", &f, &err), 0);
    ck_assert_float_eq(f, 0.1f);
    const GgufKV *kv = gguf_find_kv(&g, "a.f64");
    ck_assert_ptr_nonnull(kv);
    ck_assert(kv->type == GGUF_TYPE_FLOAT64 && kv->v.f64 == 0.1);
    int bval;
    ck_assert_int_eq(gguf_get_bool(&g, "a.bool", &bval, &err), 0);
    ck_assert_int_eq(bval, 1);

    const GgufArray *arr;
    ck_assert_int_eq(gguf_get_arr(&g, "a.arr_str", GGUF_TYPE_STRING, &arr, &err), 0);
    ck_assert_uint_eq(arr->n, 3);
    GgufString e0 = gguf_arr_str(arr, 0), e1 = gguf_arr_str(arr, 1), e2 = gguf_arr_str(arr, 2);
    ck_assert(e0.len == 5 && memcmp(e0.ptr, "hello", 5) == 0);
    ck_assert_uint_eq(e1.len, 0);
    ck_assert(e2.len == 6 && memcmp(e2.ptr, "w\xc3\xb6rld", 6) == 0);
    ck_assert_int_eq(gguf_get_arr(&g, "a.arr_i32", GGUF_TYPE_INT32, &arr, &err), 0);
    ck_assert(arr->n == 3 && gguf_arr_int(arr, 0) == 1 && gguf_arr_int(arr, 1) == -2 &&
              gguf_arr_int(arr, 2) == 3);
    ck_assert_int_eq(gguf_get_arr_int(&g, "a.arr_i32", &arr, &err), 0);
    ck_assert_int_eq(gguf_get_arr(&g, "a.arr_f32", GGUF_TYPE_FLOAT32, &arr, &err), 0);
    ck_assert(arr->n == 2 && gguf_arr_f32(arr, 0) == 0.5f && gguf_arr_f32(arr, 1) == -1.25f);
    ck_assert_int_eq(gguf_get_arr(&g, "a.arr_empty", GGUF_TYPE_UINT8, &arr, &err), 0);
    ck_assert_uint_eq(arr->n, 0);
    ck_assert_int_eq(gguf_get_arr(&g, "a.arr_bool", GGUF_TYPE_BOOL, &arr, &err), 0);
    ck_assert(arr->n == 2 && gguf_arr_int(arr, 0) == 1 && gguf_arr_int(arr, 1) == 0);
    ck_assert_ptr_null(gguf_find_kv(&g, "a.absent"));
    gguf_close(&g);
    buf_free(&b);
}
END_TEST

/* A getter refuses with one line naming the file and mentioning `needle`. */
static void expect_get_fail(const GgufFile *g, int rc, const PosencError *err,
                            const char *needle) {
    ck_assert_int_eq(rc, -1);
    tests_expect_file_error(err->msg, g->path, needle);
}

START_TEST(test_getters_refuse_mismatches) {
    Buf b = {0};
    Layout L;
    build_valid(&b, &L);
    GgufFile g;
    open_ok(&g, &b);
    PosencError err = {{0}};
    uint32_t u32 = 12345;
    expect_get_fail(&g, gguf_get_u32(&g, "a.i8", &u32, &err), &err, "out of range");
    expect_get_fail(&g, gguf_get_u32(&g, "a.i32", &u32, &err), &err, "out of range");
    expect_get_fail(&g, gguf_get_u32(&g, "a.u64", &u32, &err), &err, "out of range");
    expect_get_fail(&g, gguf_get_u32(&g, "a.f32", &u32, &err), &err, "float32");
    expect_get_fail(&g, gguf_get_u32(&g, "general.architecture", &u32, &err), &err, "string");
    expect_get_fail(&g, gguf_get_u32(&g, "a.arr_i32", &u32, &err), &err, "array");
    expect_get_fail(&g, gguf_get_u32(&g, "no.such.key", &u32, &err), &err, "missing key");
    ck_assert_uint_eq(u32, 12345);   /* untouched on failure */
    int64_t i64;
    expect_get_fail(&g, gguf_get_i64(&g, "a.u64", &i64, &err), &err, "does not fit");
    float f;
    expect_get_fail(&g, gguf_get_f32(&g, "a.u8", &f, &err), &err, "expected a float");
    const char *s;
    expect_get_fail(&g, gguf_get_str(&g, "a.u8", &s, &err), &err, "expected string");
    int bv;
    expect_get_fail(&g, gguf_get_bool(&g, "a.u8", &bv, &err), &err, "expected bool");
    const GgufArray *arr;
    expect_get_fail(&g, gguf_get_arr(&g, "a.arr_i32", GGUF_TYPE_UINT32, &arr, &err), &err,
                    "array of int32");
    expect_get_fail(&g, gguf_get_arr(&g, "a.u8", GGUF_TYPE_UINT8, &arr, &err), &err,
                    "expected an array of uint8");
    expect_get_fail(&g, gguf_get_arr_int(&g, "a.arr_f32", &arr, &err), &err,
                    "array of integers");
    gguf_close(&g);
    buf_free(&b);
}
END_TEST

START_TEST(test_tensors_read_back) {
    Buf b = {0};
    Layout L;
    build_valid(&b, &L);
    GgufFile g;
    open_ok(&g, &b);
    ck_assert_uint_eq(g.n_tensors, N_TENSORS);
    ck_assert_uint_eq(g.data_offset, L.data_at);
    const size_t nbytes[N_TENSORS] = {24, 8, 8, 68};
    const TensorType types[N_TENSORS] = {TENSOR_F32, TENSOR_F16, TENSOR_BF16,
                                       TENSOR_Q8_0};
    for (int i = 0; i < N_TENSORS; i++) {
        const GgufTensor *t = gguf_find_tensor(&g, tensor_names[i]);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->name, tensor_names[i]);
        ck_assert_int_eq(t->type, types[i]);
        ck_assert_uint_eq(t->nbytes, nbytes[i]);
        ck_assert_ptr_eq(t->data, g.map.data + L.data_at + L.offset[i]);
        ck_assert_uint_eq((uintptr_t)t->data % 32, 0);
    }
    ck_assert_ptr_null(gguf_find_tensor(&g, "t.absent"));

    float row[32];
    const GgufTensor *t = gguf_find_tensor(&g, "t.f32");
    ck_assert(t->n_dims == 2 && t->ne[0] == 3 && t->ne[1] == 2 && t->ne[2] == 1 &&
              t->ne[3] == 1 && t->nelem == 6);
    ck_assert_int_eq(gguf_tensor_row_f32(t, 1, row), 0);
    ck_assert(row[0] == 0.5f && row[1] == 1.0f && row[2] == 1.5f);
    ck_assert_int_eq(gguf_tensor_row_f32(t, 2, row), -1);   /* only 2 rows */
    ck_assert_float_eq(((const float *)t->data)[0], -1.0f);

    t = gguf_find_tensor(&g, "t.f16");
    ck_assert(t->n_dims == 1 && t->ne[0] == 4 && t->ne[1] == 1);
    ck_assert_int_eq(gguf_tensor_row_f32(t, 0, row), 0);
    ck_assert(row[0] == 1.0f && row[1] == -2.0f && row[2] == 0.5f && row[3] == 65504.0f);

    t = gguf_find_tensor(&g, "t.bf16");
    ck_assert_int_eq(gguf_tensor_row_f32(t, 1, row), 0);
    ck_assert(row[0] == 256.0f && row[1] == 0.0078125f);

    t = gguf_find_tensor(&g, "t.q8");
    ck_assert(t->ne[0] == 32 && t->ne[1] == 2);
    ck_assert_uint_eq(tensor_row_bytes(t->type, 32), 34);
    for (size_t r = 0; r < 2; r++) {
        ck_assert_int_eq(gguf_tensor_row_f32(t, r, row), 0);
        for (int j = 0; j < 32; j++)
            ck_assert_float_eq(row[j], 0.5f / (float)(r + 1) * (float)(j - 16));
    }

    /* gguf_get_tensor: shape checks with a one-line message */
    PosencError err = {{0}};
    const int64_t ne_ok[2] = {3, 2}, ne_bad[2] = {2, 3};
    ck_assert_ptr_eq(gguf_get_tensor(&g, "t.f32", 2, ne_ok, &err), gguf_find_tensor(&g, "t.f32"));
    ck_assert_ptr_null(gguf_get_tensor(&g, "t.f32", 2, ne_bad, &err));
    ck_assert_msg(strstr(err.msg, "has shape [3, 2], expected [2, 3]"), "%s", err.msg);
    ck_assert_ptr_null(gguf_get_tensor(&g, "t.f32", 1, ne_ok, &err));
    ck_assert_ptr_null(gguf_get_tensor(&g, "nope", 1, ne_ok, &err));
    ck_assert_msg(strstr(err.msg, "missing tensor 'nope'"), "%s", err.msg);
    gguf_close(&g);
    buf_free(&b);
}
END_TEST

START_TEST(test_custom_alignment_and_v2) {
    Buf b = {0};
    Layout L;
    Spec s = {.alignment = 64};
    build(&b, &s, &L);
    GgufFile g;
    open_ok(&g, &b);
    ck_assert_uint_eq(g.alignment, 64);
    ck_assert_uint_eq(g.data_offset % 64, 0);
    for (size_t i = 0; i < g.n_tensors; i++)
        ck_assert_uint_eq((size_t)((const uint8_t *)g.tensors[i].data - g.map.data) % 64, 0);
    gguf_close(&g);
    /* v2 has the same layout */
    patch_u32(&b, L.version_at, 2);
    open_ok(&g, &b);
    ck_assert_uint_eq(g.version, 2);
    gguf_close(&g);
    buf_free(&b);
}
END_TEST

START_TEST(test_no_tensors) {
    Buf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, 1);
    put_key(&b, "general.name", GGUF_TYPE_STRING);
    put_str(&b, "x");
    GgufFile g;
    open_ok(&g, &b);
    ck_assert_uint_eq(g.n_tensors, 0);
    PosencError err;
    const char *s;
    ck_assert_int_eq(gguf_get_str(&g, "general.name", &s, &err), 0);
    ck_assert_str_eq(s, "x");
    gguf_close(&g);
    buf_free(&b);
}
END_TEST

/* ---- malformed files ---------------------------------------------------------------- */

/* Every proper prefix of a valid file must fail cleanly (the last tensor
 * ends at the end of the file, so even the last byte matters). */
START_TEST(test_every_truncation_fails) {
    Buf b = {0};
    Layout L;
    build_valid(&b, &L);
    const char *path = tests_write_temp("", 0, NULL);
    int fd = open(path, O_WRONLY);
    ck_assert(fd >= 0);
    for (size_t n = 0; n < b.n; n++) {
        ck_assert(ftruncate(fd, 0) == 0);
        ck_assert(pwrite(fd, b.p, n, 0) == (ssize_t)n);
        GgufFile g;
        PosencError err = {{0}};
        int rc = gguf_open(&g, path, &err);
        ck_assert_msg(rc == -1, "prefix of %zu/%zu bytes accepted", n, b.n);
        ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0 && !strchr(err.msg, '\n'),
                      "prefix %zu: bad message: %s", n, err.msg);
    }
    close(fd);
    buf_free(&b);
}
END_TEST

/* Overwriting any single byte of the header, metadata or tensor infos with
 * 0x00, 0xff or a few other values must never crash, leak or read outside
 * the file: either the file still parses or it fails with a proper message. */
START_TEST(test_byte_corruption_never_crashes) {
    Buf b = {0};
    Layout L;
    build_valid(&b, &L);
    const char *path = tests_write_temp("", 0, NULL);
    int fd = open(path, O_WRONLY);
    ck_assert(fd >= 0);
    const uint8_t vals[] = {0x00, 0xff, 0x01, 0x7f, 0x80, 0x40};
    uint8_t *copy = malloc(b.n);
    for (size_t at = 0; at < L.data_at; at++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(copy, b.p, b.n);
            if (copy[at] == vals[v]) continue;
            copy[at] = vals[v];
            ck_assert(ftruncate(fd, 0) == 0);
            ck_assert(pwrite(fd, copy, b.n, 0) == (ssize_t)b.n);
            GgufFile g;
            PosencError err = {{0}};
            if (gguf_open(&g, path, &err) == 0) {
                /* whatever parsed must be inside the mapping */
                for (size_t i = 0; i < g.n_tensors; i++) {
                    const GgufTensor *t = &g.tensors[i];
                    ck_assert((const uint8_t *)t->data >= g.map.data &&
                              (const uint8_t *)t->data + t->nbytes <= g.map.data + g.map.size);
                }
                gguf_close(&g);
            } else {
                ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0 &&
                              !strchr(err.msg, '\n'), "byte %zu: bad message: %s", at, err.msg);
            }
        }
    }
    free(copy);
    close(fd);
    buf_free(&b);
}
END_TEST

START_TEST(test_bad_header) {
    Buf b = {0};
    Layout L;
    build_valid(&b, &L);
    b.p[0] = 'X';
    expect_fail(&b, "bad magic");
    b.p[0] = 'G';
    patch_u32(&b, L.version_at, 1);
    expect_fail(&b, "version 1");
    patch_u32(&b, L.version_at, 4);
    expect_fail(&b, "unsupported GGUF version 4");
    patch_u32(&b, L.version_at, 0x03000000u);
    expect_fail(&b, "big-endian");
    patch_u32(&b, L.version_at, 3);

    Buf empty = {0};
    put_u8(&empty, 0);
    empty.n = 0;
    expect_fail(&empty, "empty");
    buf_free(&empty);
    Buf tiny = {0};
    put(&tiny, "GGU", 3);
    expect_fail(&tiny, "truncated");
    buf_free(&tiny);
    buf_free(&b);
}
END_TEST

START_TEST(test_lying_counts) {
    Buf b = {0};
    Layout L;
    build_valid(&b, &L);
    patch_u64(&b, L.n_kv_at, 1ull << 62);
    expect_fail(&b, "kv count");
    patch_u64(&b, L.n_kv_at, UINT64_MAX);
    expect_fail(&b, "kv count");
    patch_u64(&b, L.n_kv_at, L.n_kv + 1);   /* plausible but wrong: misparses */
    expect_fail(&b, NULL);
    patch_u64(&b, L.n_kv_at, L.n_kv);
    patch_u64(&b, L.n_tensors_at, 1ull << 62);
    expect_fail(&b, "tensor count");
    patch_u64(&b, L.n_tensors_at, N_TENSORS + 1);
    expect_fail(&b, NULL);
    patch_u64(&b, L.n_tensors_at, N_TENSORS);
    buf_free(&b);
}
END_TEST

START_TEST(test_lying_lengths) {
    Buf b = {0};
    Layout L;
    build_valid(&b, &L);
    patch_u64(&b, L.key0_len_at, 1ull << 63);
    expect_fail(&b, "string length");
    patch_u64(&b, L.key0_len_at, UINT64_MAX);
    expect_fail(&b, "string length");
    patch_u64(&b, L.key0_len_at, strlen("general.architecture"));

    patch_u64(&b, L.arr_str_n_at, 1ull << 61);
    expect_fail(&b, "array of");
    patch_u64(&b, L.arr_str_n_at, UINT64_MAX);
    expect_fail(&b, "array of");
    patch_u64(&b, L.arr_str_n_at, 30);   /* passes the count check, then misparses */
    expect_fail(&b, NULL);
    patch_u64(&b, L.arr_str_n_at, 3);

    patch_u64(&b, L.arr_f32_n_at, 1ull << 62);   /* 4 * 2^62 overflows */
    expect_fail(&b, "array of");
    patch_u64(&b, L.arr_f32_n_at, 2);

    patch_u64(&b, L.name_len_at[2], 1ull << 40);
    expect_fail(&b, "string length");
    buf_free(&b);
}
END_TEST

START_TEST(test_bad_value_types) {
    Buf b = {0};
    Layout L;
    build_valid(&b, &L);
    patch_u32(&b, L.type0_at, 13);
    expect_fail(&b, "unknown value type 13");
    patch_u32(&b, L.type0_at, 0x80000000u);
    expect_fail(&b, "unknown value type");
    patch_u32(&b, L.type0_at, GGUF_TYPE_STRING);

    patch_u32(&b, L.arr_str_type_at, GGUF_TYPE_ARRAY);
    expect_fail(&b, "nested arrays");
    patch_u32(&b, L.arr_str_type_at, 99);
    expect_fail(&b, "unknown array element type 99");
    patch_u32(&b, L.arr_str_type_at, GGUF_TYPE_STRING);

    b.p[L.bool_at] = 2;
    expect_fail(&b, "bool value 2");
    buf_free(&b);
}
END_TEST

START_TEST(test_bad_tensor_infos) {
    Buf b = {0};
    Layout L;
    build_valid(&b, &L);
    patch_u32(&b, L.ndims_at[0], 0);
    expect_fail(&b, "0 dimensions");
    patch_u32(&b, L.ndims_at[0], 5);
    expect_fail(&b, "5 dimensions");
    patch_u32(&b, L.ndims_at[0], 2);

    patch_u64(&b, L.ne_at[0], 0);
    expect_fail(&b, "dimension 0 has invalid size 0");
    patch_u64(&b, L.ne_at[0] + 8, 0);
    patch_u64(&b, L.ne_at[0], 3);
    expect_fail(&b, "dimension 1 has invalid size 0");
    patch_u64(&b, L.ne_at[0], 1ull << 63);   /* negative as int64 */
    expect_fail(&b, "invalid size");
    patch_u64(&b, L.ne_at[0], 1ull << 40);
    patch_u64(&b, L.ne_at[0] + 8, 1ull << 40);
    expect_fail(&b, "element count overflows");
    patch_u64(&b, L.ne_at[0], 1ull << 61);   /* fits elements, not bytes */
    patch_u64(&b, L.ne_at[0] + 8, 2);
    expect_fail(&b, "byte size overflows");
    patch_u64(&b, L.ne_at[0], 1ull << 30);   /* plausible size, past the end */
    expect_fail(&b, "past the end");
    patch_u64(&b, L.ne_at[0], 3);

    patch_u32(&b, L.type_at[0], 16);
    expect_fail(&b, "'t.f32': unsupported tensor type 16 (iq2_xxs)");
    patch_u32(&b, L.type_at[0], 2);   /* rows of 3 weights cannot be 32-blocks */
    expect_fail(&b, "'t.f32': row length 3 is not a multiple of the q4_0 block size 32");
    patch_u32(&b, L.type_at[0], 12);
    patch_u64(&b, L.ne_at[0], 32);
    expect_fail(&b, "'t.f32': row length 32 is not a multiple of the q4_k block size 256");
    /* MXFP4 (39): blocks of 32 weights in 17 bytes.  Its rows split into
     * blocks as the others' do, and a 32 x 1 tensor takes one block where
     * the f32 one took 24 bytes (17 bytes per 32 cannot overflow: the
     * element count is at most 2^63). */
    patch_u32(&b, L.type_at[0], 39);
    patch_u64(&b, L.ne_at[0], 3);
    expect_fail(&b, "'t.f32': row length 3 is not a multiple of the mxfp4 block size 32");
    patch_u64(&b, L.ne_at[0], 32);
    patch_u64(&b, L.ne_at[0] + 8, 1);
    {
        GgufFile g;
        open_ok(&g, &b);
        const GgufTensor *t = gguf_find_tensor(&g, "t.f32");
        ck_assert_int_eq(t->type, TENSOR_MXFP4);
        ck_assert_uint_eq(t->nbytes, 17);
        gguf_close(&g);
    }
    patch_u64(&b, L.ne_at[0], 1ull << 30);   /* 2^25 blocks of 17 bytes: past the end */
    expect_fail(&b, "past the end");
    patch_u64(&b, L.ne_at[0] + 8, 2);
    patch_u64(&b, L.ne_at[0], 3);
    patch_u32(&b, L.type_at[0], 12345);
    expect_fail(&b, "unsupported tensor type 12345 (unknown)");
    patch_u32(&b, L.type_at[0], TENSOR_F32);

    patch_u64(&b, L.offset_at[3], L.offset[3] + 4096);
    expect_fail(&b, "past the end");
    patch_u64(&b, L.offset_at[3], UINT64_MAX - 31);
    expect_fail(&b, "past the end");
    patch_u64(&b, L.offset_at[3], L.offset[3] + 4);
    expect_fail(&b, "not a multiple of the alignment");
    patch_u64(&b, L.offset_at[3], L.offset[3]);
    buf_free(&b);
}
END_TEST

START_TEST(test_bad_structure) {
    Buf b = {0};
    Layout L;
    Spec s = {.overlap = 1};
    build(&b, &s, &L);
    expect_fail(&b, "overlap");
    buf_free(&b);

    b = (Buf){0};
    s = (Spec){.dup_tensor = 1};
    build(&b, &s, &L);
    expect_fail(&b, "duplicate tensor name 't.f32'");
    buf_free(&b);

    b = (Buf){0};
    s = (Spec){.dup_key = 1};
    build(&b, &s, &L);
    expect_fail(&b, "duplicate key 'a.u8'");
    buf_free(&b);

    b = (Buf){0};
    s = (Spec){.q8_row = 48};
    build(&b, &s, &L);
    expect_fail(&b, "not a multiple of the q8_0 block size");
    buf_free(&b);

    b = (Buf){0};
    s = (Spec){.extra_key = "bad\nkey"};
    build(&b, &s, &L);
    expect_fail(&b, "control characters");
    buf_free(&b);

    b = (Buf){0};
    s = (Spec){.extra_key = ""};
    build(&b, &s, &L);
    expect_fail(&b, "empty key");
    buf_free(&b);

    char long_name[80];
    memset(long_name, 'x', 65);
    long_name[65] = '\0';
    b = (Buf){0};
    s = (Spec){.name0 = long_name};
    build(&b, &s, &L);
    expect_fail(&b, "exceeds the maximum");
    buf_free(&b);

    b = (Buf){0};
    s = (Spec){.name0 = ""};
    build(&b, &s, &L);
    expect_fail(&b, "empty name");
    buf_free(&b);
}
END_TEST

START_TEST(test_bad_alignment) {
    /* Values that cannot lay out data: build with 32 and patch the key's
     * value, the last u32 before the first tensor name. */
    Buf b;
    Layout L;
    Spec s;
    const uint32_t bad[] = {0, 48, 3};
    for (size_t i = 0; i < 3; i++) {
        b = (Buf){0};
        s = (Spec){.alignment = 32};
        build(&b, &s, &L);
        patch_u32(&b, L.name_len_at[0] - 4, bad[i]);
        expect_fail(&b, "not a power of two");
        buf_free(&b);
    }
    b = (Buf){0};
    s = (Spec){.alignment = 32, .alignment_as_str = 1};
    build(&b, &s, &L);
    expect_fail(&b, "general.alignment' has type string");
    buf_free(&b);

    /* Alignment 2 is a power of two, but f32 data at a file offset that is
     * 2 mod 4 would be read misaligned by the engine: refused.  With
     * alignment 2 the blob starts right after the infos (rounded to 2). */
    b = (Buf){0};
    s = (Spec){.alignment = 32};
    build(&b, &s, &L);
    patch_u32(&b, L.name_len_at[0] - 4, 2);
    size_t blob = (L.infos_end + 1) / 2 * 2;
    patch_u64(&b, L.offset_at[0], blob % 4 == 0 ? 0 : 2);
    GgufFile g;
    open_ok(&g, &b);
    ck_assert_uint_eq(g.alignment, 2);
    ck_assert_uint_eq(g.data_offset, blob);
    gguf_close(&g);
    patch_u64(&b, L.offset_at[0], blob % 4 == 0 ? 2 : 0);
    expect_fail(&b, "not 4-byte aligned");
    buf_free(&b);
}
END_TEST

/* ---- tools/convert.py ------------------------------------------------------------------ */

/* The shared models directory when convert.py can run on it; else NULL,
 * after saying that `what` is skipped. */
static const char *convert_models(const char *what) {
    return tests_python_available(what) ? tests_models_dir(what) : NULL;
}

/* <models>/<rel> converted (extra args NULL-terminated, or NULL) and opened. */
static void convert_and_open(GgufFile *g, const char *models, const char *rel,
                             const char *const *extra) {
    const char *out = tests_convert(models, rel, extra);
    ck_assert_msg(out != NULL, "convert.py %s failed (stderr above)", rel);
    PosencError err = {{0}};
    ck_assert_msg(gguf_open(g, out, &err) == 0, "%s", err.msg);
}

static void expect_str(const GgufFile *g, const char *key, const char *want) {
    const char *s;
    PosencError err;
    ck_assert_msg(gguf_get_str(g, key, &s, &err) == 0, "%s", err.msg);
    ck_assert_msg(strcmp(s, want) == 0, "%s = '%s', expected '%s'", key, s, want);
}

static uint32_t get_u32(const GgufFile *g, const char *key) {
    uint32_t v;
    PosencError err;
    ck_assert_msg(gguf_get_u32(g, key, &v, &err) == 0, "%s", err.msg);
    return v;
}

static float get_f32(const GgufFile *g, const char *key) {
    float v;
    PosencError err;
    ck_assert_msg(gguf_get_f32(g, key, &v, &err) == 0, "%s", err.msg);
    return v;
}

static const GgufTensor *expect_tensor(const GgufFile *g, const char *name, int n_dims,
                                       int64_t ne0, int64_t ne1, TensorType type) {
    PosencError err;
    const int64_t ne[2] = {ne0, ne1};
    const GgufTensor *t = gguf_get_tensor(g, name, n_dims, ne, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    ck_assert_msg(t->type == type, "%s has type %s", name, tensor_type_name(t->type));
    return t;
}

START_TEST(test_convert_zoo_rope) {
    const char *models = convert_models("convert.py on zoo/rope");
    if (!models) return;
    GgufFile g;
    convert_and_open(&g, models, "zoo/rope", NULL);
    expect_str(&g, "general.architecture", "gpt2");
    expect_str(&g, "posenc.positional", "rope");
    expect_str(&g, "posenc.rope.pairing", "neox");
    expect_str(&g, "tokenizer.ggml.model", "gpt2");
    ck_assert_uint_eq(get_u32(&g, "gpt2.context_length"), 128);
    ck_assert_uint_eq(get_u32(&g, "gpt2.embedding_length"), 128);
    ck_assert_uint_eq(get_u32(&g, "gpt2.block_count"), 4);
    ck_assert_uint_eq(get_u32(&g, "gpt2.feed_forward_length"), 512);
    ck_assert_uint_eq(get_u32(&g, "gpt2.attention.head_count"), 4);
    ck_assert_uint_eq(get_u32(&g, "gpt2.rope.dimension_count"), 32);
    ck_assert_float_eq(get_f32(&g, "gpt2.rope.freq_base"), 10000.0f);
    ck_assert_float_eq(get_f32(&g, "gpt2.attention.layer_norm_epsilon"), 1e-5f);
    ck_assert_ptr_null(gguf_find_kv(&g, "posenc.embedding_scale"));
    PosencError err;
    const GgufArray *toks, *merges;
    ck_assert_int_eq(gguf_get_arr(&g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, &err), 0);
    ck_assert_uint_eq(toks->n, 65);
    GgufString t1 = gguf_arr_str(toks, 1);   /* space, through GPT-2's byte map */
    ck_assert(t1.len == 2 && memcmp(t1.ptr, "\xc4\xa0", 2) == 0);
    ck_assert_int_eq(gguf_get_arr(&g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, &err),
                     0);
    ck_assert_uint_eq(merges->n, 0);
    ck_assert_ptr_null(gguf_find_kv(&g, "tokenizer.ggml.bos_token_id"));

    expect_tensor(&g, "token_embd.weight", 2, 128, 65, TENSOR_F32);
    expect_tensor(&g, "blk.0.attn_qkv.weight", 2, 128, 384, TENSOR_F32);
    expect_tensor(&g, "blk.3.attn_qkv.bias", 1, 384, 0, TENSOR_F32);
    expect_tensor(&g, "blk.3.ffn_up.weight", 2, 128, 512, TENSOR_F32);
    expect_tensor(&g, "blk.3.ffn_down.weight", 2, 512, 128, TENSOR_F32);
    expect_tensor(&g, "output_norm.bias", 1, 128, 0, TENSOR_F32);
    ck_assert_ptr_null(gguf_find_tensor(&g, "position_embd.weight"));
    ck_assert_ptr_null(gguf_find_tensor(&g, "output.weight"));   /* tied */
    ck_assert_uint_eq(g.n_tensors, 3 + 4 * 12);
    gguf_close(&g);
}
END_TEST

START_TEST(test_convert_zoo_schemes) {
    const char *models = convert_models("convert.py on the zoo");
    if (!models) return;
    GgufFile g;
    convert_and_open(&g, models, "zoo/alibi", NULL);
    expect_str(&g, "posenc.positional", "alibi");
    ck_assert_float_eq(get_f32(&g, "gpt2.attention.max_alibi_bias"), 8.0f);
    ck_assert_ptr_null(gguf_find_kv(&g, "posenc.rope.pairing"));
    gguf_close(&g);

    convert_and_open(&g, models, "zoo/sinusoidal", NULL);
    expect_str(&g, "posenc.positional", "sinusoidal");
    ck_assert_float_eq_tol(get_f32(&g, "posenc.embedding_scale"), sqrtf(128.0f), 1e-6f);
    gguf_close(&g);

    convert_and_open(&g, models, "zoo/learned", NULL);
    expect_str(&g, "posenc.positional", "learned");
    expect_tensor(&g, "position_embd.weight", 2, 128, 128, TENSOR_F32);
    /* tied: the embedding again, as llama.cpp's converter writes (and requires) */
    const GgufTensor *embd = gguf_find_tensor(&g, "token_embd.weight"),
                     *head = gguf_find_tensor(&g, "output.weight");
    ck_assert(embd && head && head->nbytes == embd->nbytes &&
              memcmp(head->data, embd->data, embd->nbytes) == 0);
    gguf_close(&g);

    convert_and_open(&g, models, "zoo/none", NULL);
    expect_str(&g, "posenc.positional", "none");
    ck_assert_ptr_null(gguf_find_tensor(&g, "position_embd.weight"));
    gguf_close(&g);

    /* t5: llama.cpp's bucket-count key and attn_rel_b (ne {n_head, buckets}),
     * posenc.* for what llama.cpp has no key for */
    convert_and_open(&g, models, "zoo/t5", NULL);
    expect_str(&g, "posenc.positional", "t5");
    ck_assert_uint_eq(get_u32(&g, "gpt2.attention.relative_buckets_count"), 32);
    ck_assert_uint_eq(get_u32(&g, "posenc.relative_attention.max_distance"), 128);
    int bidirectional = -1;
    PosencError err;
    ck_assert_int_eq(gguf_get_bool(&g, "posenc.relative_attention.bidirectional", &bidirectional,
                                   &err), 0);
    ck_assert_int_eq(bidirectional, 0);
    expect_tensor(&g, "blk.0.attn_rel_b.weight", 2, 4, 32, TENSOR_F32);
    ck_assert_ptr_null(gguf_find_tensor(&g, "blk.1.attn_rel_b.weight")); /* one for all layers */
    ck_assert_ptr_null(gguf_find_tensor(&g, "position_embd.weight"));
    gguf_close(&g);

    /* makemore: learned positions, untied head, BOS = EOS = '.' = 0 */
    convert_and_open(&g, models, "makemore-names", NULL);
    expect_str(&g, "posenc.positional", "learned");
    expect_tensor(&g, "position_embd.weight", 2, 64, 16, TENSOR_F32);
    expect_tensor(&g, "output.weight", 2, 64, 27, TENSOR_F32);
    ck_assert_uint_eq(get_u32(&g, "tokenizer.ggml.bos_token_id"), 0);
    ck_assert_uint_eq(get_u32(&g, "tokenizer.ggml.eos_token_id"), 0);
    gguf_close(&g);
}
END_TEST

/* The same stories260K weights from the llama2.c .bin and from the HF
 * layout (q/k permuted to rotate_half order there) must convert to
 * bit-identical GGUF tensors: this checks the inverse permutation with GQA. */
START_TEST(test_convert_llama_bin_equals_hf) {
    const char *models = convert_models("convert.py on stories260K");
    if (!models) return;
    const char *tok[] = {"--tokenizer", tests_model_path(models, "stories260K/tok512.bin"), NULL};
    GgufFile a, b;
    convert_and_open(&a, models, "stories260K/stories260K.bin", tok);
    convert_and_open(&b, models, "stories260K-hf", tok);
    expect_str(&a, "general.architecture", "llama");
    expect_str(&a, "posenc.positional", "rope");
    expect_str(&a, "posenc.rope.pairing", "interleaved");
    ck_assert_uint_eq(get_u32(&a, "llama.attention.head_count"), 8);
    ck_assert_uint_eq(get_u32(&a, "llama.attention.head_count_kv"), 4);
    ck_assert_uint_eq(get_u32(&a, "llama.rope.dimension_count"), 8);
    ck_assert_uint_eq(get_u32(&a, "llama.context_length"), 512);
    expect_tensor(&a, "blk.0.attn_k.weight", 2, 64, 32, TENSOR_F32);
    expect_tensor(&a, "blk.4.ffn_down.weight", 2, 172, 64, TENSOR_F32);
    ck_assert_ptr_null(gguf_find_tensor(&a, "output.weight"));

    ck_assert_uint_eq(a.n_tensors, b.n_tensors);
    for (size_t i = 0; i < a.n_tensors; i++) {
        const GgufTensor *ta = &a.tensors[i], *tb = gguf_find_tensor(&b, ta->name);
        ck_assert_msg(tb != NULL, "%s missing from the HF conversion", ta->name);
        ck_assert(ta->n_dims == tb->n_dims && ta->type == tb->type && ta->nbytes == tb->nbytes);
        ck_assert_msg(memcmp(ta->data, tb->data, ta->nbytes) == 0, "%s differs", ta->name);
    }
    /* tokenizer: llama2.c pieces mapped back to SentencePiece form */
    PosencError err;
    const GgufArray *toks, *types;
    ck_assert_int_eq(gguf_get_arr(&a, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, &err), 0);
    ck_assert_int_eq(gguf_get_arr_int(&a, "tokenizer.ggml.token_type", &types, &err), 0);
    ck_assert_uint_eq(toks->n, 512);
    GgufString s1 = gguf_arr_str(toks, 1), s259 = gguf_arr_str(toks, 259);
    ck_assert(s1.len == 3 && memcmp(s1.ptr, "<s>", 3) == 0);
    ck_assert(s259.len == 4 && memcmp(s259.ptr, "\xe2\x96\x81t", 4) == 0);   /* "▁t" */
    ck_assert(gguf_arr_int(types, 0) == 2 && gguf_arr_int(types, 1) == 3 &&
              gguf_arr_int(types, 3) == 6 && gguf_arr_int(types, 259) == 1);
    expect_str(&a, "tokenizer.ggml.model", "llama");
    gguf_close(&a);
    gguf_close(&b);
}
END_TEST

/* --dtype bounds, relative to max(|x|, max |x| of the row / 127): a weight's
 * own magnitude, or for small weights the q8_0 step of the row's largest.
 * f16 and bf16 round to nearest, within 2^-11 and 2^-8 (measured 4.88e-4
 * and 3.89e-3 on zoo/alibi): the bounds are twice that.  q8_0 rounds x / d
 * to nearest, within half a step d = max |x| of the block / 127 (at most the
 * row's), and stores d as f16 (relative 2^-11 while d is a normal f16 number),
 * which moves q d by up to 127 * 2^-11 d: 0.5 + 127/2048 = 0.562 (measured
 * 0.49989).  A quantizer that truncates x / d errs by up to a whole step and
 * must fail that bound (the control). */
#define F16_REL_TOL (1.0f / 1024)
#define BF16_REL_TOL (1.0f / 128)
#define Q8_0_REL_TOL (0.5f + 127.0f / 2048)

/* The largest relative error (above) of y against x over a row, its index
 * in *at; NAN as soon as one is NaN, which no bound accepts. */
static float row_relative_error(const float *x, const float *y, size_t n, size_t *at) {
    float amax = 0, worst = 0;
    for (size_t j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    *at = 0;
    for (size_t j = 0; j < n; j++) {
        float scale = fmaxf(fmaxf(fabsf(x[j]), amax / 127.0f), 1e-30f);
        float excess = fabsf(x[j] - y[j]) / scale;
        if (isnan(excess)) {
            *at = j;
            return NAN;
        }
        if (excess > worst) {
            worst = excess;
            *at = j;
        }
    }
    return worst;
}

/* q8_0 with x / d truncated toward zero instead of rounded (and d kept in
 * f32), the control's quantizer; n is a multiple of 32. */
static void q8_0_truncated(const float *x, float *y, size_t n) {
    for (size_t b = 0; b < n; b += 32) {
        float amax = 0;
        for (size_t j = b; j < b + 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f;
        for (size_t j = b; j < b + 32; j++) y[j] = d > 0 ? truncf(x[j] / d) * d : 0.0f;
    }
}

/* --dtype: every 2-D weight dequantizes within rel_tol of the f32
 * conversion; 1-D tensors stay f32.  For q8_0, the control: the truncating
 * quantizer on the same weights is outside rel_tol. */
static void check_dtype(const char *models, const char *model, const char *dtype,
                        TensorType want, float rel_tol) {
    GgufFile ref, q;
    const char *const dtype_arg[] = {"--dtype", dtype, NULL};
    convert_and_open(&ref, models, model, NULL);
    convert_and_open(&q, models, model, dtype_arg);
    ck_assert_uint_eq(ref.n_tensors, q.n_tensors);
    float *x = malloc(4096 * sizeof *x), *y = malloc(4096 * sizeof *y);
    size_t bad_t = 0, bad_r = 0, bad_j = 0;
    float worst = 0, truncated = 0;
    /* Check's asserts are slow in a loop: find the worst element first. */
    for (size_t i = 0; i < ref.n_tensors && !isnan(worst); i++) {
        const GgufTensor *tr = &ref.tensors[i], *tq = gguf_find_tensor(&q, tr->name);
        ck_assert_ptr_nonnull(tq);
        ck_assert_int_eq(tq->type, tr->n_dims == 2 ? want : TENSOR_F32);
        size_t n = (size_t)tr->ne[0], j;
        ck_assert_uint_le(n, 4096);
        for (size_t r = 0; r < tr->nelem / n; r++) {
            gguf_tensor_row_f32(tr, r, x);
            gguf_tensor_row_f32(tq, r, y);
            float e = row_relative_error(x, y, n, &j);
            if (!(e <= worst)) {
                worst = e;
                bad_t = i;
                bad_r = r;
                bad_j = j;
                if (isnan(e)) break;
            }
            if (want == TENSOR_Q8_0 && tr->n_dims == 2) {
                q8_0_truncated(x, y, n);
                float t = row_relative_error(x, y, n, &j);
                truncated = isnan(t) || isnan(truncated) ? NAN : fmaxf(truncated, t);
            }
        }
    }
    printf("--dtype %s: largest relative error %.5f (bound %.5f)\n", dtype, (double)worst,
           (double)rel_tol);
    ck_assert_msg(worst <= rel_tol, "%s %s[%zu,%zu]: relative error %g > %g", dtype,
                  ref.tensors[bad_t].name, bad_r, bad_j, (double)worst, (double)rel_tol);
    if (want == TENSOR_Q8_0) {
        printf("--dtype %s control: truncating x / d errs by %.5f\n", dtype, (double)truncated);
        ck_assert_msg(truncated > rel_tol, "control: truncating x / d errs by only %g <= %g",
                      (double)truncated, (double)rel_tol);
    }
    free(x);
    free(y);
    gguf_close(&ref);
    gguf_close(&q);
}

START_TEST(test_convert_dtypes) {
    const char *models = convert_models("convert.py --dtype");
    if (!models) return;
    check_dtype(models, "zoo/alibi", "f16", TENSOR_F16, F16_REL_TOL);
    check_dtype(models, "zoo/alibi", "bf16", TENSOR_BF16, BF16_REL_TOL);
    check_dtype(models, "zoo/alibi", "q8_0", TENSOR_Q8_0, Q8_0_REL_TOL);
    GgufFile g;
    const char *const q8_0[] = {"--dtype", "q8_0", NULL};
    convert_and_open(&g, models, "zoo/alibi", q8_0);
    ck_assert_uint_eq(get_u32(&g, "general.file_type"), 7);   /* MOSTLY_Q8_0 */
    gguf_close(&g);
}
END_TEST

START_TEST(test_convert_errors) {
    if (!tests_python_available("convert.py errors")) return;
    /* a directory with an unsupported model_type */
    const char *dir = tests_temp_dir();
    char cfg[128];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    const char bert[] = "{\"model_type\": \"bert\"}\n";
    tests_write_file(cfg, bert, strlen(bert));
    const char *out = tests_write_temp("", 0, ".gguf");
    const char *unsupported[] = {dir, out, NULL};
    tests_expect_convert_error(unsupported, "bert");

    const char *missing[] = {"/nonexistent/model.bin", out, NULL};
    tests_expect_convert_error(missing, "/nonexistent/model.bin");

    const char *q4[] = {"tools/convert.py", "in", out, "--dtype", "q4_0", NULL};
    TestsRun r = tests_run_python(q4);
    ck_assert_int_eq(r.status, 2);
    tests_run_free(&r);
}
END_TEST

/* gpt-oss's MXFP4 experts (U8 _blocks and _scales, weights 2i and 2i + 1
 * in byte i) through convert.py's mxfp4_expert_sources into MXFP4 tensors
 * (tests/base/mxfp4_checkpoint.py writes a synthetic checkpoint, the GGUF
 * and the values transformers decodes from the checkpoint): the engine's
 * dequantizer gives those values bit for bit (both are exact), gate the
 * even rows of gate_up and up the odd ones.  Control: gate and up split
 * as gate_up's halves instead differ. */
START_TEST(test_convert_mxfp4_experts) {
    if (!tests_python_available("convert.py MXFP4 experts")) return;
    const char *dir = tests_temp_dir();
    const char *args[] = {"tests/base/mxfp4_checkpoint.py", dir, NULL};
    TestsRun r = tests_run_python_ok(args);
    size_t n = (size_t)tests_json_number(r.out, "floats");
    tests_run_free(&r);
    char path[256];
    size_t len;
    snprintf(path, sizeof path, "%s/expected.f32", dir);
    char *expected = tests_read_file(path, &len);
    ck_assert_uint_eq(len, n * sizeof(float));
    snprintf(path, sizeof path, "%s/control.f32", dir);
    char *control = tests_read_file(path, &len);
    snprintf(path, sizeof path, "%s/experts.gguf", dir);
    GgufFile g;
    PosencError err;
    ck_assert_msg(gguf_open(&g, path, &err) == 0, "%s", err.msg);
    static const struct { const char *name; int64_t ne0, ne1; } want[] = {
        {"blk.0.ffn_gate_exps.weight", 96, 64}, {"blk.0.ffn_up_exps.weight", 96, 64},
        {"blk.0.ffn_down_exps.weight", 64, 96}};
    float *got = malloc(n * sizeof(float));
    size_t at = 0;
    for (size_t i = 0; i < 3; i++) {
        const GgufTensor *t = gguf_find_tensor(&g, want[i].name);
        ck_assert_msg(t, "%s missing", want[i].name);
        ck_assert_int_eq(t->type, TENSOR_MXFP4);
        ck_assert_int_eq(t->n_dims, 3);
        ck_assert_int_eq(t->ne[0], want[i].ne0);
        ck_assert_int_eq(t->ne[1], want[i].ne1);
        ck_assert_int_eq(t->ne[2], 3);
        ck_assert_uint_le(at + t->nelem, n);
        tensor_dequantize(t->type, t->data, got + at, t->nelem);
        at += t->nelem;
    }
    ck_assert_uint_eq(at, n);
    ck_assert_msg(memcmp(got, expected, n * sizeof(float)) == 0, "the MXFP4 tensors differ from the checkpoint's values");
    ck_assert_msg(memcmp(got, control, n * sizeof(float)) != 0, "control: gate and up as halves agree too");
    gguf_close(&g);
    free(got);
    free(expected);
    free(control);
}
END_TEST

/* A whole gpt-oss checkpoint in the MXFP4 release's form (hf_tiny's
 * gpt_oss with its experts as _blocks and _scales; tests/base/
 * gpt_oss_mxfp4.py) converts to MXFP4 expert tensors that dequantize, bit
 * for bit, to the float experts the checkpoint means, as its float twin
 * converts them; every other tensor is the twin's.  Control: one layer's
 * gate against the twin's up differs. */
START_TEST(test_convert_gpt_oss_mxfp4_release) {
    if (!tests_python_available("convert.py gpt-oss's MXFP4 release")) return;
    const char *dir = tests_temp_dir();
    TestsRun r = tests_run_python_ok((const char *[]){"tests/base/gpt_oss_mxfp4.py", dir, NULL});
    tests_run_free(&r);
    char path[256];
    GgufFile mx, fl;
    PosencError err;
    snprintf(path, sizeof path, "%s/mxfp4.gguf", dir);
    ck_assert_msg(gguf_open(&mx, path, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/float.gguf", dir);
    ck_assert_msg(gguf_open(&fl, path, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(mx.n_tensors, fl.n_tensors);
    int n_mxfp4 = 0;
    for (size_t i = 0; i < mx.n_tensors; i++) {
        const GgufTensor *a = &mx.tensors[i], *b = gguf_find_tensor(&fl, a->name);
        ck_assert_msg(b && a->nelem == b->nelem, "%s", a->name);
        float *x = malloc(a->nelem * sizeof(float)), *y = malloc(b->nelem * sizeof(float));
        tensor_dequantize(a->type, a->data, x, a->nelem);
        tensor_dequantize(b->type, b->data, y, b->nelem);
        ck_assert_msg(memcmp(x, y, a->nelem * sizeof(float)) == 0, "%s differs", a->name);
        n_mxfp4 += a->type == TENSOR_MXFP4;
        free(x);
        free(y);
    }
    ck_assert_int_eq(n_mxfp4, 6); /* gate, up and down of both layers */
    const GgufTensor *gate = gguf_find_tensor(&mx, "blk.0.ffn_gate_exps.weight"),
                     *up = gguf_find_tensor(&fl, "blk.0.ffn_up_exps.weight");
    float *x = malloc(gate->nelem * sizeof(float)), *y = malloc(up->nelem * sizeof(float));
    tensor_dequantize(gate->type, gate->data, x, gate->nelem);
    tensor_dequantize(up->type, up->data, y, up->nelem);
    ck_assert_msg(memcmp(x, y, gate->nelem * sizeof(float)) != 0, "control: gate equals up");
    free(x);
    free(y);
    gguf_close(&mx);
    gguf_close(&fl);
}
END_TEST

/* Byte-identical tensors (names, types, shapes, data) in two files. */
static int same_tensors(const GgufFile *a, const GgufFile *b) {
    if (a->n_tensors != b->n_tensors) return 0;
    for (size_t i = 0; i < a->n_tensors; i++) {
        const GgufTensor *ta = &a->tensors[i], *tb = gguf_find_tensor(b, ta->name);
        if (!tb || ta->type != tb->type || ta->nelem != tb->nelem || ta->nbytes != tb->nbytes ||
            memcmp(ta->data, tb->data, ta->nbytes) != 0)
            return 0;
    }
    return 1;
}

/* A GGUF input is retyped: f32 GGUF -> q8_0 equals converting the checkpoint
 * to q8_0 directly, tensor for tensor and byte for byte, and every key comes
 * along; the output's directory is created.  tools/quantize.py's q8_0 (NumPy)
 * gives the same bytes, and its general.file_type names the type it wrote
 * as llama.cpp numbers them (include/llama.h: LLAMA_FTYPE_MOSTLY_Q8_0 7,
 * _Q4_K_M 15, _MXFP4_MOE 38), not the f32 input's 0 (ALL_F32), which
 * llama-bench would print. */
START_TEST(test_convert_gguf_input) {
    const char *models = convert_models("convert.py GGUF -> GGUF");
    if (!models) return;
    const char *zoo = tests_model_path(models, "zoo/alibi");
    const char *dir = tests_temp_dir();
    char f32[256], q8[256];
    snprintf(f32, sizeof f32, "%s/new/sub/f32.gguf", dir); /* directories that do not exist */
    snprintf(q8, sizeof q8, "%s/q8.gguf", dir);
    const char *to_f32[] = {"tools/convert.py", zoo, f32, NULL};
    TestsRun r = tests_run_python_ok(to_f32);
    tests_run_free(&r);
    const char *retype[] = {"tools/convert.py", f32, q8, "--dtype", "q8_0", NULL};
    r = tests_run_python_ok(retype);
    tests_run_free(&r);

    GgufFile src, retyped, direct, f16;
    PosencError err;
    ck_assert_msg(gguf_open(&src, f32, &err) == 0, "%s", err.msg);
    ck_assert_msg(gguf_open(&retyped, q8, &err) == 0, "%s", err.msg);
    const char *const q8_0[] = {"--dtype", "q8_0", NULL};
    const char *const to_f16[] = {"--dtype", "f16", NULL};
    convert_and_open(&direct, models, "zoo/alibi", q8_0);
    convert_and_open(&f16, models, "zoo/alibi", to_f16);
    ck_assert(same_tensors(&retyped, &direct));
    ck_assert(!same_tensors(&retyped, &f16)); /* control: another type is told apart */
    if (tests_python_available("quantize.py q8_0")) { /* NumPy's q8_0: the same bytes */
        static const struct { const char *type; uint32_t file_type; } Q[] = {
            {"q8_0", 7}, {"q4_k_m", 15}, {"mxfp4_moe", 38}};
        ck_assert_uint_eq(get_u32(&src, "general.file_type"), 0); /* what a copy would keep */
        for (size_t i = 0; i < sizeof Q / sizeof Q[0]; i++) {
            char out[256];
            snprintf(out, sizeof out, "%s/%s.gguf", dir, Q[i].type);
            const char *quantize[] = {"tools/quantize.py", f32, out, Q[i].type, NULL};
            r = tests_run_python_ok(quantize);
            tests_run_free(&r);
            GgufFile numpy_q;
            ck_assert_msg(gguf_open(&numpy_q, out, &err) == 0, "%s", err.msg);
            if (i == 0) ck_assert(same_tensors(&numpy_q, &direct));
            ck_assert_msg(get_u32(&numpy_q, "general.file_type") == Q[i].file_type,
                          "quantize.py %s: general.file_type %u", Q[i].type,
                          get_u32(&numpy_q, "general.file_type"));
            gguf_close(&numpy_q);
        }
    }
    ck_assert_uint_eq(get_u32(&retyped, "general.file_type"), 7);
    ck_assert_uint_eq(retyped.n_kv, src.n_kv);
    for (size_t i = 0; i < src.n_kv; i++)
        ck_assert_msg(gguf_find_kv(&retyped, src.kv[i].key), "key %s lost",
                      src.kv[i].key);
    gguf_close(&src);
    gguf_close(&retyped);
    gguf_close(&direct);
    gguf_close(&f16);

    /* an input that is none of the accepted kinds names it and says what
     * INPUT may be (one needle each) */
    const char *text[] = {"README.md", q8, NULL};
    tests_expect_convert_error(text, "README.md: not a llama2.c checkpoint");
    tests_expect_convert_error(text, "GGUF");
}
END_TEST

static Suite *gguf_suite(void) {
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("reader");
    tcase_add_test(tc, test_reads_every_kv_type);
    tcase_add_test(tc, test_getters_refuse_mismatches);
    tcase_add_test(tc, test_tensors_read_back);
    tcase_add_test(tc, test_custom_alignment_and_v2);
    tcase_add_test(tc, test_no_tensors);
    suite_add_tcase(s, tc);

    tc = tcase_create("malformed");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_truncation_fails);
    tcase_add_test(tc, test_byte_corruption_never_crashes);
    tcase_add_test(tc, test_bad_header);
    tcase_add_test(tc, test_lying_counts);
    tcase_add_test(tc, test_lying_lengths);
    tcase_add_test(tc, test_bad_value_types);
    tcase_add_test(tc, test_bad_tensor_infos);
    tcase_add_test(tc, test_bad_structure);
    tcase_add_test(tc, test_bad_alignment);
    suite_add_tcase(s, tc);

    tc = tcase_create("convert");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_convert_zoo_rope);
    tcase_add_test(tc, test_convert_zoo_schemes);
    tcase_add_test(tc, test_convert_llama_bin_equals_hf);
    tcase_add_test(tc, test_convert_dtypes);
    tcase_add_test(tc, test_convert_errors);
    tcase_add_test(tc, test_convert_mxfp4_experts);
    tcase_add_test(tc, test_convert_gpt_oss_mxfp4_release);
    tcase_add_test(tc, test_convert_gguf_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tests_run_suite(gguf_suite()); }
