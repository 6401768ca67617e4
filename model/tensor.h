/* A 2-D weight matrix viewed in place (usually inside the mmap'd file).
 * Rows are output features, columns are input features, row-major; the type
 * values equal ggml's so GGUF tensor types map over unchanged. */
#ifndef POSENC_TENSOR_H
#define POSENC_TENSOR_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
    TENSOR_F32 = 0,
    TENSOR_F16 = 1,
    TENSOR_Q8_0 = 8,
    TENSOR_BF16 = 30,
} TensorType;

#define Q8_0_BLOCK 32 /* int8 weights per f16 scale */

typedef struct {
    TensorType type;
    const void *data;
    int rows, cols;
} Tensor;

const char *tensor_type_name(TensorType t);
/* Bytes of one row of `cols` elements; 0 when cols does not fit the type. */
size_t tensor_row_bytes(TensorType t, size_t cols);
const void *tensor_row(const Tensor *t, int row);
/* Expands one row to f32 (embedding lookups, tables). */
void tensor_row_to_f32(const Tensor *t, int row, float *out);
#endif
