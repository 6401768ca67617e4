#include "model/tensor.h"

#include <string.h>

#include "model/util.h"

const char *tensor_type_name(TensorType t) {
    switch (t) {
    case TENSOR_F32:  return "f32";
    case TENSOR_F16:  return "f16";
    case TENSOR_BF16: return "bf16";
    case TENSOR_Q8_0: return "q8_0";
    }
    return "?";
}

size_t tensor_row_bytes(TensorType t, size_t cols) {
    switch (t) {
    case TENSOR_F32:  return cols * 4;
    case TENSOR_F16:
    case TENSOR_BF16: return cols * 2;
    case TENSOR_Q8_0: return cols % Q8_0_BLOCK ? 0 : cols / Q8_0_BLOCK * (2 + Q8_0_BLOCK);
    }
    return 0;
}

const void *tensor_row(const Tensor *t, int row) {
    return (const uint8_t *)t->data + (size_t)row * tensor_row_bytes(t->type, (size_t)t->cols);
}

void tensor_row_to_f32(const Tensor *t, int row, float *out) {
    const void *src = tensor_row(t, row);
    int n = t->cols;
    switch (t->type) {
    case TENSOR_F32:
        memcpy(out, src, (size_t)n * sizeof(float));
        return;
    case TENSOR_F16:
        for (int i = 0; i < n; i++) out[i] = fp16_to_fp32(((const uint16_t *)src)[i]);
        return;
    case TENSOR_BF16:
        for (int i = 0; i < n; i++) out[i] = bf16_to_fp32(((const uint16_t *)src)[i]);
        return;
    case TENSOR_Q8_0: {
        const uint8_t *b = src;
        for (int blk = 0; blk < n / Q8_0_BLOCK; blk++, b += 2 + Q8_0_BLOCK) {
            uint16_t d16;
            memcpy(&d16, b, 2);
            float d = fp16_to_fp32(d16);
            for (int i = 0; i < Q8_0_BLOCK; i++)
                out[blk * Q8_0_BLOCK + i] = d * (float)(int8_t)b[2 + i];
        }
        return;
    }
    }
}
