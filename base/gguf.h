/* GGUF reader (format v3, also v2; little-endian only).
 *
 * gguf_open() maps the file read-only and validates all of it before
 * returning: header, every metadata value, every tensor descriptor, and
 * that every tensor's bytes lie aligned, inside the file and disjoint from
 * the others.  After a successful open nothing read through this API can
 * point outside the mapping, so the loaders need no bounds checks of their
 * own.  Every failure is one line "FILE: problem" in the PosencError.
 *
 * File layout (all little-endian):
 *   "GGUF" u32 version  u64 n_tensors  u64 n_kv
 *   n_kv      x { string key, u32 value_type, value }
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
 *   padding to `alignment`, then the tensor data blob (offsets are relative to it)
 * where string = u64 length + bytes (no NUL), and an array value is
 * u32 element_type, u64 count, elements. */
#ifndef POSENC_GGUF_H
#define POSENC_GGUF_H
#include <stddef.h>
#include <stdint.h>

#include "base/tensor.h"
#include "base/util.h"

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_KEY_LEN 65535   /* spec: keys are at most 2^16-1 bytes */
#define GGUF_MAX_NAME_LEN 64     /* spec: tensor names are at most 64 bytes */

/* Metadata value types, as stored in the file. */
typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} GgufType;

/* A byte string inside the mapping: not NUL-terminated. */
typedef struct {
    const char *ptr;
    size_t len;
} GgufString;

typedef struct {
    GgufType type;           /* element type (never GGUF_TYPE_ARRAY) */
    size_t n;                /* element count */
    const uint8_t *data;     /* n packed little-endian elements in the mapping,
                                possibly unaligned: read with gguf_arr_*();
                                NULL for string arrays */
    const GgufString *strs;  /* (n,) for string arrays, else NULL */
} GgufArray;

typedef struct {
    const char *key;         /* NUL-terminated copy */
    GgufType type;
    union {
        uint64_t u64;        /* UINT8, UINT16, UINT32, UINT64 */
        int64_t i64;         /* INT8, INT16, INT32, INT64 */
        double f64;          /* FLOAT32 (exactly), FLOAT64 */
        int b;               /* BOOL: 0 or 1 */
        GgufString str;      /* STRING: NUL-terminated copy (ptr[len] == 0) */
        GgufArray arr;       /* ARRAY */
    } v;
} GgufKV;

typedef struct {
    const char *name;        /* NUL-terminated copy */
    int n_dims;              /* 1..4 */
    int64_t ne[GGUF_MAX_DIMS]; /* elements per dim, ggml order: ne[0] is the
                                  contiguous row length; dims >= n_dims are 1.
                                  A PyTorch (rows, cols) matrix is ne = {cols, rows}. */
    TensorType type;         /* one of the supported types (tensor.h) */
    uint64_t offset;         /* from the start of the data blob */
    const void *data;        /* into the mapping; aligned to the file's alignment */
    size_t nelem;            /* ne[0]*ne[1]*ne[2]*ne[3] */
    size_t nbytes;
} GgufTensor;

typedef struct {
    char *path;              /* copy, used in every error message */
    MappedFile map;
    uint32_t version;        /* 2 or 3 */
    size_t alignment;        /* general.alignment or 32 */
    size_t data_offset;      /* file offset of the tensor data blob */
    size_t n_kv;
    GgufKV *kv;              /* (n_kv,) in file order */
    size_t n_tensors;
    GgufTensor *tensors;     /* (n_tensors,) in file order */
    /* private: indices sorted by key / name for binary search */
    size_t *kv_sorted;       /* (n_kv,) */
    size_t *tensor_sorted;   /* (n_tensors,) */
} GgufFile;

/* Maps and validates `path`.  0 on success; -1 with a one-line error naming
 * the file, in which case *g holds nothing to close (gguf_close is harmless). */
int gguf_open(GgufFile *g, const char *path, PosencError *err);
void gguf_close(GgufFile *g);

/* 1 if the file starts with GGUF's magic, 0 if not (short files included);
 * -1 with a one-line error if it cannot be opened. */
int gguf_file_has_magic(const char *path, PosencError *err);

/* ---- metadata ------------------------------------------------------------ */
const GgufKV *gguf_find_kv(const GgufFile *g, const char *key);   /* NULL if absent */

/* Typed getters: 0 on success; -1 with "FILE: ..." when the key is missing,
 * has another type, or its value does not fit.  Optional keys: test with
 * gguf_find_kv() first.  Integer getters accept any integer type whose value
 * fits (as llama.cpp does); gguf_get_f32 accepts FLOAT32 and FLOAT64. */
int gguf_get_u32(const GgufFile *g, const char *key, uint32_t *out, PosencError *err);
int gguf_get_u64(const GgufFile *g, const char *key, uint64_t *out, PosencError *err);
int gguf_get_i64(const GgufFile *g, const char *key, int64_t *out, PosencError *err);
int gguf_get_f32(const GgufFile *g, const char *key, float *out, PosencError *err);
int gguf_get_bool(const GgufFile *g, const char *key, int *out, PosencError *err);
/* NUL-terminated; refused if the value contains a NUL byte. */
int gguf_get_str(const GgufFile *g, const char *key, const char **out, PosencError *err);
/* An array whose elements have type `elem` exactly. */
int gguf_get_arr(const GgufFile *g, const char *key, GgufType elem, const GgufArray **out,
                 PosencError *err);
/* An array of any integer element type (e.g. token types), read with gguf_arr_int. */
int gguf_get_arr_int(const GgufFile *g, const char *key, const GgufArray **out,
                     PosencError *err);

/* Element i < arr->n.  gguf_arr_int: integer and BOOL arrays (UINT64 values
 * above INT64_MAX wrap); gguf_arr_f32: FLOAT32 and FLOAT64 arrays;
 * gguf_arr_str: STRING arrays.  The wrong array type is a caller bug and
 * returns 0 / an empty string. */
int64_t gguf_arr_int(const GgufArray *arr, size_t i);
float gguf_arr_f32(const GgufArray *arr, size_t i);
GgufString gguf_arr_str(const GgufArray *arr, size_t i);

const char *gguf_type_name(uint32_t type);   /* "uint32", ..., or "unknown" */

/* ---- tensors ------------------------------------------------------------- */
const GgufTensor *gguf_find_tensor(const GgufFile *g, const char *name);   /* NULL if absent */

/* The tensor `name` with exactly n_dims dimensions of sizes ne[0..n_dims-1]
 * (ggml order); NULL with "FILE: tensor 'name' ..." when missing or shaped
 * otherwise.  Callers check t->type themselves. */
const GgufTensor *gguf_get_tensor(const GgufFile *g, const char *name, int n_dims,
                                  const int64_t *ne, PosencError *err);

/* Row `row` (ne[0] elements) of t as float, e.g. an embedding lookup.
 * -1 if row >= nelem / ne[0]. */
int gguf_tensor_row_f32(const GgufTensor *t, size_t row, float *out);

#endif
