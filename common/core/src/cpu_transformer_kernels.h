// cpu_transformer_kernels.h — the host loops of a transformer's ops (chapter
// 14), which CpuKernels (cpu_kernels.cpp) forwards to. Private to the core:
// the contracts are kernels.h's, under the same names; these are its host bodies.
#pragma once

#include <cstdint>

namespace dpt::cpu {

/// kernels.h's embedding: out (n, cols), row i = table row tokens[i].
void embedding(float* out, const float* table, const int64_t* tokens, int64_t n, int64_t cols);
/// kernels.h's embedding_backward: dtable's row tokens[i] += dout's row i, in the order of i.
void embedding_backward(float* dtable, const float* dout, const int64_t* tokens, int64_t n, int64_t cols);
/// kernels.h's layer_norm over rows of x (rows, cols); mean and rstd (rows) written.
void layer_norm(float* out, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                int64_t rows, int64_t cols, float eps);
/// kernels.h's layer_norm_backward: dx written; dweight, dbias written unless null.
void layer_norm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                         const float* mean, const float* rstd, const float* weight, int64_t rows, int64_t cols);
/// kernels.h's gelu, n elements (tanh vectorised by Eigen, a block at a time).
void gelu(float* out, const float* x, int64_t n);
/// kernels.h's gelu_backward, n elements.
void gelu_backward(float* dx, const float* x, const float* dout, int64_t n);
/// kernels.h's softmax by rows, with the causal period (0: no mask).
void softmax(float* out, const float* x, int64_t rows, int64_t cols, int64_t causal_period);
/// kernels.h's softmax_backward: dx = y ⊙ (dy − Σ_row y ⊙ dy).
void softmax_backward(float* dx, const float* y, const float* dy, int64_t rows, int64_t cols);
/// kernels.h's swap_axes_12: out (a, c, b, d) from x (a, b, c, d).
void swap_axes_12(float* out, const float* x, int64_t a, int64_t b, int64_t c, int64_t d);
/// kernels.h's copy_columns: a strided copy of `cols` floats per row.
void copy_columns(float* out, int64_t out_stride, const float* x, int64_t x_stride, int64_t rows, int64_t cols);

}  // namespace dpt::cpu
