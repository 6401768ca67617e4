/* Tensor types and 2-D weight matrices, shared by the engine and the GGUF
 * reader.  The type values are ggml's, so GGUF tensor types map over
 * unchanged; the ones below are those this engine knows (the block
 * layouts of the quantized ones are in quant.h).
 * A Tensor is viewed in place (usually inside the mmap'd file): rows are
 * output features, columns input features, row-major. */
#ifndef POSENC_TENSOR_H
#define POSENC_TENSOR_H
#include <stddef.h>
#include <stdint.h>

#include "base/quant.h"

typedef enum {
    TENSOR_F32 = 0,
    TENSOR_F16 = 1,
    TENSOR_Q4_0 = 2,
    TENSOR_Q4_1 = 3,
    TENSOR_Q5_0 = 6,
    TENSOR_Q5_1 = 7,
    TENSOR_Q8_0 = 8,   /* blocks of 32: f16 scale d, 32 x int8 q; x = d*q (34 bytes) */
    TENSOR_Q2_K = 10,
    TENSOR_Q3_K = 11,
    TENSOR_Q4_K = 12,
    TENSOR_Q5_K = 13,
    TENSOR_Q6_K = 14,
    TENSOR_BF16 = 30,
    TENSOR_MXFP4 = 39, /* blocks of 32: E8M0 scale, 32 x E2M1 (quant.h) */
} TensorType;
/* One past the largest id above: the size of tables indexed by type. */
#define TENSOR_TYPE_COUNT 40

typedef struct {
    TensorType type;
    const void *data;
    int rows, cols;
    const void *packed; /* a copy laid out for decode (model/kernels.h), or NULL */
} Tensor;

/* Any ggml type id: "f32", "q4_0", ..., or "unknown", so that a refused
 * file can say which type it uses. */
const char *tensor_type_name(uint32_t type);
int tensor_type_supported(uint32_t type);   /* the types above */

/* The sizes of a type's data, for the loaders, the KV cache and the
 * kernels alike; inline, so that a kernel instantiated for one type folds
 * them to constants. */
static inline size_t tensor_block_size(TensorType t) { /* elements per block */
    switch (t) {
    case TENSOR_F32: case TENSOR_F16: case TENSOR_BF16: return 1;
    case TENSOR_Q4_0: case TENSOR_Q4_1: case TENSOR_Q5_0: case TENSOR_Q5_1: case TENSOR_Q8_0:
    case TENSOR_MXFP4:
        return QK;
    case TENSOR_Q2_K: case TENSOR_Q3_K: case TENSOR_Q4_K: case TENSOR_Q5_K: case TENSOR_Q6_K:
        return QK_K;
    }
    return 1;
}
static inline size_t tensor_block_bytes(TensorType t) { /* bytes per block */
    switch (t) {
    case TENSOR_F32:  return 4;
    case TENSOR_F16:
    case TENSOR_BF16: return 2;
    case TENSOR_Q4_0: return sizeof(BlockQ4_0);
    case TENSOR_Q4_1: return sizeof(BlockQ4_1);
    case TENSOR_Q5_0: return sizeof(BlockQ5_0);
    case TENSOR_Q5_1: return sizeof(BlockQ5_1);
    case TENSOR_Q8_0: return 2 + QK;
    case TENSOR_Q2_K: return sizeof(BlockQ2_K);
    case TENSOR_Q3_K: return sizeof(BlockQ3_K);
    case TENSOR_Q4_K: return sizeof(BlockQ4_K);
    case TENSOR_Q5_K: return sizeof(BlockQ5_K);
    case TENSOR_Q6_K: return sizeof(BlockQ6_K);
    case TENSOR_MXFP4: return sizeof(BlockMXFP4);
    }
    return 0;
}
/* Bytes of one row of `cols` elements (of an unblocked type, of any
 * `cols` elements: tensor_row_bytes(t, 1) is its element size); 0 when
 * cols does not fit the type's blocks. */
static inline size_t tensor_row_bytes(TensorType t, size_t cols) {
    size_t bs = tensor_block_size(t);
    return cols % bs ? 0 : cols / bs * tensor_block_bytes(t);
}

/* Converts n elements (a multiple of the block size) of `type` at src, which
 * may be unaligned, to f32. */
void tensor_dequantize(TensorType type, const void *src, float *dst, size_t n);

const void *tensor_row(const Tensor *t, int row);
/* Rows [first, first + n) of t as a tensor of their own (fused qkv). */
Tensor tensor_rows(const Tensor *t, int first, int n);
/* Expands one row to f32 (embedding lookups, tables). */
void tensor_row_to_f32(const Tensor *t, int row, float *out);
#endif
