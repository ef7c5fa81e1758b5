// cpu_batch_norm_kernels.h — the host loops of batch normalization, which
// CpuKernels (cpu_kernels.cpp) forwards to. Private to the core: the
// contracts are kernels.h's, under the same names; these are its host bodies.
#pragma once

#include <cstdint>

namespace dpt::cpu {

/// kernels.h's batch_moments: per column mean and biased variance, in double.
void batch_moments(float* mean, float* var, const float* x, int64_t rows, int64_t cols);
/// kernels.h's batch_norm: inv_std (cols), xhat and y (rows, cols).
void batch_norm(float* y, float* xhat, float* inv_std, const float* x, const float* mean, const float* var,
                const float* weight, const float* bias, int64_t rows, int64_t cols, float eps);
/// kernels.h's batch_norm_running: the running mean and unbiased variance's update.
void batch_norm_running(float* running_mean, float* running_var, const float* mean, const float* var, float momentum,
                        float unbias, int64_t cols);
/// kernels.h's batch_norm_gradient_sums: Σ dy and Σ dy ⊙ xhat per column, in double.
void batch_norm_gradient_sums(float* sum_dy, float* sum_dy_xhat, const float* dy, const float* xhat, int64_t rows,
                              int64_t cols);
/// kernels.h's batch_norm_backward: dx (rows, cols).
void batch_norm_backward(float* dx, const float* dy, const float* xhat, const float* inv_std, const float* weight,
                         const float* sum_dy, const float* sum_dy_xhat, int64_t count, int64_t rows, int64_t cols);
/// kernels.h's batch_norm_inference: y (rows, cols) from the running statistics.
void batch_norm_inference(float* y, const float* x, const float* mean, const float* var, const float* weight,
                          const float* bias, int64_t rows, int64_t cols, float eps);

}  // namespace dpt::cpu
