/* What the paths share for the block-quantized types: activations as Q8_K
 * super-blocks, and the conversions prefill's panels use (base's reference
 * dequantizers, exact).  The dot products are each path's
 * (model/kernels_quant.h). */
#include <math.h>
#include <string.h>

#include "model/kernels_impl.h"

void quantize_q8k(int8_t *q, float *d, int16_t *sum, const float *x, int k) {
    for (int b = 0; b < k / QK_K; b++, x += QK_K, q += QK_K) {
        float m = 0.0f;
        for (int i = 0; i < QK_K; i++) m = fmaxf(m, fabsf(x[i]));
        d[b] = m / 127.0f;
        float id = m > 0.0f ? 127.0f / m : 0.0f;
        for (int i = 0; i < QK_K; i++) q[i] = (int8_t)lrintf(x[i] * id);
        for (int s = 0; s < QK_K / 16; s++) {
            int acc = 0;
            for (int i = 0; i < 16; i++) acc += q[16 * s + i];
            sum[b * (QK_K / 16) + s] = (int16_t)acc;
        }
    }
}

/* ---- conversions for prefill's panels: base's reference dequantizers ---------------- */

#define TO_F32(type) \
    void quant_##type##_to_f32(float *dst, const void *src, size_t n) { dequantize_row_##type(src, dst, n); }
TO_F32(q4_0)
TO_F32(q4_1)
TO_F32(q5_0)
TO_F32(q5_1)
TO_F32(q2_k)
TO_F32(q3_k)
TO_F32(q4_k)
TO_F32(q5_k)
TO_F32(q6_k)
