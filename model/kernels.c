#include "model/kernels.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "model/util.h"

/* Sequential float sums: the same rounding as llama2.c's matmul, which is
 * what keeps greedy text byte-identical to it. */
static float dot_f32(const float *w, const float *x, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += w[i] * x[i];
    return s;
}

static float dot_f16(const uint16_t *w, const float *x, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += fp16_to_fp32(w[i]) * x[i];
    return s;
}

static float dot_bf16(const uint16_t *w, const float *x, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += bf16_to_fp32(w[i]) * x[i];
    return s;
}

static float dot_q8_0(const uint8_t *w, const float *x, int n) {
    float s = 0.0f;
    for (int blk = 0; blk < n / Q8_0_BLOCK; blk++, w += 2 + Q8_0_BLOCK, x += Q8_0_BLOCK) {
        uint16_t d16;
        memcpy(&d16, w, 2);
        float part = 0.0f;
        for (int i = 0; i < Q8_0_BLOCK; i++) part += (float)(int8_t)w[2 + i] * x[i];
        s += fp16_to_fp32(d16) * part;
    }
    return s;
}

static float dot_row(const Tensor *w, int row, const float *x) {
    const void *r = tensor_row(w, row);
    switch (w->type) {
    case TENSOR_F16:  return dot_f16(r, x, w->cols);
    case TENSOR_BF16: return dot_bf16(r, x, w->cols);
    case TENSOR_Q8_0: return dot_q8_0(r, x, w->cols);
    default:          return dot_f32(r, x, w->cols);
    }
}

void matmul(float *out, const float *x, const Tensor *w, int n) {
    int rows = w->rows, cols = w->cols;
    /* Row-outer: each weight row is read from memory once and reused for
     * all n tokens while it sits in L1. */
    #pragma omp parallel for schedule(static) if ((size_t)rows * cols * n >= PARALLEL_MIN_MACS)
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < n; t++)
            out[(size_t)t * rows + r] = dot_row(w, r, x + (size_t)t * cols);
}

void add_bias(float *y, const float *b, int n, int width) {
    if (!b) return;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < width; i++) y[(size_t)t * width + i] += b[i];
}

void rmsnorm(float *out, const float *x, const float *w, int dim, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < dim; i++) ss += x[i] * x[i];
    ss /= (float)dim;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int i = 0; i < dim; i++) out[i] = w[i] * (ss * x[i]);
}

void layernorm(float *out, const float *x, const float *w, const float *b, int dim, float eps) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < dim; i++) mean += x[i];
    mean /= dim;
    for (int i = 0; i < dim; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= dim;
    float inv = (float)(1.0 / sqrt(var + eps));
    for (int i = 0; i < dim; i++) out[i] = ((float)(x[i] - mean) * inv) * w[i] + b[i];
}

void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

void swiglu(float *h, const float *g, int n) {
    for (int i = 0; i < n; i++) {
        float v = h[i];
        v *= 1.0f / (1.0f + expf(-v));
        h[i] = v * g[i];
    }
}

void gelu(float *h, int n) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int i = 0; i < n; i++) {
        float v = h[i];
        h[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
    }
}
