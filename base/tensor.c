#include "base/tensor.h"

#include <string.h>

#include "base/util.h"

const char *tensor_type_name(uint32_t type) {
    static const char *const names[] = {
        [0] = "f32", [1] = "f16", [2] = "q4_0", [3] = "q4_1", [6] = "q5_0", [7] = "q5_1",
        [8] = "q8_0", [9] = "q8_1", [10] = "q2_k", [11] = "q3_k", [12] = "q4_k",
        [13] = "q5_k", [14] = "q6_k", [15] = "q8_k", [16] = "iq2_xxs", [17] = "iq2_xs",
        [18] = "iq3_xxs", [19] = "iq1_s", [20] = "iq4_nl", [21] = "iq3_s", [22] = "iq2_s",
        [23] = "iq4_xs", [24] = "i8", [25] = "i16", [26] = "i32", [27] = "i64",
        [28] = "f64", [29] = "iq1_m", [30] = "bf16", [34] = "tq1_0", [35] = "tq2_0", [39] = "mxfp4",
    };
    if (type < sizeof names / sizeof names[0] && names[type]) return names[type];
    return "unknown";
}

int tensor_type_supported(uint32_t type) {
    switch (type) {
    case TENSOR_F32: case TENSOR_F16: case TENSOR_BF16: case TENSOR_Q8_0:
    case TENSOR_Q4_0: case TENSOR_Q4_1: case TENSOR_Q5_0: case TENSOR_Q5_1:
    case TENSOR_Q2_K: case TENSOR_Q3_K: case TENSOR_Q4_K: case TENSOR_Q5_K: case TENSOR_Q6_K:
    case TENSOR_MXFP4:
        return 1;
    }
    return 0;
}

void tensor_dequantize(TensorType type, const void *src, float *dst, size_t n) {
    const uint8_t *p = src;
    switch (type) {
    case TENSOR_F32:
        memcpy(dst, p, n * sizeof(float));
        return;
    case TENSOR_F16:
    case TENSOR_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = type == TENSOR_F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
        }
        return;
    case TENSOR_Q8_0:
        /* Blocks are 34 bytes, so the f16 scale is unaligned: memcpy it. */
        for (size_t b = 0; b < n / QK; b++, p += 2 + QK) {
            uint16_t h;
            memcpy(&h, p, 2);
            float d = fp16_to_fp32(h);
            const int8_t *q = (const int8_t *)(p + 2);
            for (int j = 0; j < QK; j++) dst[b * QK + (size_t)j] = d * q[j];
        }
        return;
    case TENSOR_Q4_0: dequantize_row_q4_0(src, dst, n); return;
    case TENSOR_Q4_1: dequantize_row_q4_1(src, dst, n); return;
    case TENSOR_Q5_0: dequantize_row_q5_0(src, dst, n); return;
    case TENSOR_Q5_1: dequantize_row_q5_1(src, dst, n); return;
    case TENSOR_Q2_K: dequantize_row_q2_k(src, dst, n); return;
    case TENSOR_Q3_K: dequantize_row_q3_k(src, dst, n); return;
    case TENSOR_Q4_K: dequantize_row_q4_k(src, dst, n); return;
    case TENSOR_Q5_K: dequantize_row_q5_k(src, dst, n); return;
    case TENSOR_Q6_K: dequantize_row_q6_k(src, dst, n); return;
    case TENSOR_MXFP4: dequantize_row_mxfp4(src, dst, n); return;
    }
}

const void *tensor_row(const Tensor *t, int row) {
    return (const uint8_t *)t->data + (size_t)row * tensor_row_bytes(t->type, (size_t)t->cols);
}

Tensor tensor_rows(const Tensor *t, int first, int n) {
    Tensor r = {t->type, tensor_row(t, first), n, t->cols, NULL}; /* a packed copy is per matrix */
    return r;
}

void tensor_row_to_f32(const Tensor *t, int row, float *out) {
    tensor_dequantize(t->type, tensor_row(t, row), out, (size_t)t->cols);
}
