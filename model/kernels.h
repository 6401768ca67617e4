/* Numeric kernels of the forward pass.  Activations are row-major
 * (n_tokens, width) matrices; n = 1 is decoding, n > 1 is prefill. */
#ifndef POSENC_KERNELS_H
#define POSENC_KERNELS_H
#include "model/tensor.h"

/* Below this many multiply-adds a parallel region costs more than it saves
 * (a fork/join takes microseconds; on a busy machine a descheduled thread
 * can hold a barrier for a whole time slice). */
#define PARALLEL_MIN_MACS (1 << 15)

/* out (n, w->rows) = x (n, w->cols) . w^T, parallel over output rows. */
void matmul(float *out, const float *x, const Tensor *w, int n);
/* y (n, width) += b (width) broadcast over rows; no-op when b is NULL. */
void add_bias(float *y, const float *b, int n, int width);

void rmsnorm(float *out, const float *x, const float *w, int dim, float eps);
void layernorm(float *out, const float *x, const float *w, const float *b, int dim, float eps);
void softmax(float *x, int n);
/* h (n) = silu(h) * g: SwiGLU's gate. */
void swiglu(float *h, const float *g, int n);
/* GELU, tanh approximation (GPT-2's "gelu_new"). */
void gelu(float *h, int n);
#endif
