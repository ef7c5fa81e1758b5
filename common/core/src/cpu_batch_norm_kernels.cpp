// cpu_batch_norm_kernels.cpp — batch normalization's host loops (kernels.h,
// "batch normalization"): what batch_norm.cpp runs on host memory, and the
// reference the CUDA kernels (common/backends/cuda/cuda_batch_norm.cuh) are
// tested against.
//
// The column sums run in double, row by row: the rounding of a float sum over
// a batch of thousands of rows never reaches these results, so each is its
// exact value rounded once to float (what the GPU's float trees are held to).
// The per-element formulas are kernel_math.h's, the GPU's too.
#include "cpu_batch_norm_kernels.h"

#include <vector>

#include "dpt/kernel_math.h"

namespace dpt::cpu {

namespace {
// Σ over rows of term(i, c), per column, in double.
template <typename Term>
std::vector<double> column_sums(int64_t rows, int64_t cols, Term term) {
  std::vector<double> sums(static_cast<std::size_t>(cols), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) sums[std::size_t(c)] += term(i, c);
  return sums;
}
}  // namespace

void batch_moments(float* mean, float* var, const float* x, int64_t rows, int64_t cols) {
  std::vector<double> mu = column_sums(rows, cols, [&](int64_t i, int64_t c) { return double(x[i * cols + c]); });
  for (double& m : mu) m /= double(rows);
  std::vector<double> m2 = column_sums(rows, cols, [&](int64_t i, int64_t c) {
    double d = x[i * cols + c] - mu[std::size_t(c)];
    return d * d;
  });
  for (int64_t c = 0; c < cols; ++c) {
    mean[c] = float(mu[std::size_t(c)]);
    var[c] = float(m2[std::size_t(c)] / double(rows));
  }
}

void batch_norm(float* y, float* xhat, float* inv_std, const float* x, const float* mean, const float* var,
                const float* weight, const float* bias, int64_t rows, int64_t cols, float eps) {
  for (int64_t c = 0; c < cols; ++c) inv_std[c] = math::batch_norm_inv_std(var[c], eps);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t k = i * cols + c;
      xhat[k] = (x[k] - mean[c]) * inv_std[c];
      y[k] = xhat[k] * weight[c] + bias[c];
    }
}

void batch_norm_running(float* running_mean, float* running_var, const float* mean, const float* var, float momentum,
                        float unbias, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    running_mean[c] = math::running_average(running_mean[c], mean[c], momentum);
    running_var[c] = math::running_average(running_var[c], var[c] * unbias, momentum);
  }
}

void batch_norm_gradient_sums(float* sum_dy, float* sum_dy_xhat, const float* dy, const float* xhat, int64_t rows,
                              int64_t cols) {
  std::vector<double> s1 = column_sums(rows, cols, [&](int64_t i, int64_t c) { return double(dy[i * cols + c]); });
  std::vector<double> s2 = column_sums(rows, cols, [&](int64_t i, int64_t c) {
    return double(dy[i * cols + c]) * xhat[i * cols + c];
  });
  for (int64_t c = 0; c < cols; ++c) {
    sum_dy[c] = float(s1[std::size_t(c)]);
    sum_dy_xhat[c] = float(s2[std::size_t(c)]);
  }
}

void batch_norm_backward(float* dx, const float* dy, const float* xhat, const float* inv_std, const float* weight,
                         const float* sum_dy, const float* sum_dy_xhat, int64_t count, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t k = i * cols + c;
      dx[k] = math::batch_norm_dx(dy[k], xhat[k], weight[c], inv_std[c], sum_dy[c], sum_dy_xhat[c], float(count));
    }
}

void batch_norm_inference(float* y, const float* x, const float* mean, const float* var, const float* weight,
                          const float* bias, int64_t rows, int64_t cols, float eps) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t k = i * cols + c;
      y[k] = (x[k] - mean[c]) * math::batch_norm_inv_std(var[c], eps) * weight[c] + bias[c];
    }
}

}  // namespace dpt::cpu
