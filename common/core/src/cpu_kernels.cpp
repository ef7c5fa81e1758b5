// cpu_kernels.cpp — kernels.h for host memory (host and the simulated cpu:k
// devices): Eigen for the GEMM, the sums and the vector arithmetic it already
// vectorises, plain loops over kernel_math.h for everything with a formula.
//
// Single-threaded on purpose: ranks are the parallelism. The results are the
// reference the CUDA kernels are tested against.
#include <Eigen/Core>

#include <vector>

#include "cpu_batch_norm_kernels.h"
#include "cpu_transformer_kernels.h"
#include "dpt/half_math.h"
#include "dpt/kernel_math.h"
#include "dpt/kernels.h"

namespace dpt {

namespace {
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;

class CpuKernels final : public Kernels {
 public:
  // ---- BLAS ----

  void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            const float* b, float beta, float* c) override {
    MatrixMap C(c, m, n);
    if (beta == 0.0f) C.setZero();
    else if (beta != 1.0f) C *= beta;
    if (m == 0 || n == 0 || k == 0) return;
    // a is stored (m, k), or (k, m) when transposed; b (k, n), or (n, k).
    ConstMatrixMap A(a, transpose_a ? k : m, transpose_a ? m : k);
    ConstMatrixMap B(b, transpose_b ? n : k, transpose_b ? k : n);
    // Four spellings so Eigen sees the transposes and picks its packed kernels.
    if (!transpose_a && !transpose_b) C.noalias() += alpha * A * B;
    else if (!transpose_a && transpose_b) C.noalias() += alpha * A * B.transpose();
    else if (transpose_a && !transpose_b) C.noalias() += alpha * A.transpose() * B;
    else C.noalias() += alpha * A.transpose() * B.transpose();
  }

  void axpy(float* y, float alpha, const float* x, int64_t n) override {
    VectorMap(y, n) += alpha * ConstVectorMap(x, n);
  }
  void scale(float* x, float s, int64_t n) override { VectorMap(x, n) *= s; }
  void divide(float* x, float d, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) x[i] /= d;
  }
  void fill(float* x, float value, int64_t n) override { VectorMap(x, n).setConstant(value); }

  // ---- elementwise ----

  void add(float* out, const float* a, const float* b, int64_t n) override {
    VectorMap(out, n) = ConstVectorMap(a, n) + ConstVectorMap(b, n);
  }
  void sub(float* out, const float* a, const float* b, int64_t n) override {
    VectorMap(out, n) = ConstVectorMap(a, n) - ConstVectorMap(b, n);
  }
  void mul(float* out, const float* a, const float* b, int64_t n) override {
    VectorMap(out, n) = ConstVectorMap(a, n).cwiseProduct(ConstVectorMap(b, n));
  }
  void scaled_copy(float* out, const float* a, float s, int64_t n) override {
    VectorMap(out, n) = s * ConstVectorMap(a, n);
  }
  void scale_by_scalar(float* out, const float* a, const float* scalar, float multiplier, float divisor,
                       int64_t n) override {
    float f = math::scalar_factor(*scalar, multiplier, divisor);
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * f;
  }
  void fill_from_scalar(float* out, const float* scalar, float multiplier, float divisor, int64_t n) override {
    fill(out, math::scalar_factor(*scalar, multiplier, divisor), n);
  }
  void relu(float* out, const float* x, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) out[i] = math::relu(x[i]);
  }
  void relu_backward(float* dx, const float* x, const float* dout, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) dx[i] = math::relu_backward(x[i], dout[i]);
  }

  // ---- rows and columns ----

  void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) override {
    MatrixMap(y, rows, cols).rowwise() += ConstVectorMap(bias, cols).transpose();
  }
  void sum_rows(float* dbias, const float* dy, int64_t rows, int64_t cols) override {
    VectorMap(dbias, cols) = ConstMatrixMap(dy, rows, cols).colwise().sum().transpose();
  }

  // ---- reductions ----

  void sum(float* out, const float* x, int64_t n) override { *out = ConstVectorMap(x, n).sum(); }
  void sum_squares(float* out, const float* x, int64_t n) override {
    *out = ConstVectorMap(x, n).squaredNorm();
  }

  // ---- loss ----

  void softmax_cross_entropy(float* probs, float* loss, const float* logits, const int64_t* labels,
                             int64_t rows, int64_t classes) override {
    double total = 0.0;
    for (int64_t i = 0; i < rows; ++i)
      total += math::softmax_cross_entropy_row(probs + i * classes, logits + i * classes, classes, labels[i]);
    *loss = float(total / double(rows));
  }
  void softmax_cross_entropy_backward(float* dlogits, const float* probs, const int64_t* labels,
                                      const float* dloss, int64_t rows, int64_t classes) override {
    float factor = math::scalar_factor(*dloss, 1.0f, float(rows));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < classes; ++c)
        dlogits[i * classes + c] = math::softmax_cross_entropy_grad(probs[i * classes + c], c == labels[i], factor);
  }

  // ---- optimizers ----

  void sgd_step(float* p, const float* g, float lr, float weight_decay, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) math::sgd_update(p[i], g[i], lr, weight_decay);
  }
  void momentum_step(float* p, float* v, const float* g, float lr, float momentum, float weight_decay, bool first,
                     int64_t n) override {
    for (int64_t i = 0; i < n; ++i) math::momentum_update(p[i], v[i], g[i], lr, momentum, weight_decay, first);
  }
  void adam_step(float* p, float* m, float* v, const float* g, const AdamStep& s, int64_t n) override {
    for (int64_t i = 0; i < n; ++i)
      math::adam_update(p[i], m[i], v[i], g[i], s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.decoupled,
                        s.correction1, s.correction2);
  }

  void lars_step(float* p, float* v, const float* g, const float* squares, const LarsStep& s, bool first,
                 int64_t n) override {
    float ratio = math::lars_trust_ratio(squares[0], squares[1], s.trust_coefficient, s.weight_decay, s.eps);
    for (int64_t i = 0; i < n; ++i) math::lars_update(p[i], v[i], g[i], ratio, s.lr, s.momentum, s.weight_decay, first);
  }
  void lamb_direction(float* u, float* m, float* v, const float* p, const float* g, const AdamStep& s,
                      int64_t n) override {
    for (int64_t i = 0; i < n; ++i)
      u[i] = math::lamb_direction(p[i], m[i], v[i], g[i], s.beta1, s.beta2, s.eps, s.weight_decay, s.correction1,
                                  s.correction2);
  }
  void lamb_apply(float* p, const float* u, const float* squares, float lr, int64_t n) override {
    float step = lr * math::lamb_trust_ratio(squares[0], squares[1]);
    for (int64_t i = 0; i < n; ++i) p[i] -= step * u[i];
  }

  // ---- 16-bit formats ----  // ---- 16-bit formats ----

  void round_half(float* x, int64_t n, Half format, math::RoundingCounts* counts) override {
    const bool bf16 = format == Half::BF16;
    if (counts)
      for (int64_t i = 0; i < n; ++i) x[i] = math::round_counting(x[i], bf16, *counts);
    else if (bf16)  // a loop per format: the compiler sees which conversion
      for (int64_t i = 0; i < n; ++i) x[i] = math::round_float(x[i], true);
    else
      for (int64_t i = 0; i < n; ++i) x[i] = math::round_float(x[i], false);
  }
  // The operands rounded into copies, then the fp32 GEMM: a product of two
  // 16-bit values is exact in fp32 (at most 2·11 significant bits).
  void gemm_half(Half format, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
                 const float* b, float* c) override {
    std::vector<float> a16(a, a + m * k), b16(b, b + k * n);
    round_half(a16.data(), m * k, format, nullptr);
    round_half(b16.data(), k * n, format, nullptr);
    gemm(transpose_a, transpose_b, m, n, k, 1.0f, a16.data(), b16.data(), 0.0f, c);
  }

  // ---- a transformer's loops (the longer ones in cpu_transformer_kernels.cpp) ----

  // One Eigen GEMM per matrix: attention's are small (T × T × head size), and
  // Eigen's packed kernel is already at its best at 64 × 64.
  void gemm_batched(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t stride_a, const float* b, int64_t stride_b, float beta, float* c,
                    int64_t stride_c, int64_t batch) override {
    for (int64_t i = 0; i < batch; ++i)
      gemm(transpose_a, transpose_b, m, n, k, alpha, a + i * stride_a, b + i * stride_b, beta, c + i * stride_c);
  }
  void embedding(float* out, const float* table, const int64_t* tokens, int64_t n, int64_t cols) override {
    cpu::embedding(out, table, tokens, n, cols);
  }
  void embedding_backward(float* dtable, const float* dout, const int64_t* tokens, int64_t n,
                          int64_t cols) override {
    cpu::embedding_backward(dtable, dout, tokens, n, cols);
  }
  void layer_norm(float* out, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                  int64_t rows, int64_t cols, float eps) override {
    cpu::layer_norm(out, mean, rstd, x, weight, bias, rows, cols, eps);
  }
  void layer_norm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                           const float* mean, const float* rstd, const float* weight, int64_t rows,
                           int64_t cols) override {
    cpu::layer_norm_backward(dx, dweight, dbias, dout, x, mean, rstd, weight, rows, cols);
  }
  void gelu(float* out, const float* x, int64_t n) override { cpu::gelu(out, x, n); }
  void gelu_backward(float* dx, const float* x, const float* dout, int64_t n) override {
    cpu::gelu_backward(dx, x, dout, n);
  }
  void softmax(float* out, const float* x, int64_t rows, int64_t cols, int64_t causal_period) override {
    cpu::softmax(out, x, rows, cols, causal_period);
  }
  void softmax_backward(float* dx, const float* y, const float* dy, int64_t rows, int64_t cols) override {
    cpu::softmax_backward(dx, y, dy, rows, cols);
  }
  void swap_axes_12(float* out, const float* x, int64_t a, int64_t b, int64_t c, int64_t d) override {
    cpu::swap_axes_12(out, x, a, b, c, d);
  }
  void copy_columns(float* out, int64_t out_stride, const float* x, int64_t x_stride, int64_t rows,
                    int64_t cols) override {
    cpu::copy_columns(out, out_stride, x, x_stride, rows, cols);
  }

  // ---- batch normalization (cpu_batch_norm_kernels.cpp) ----

  void batch_moments(float* mean, float* var, const float* x, int64_t rows, int64_t cols) override {
    cpu::batch_moments(mean, var, x, rows, cols);
  }
  void batch_norm(float* y, float* xhat, float* inv_std, const float* x, const float* mean, const float* var,
                  const float* weight, const float* bias, int64_t rows, int64_t cols, float eps) override {
    cpu::batch_norm(y, xhat, inv_std, x, mean, var, weight, bias, rows, cols, eps);
  }
  void batch_norm_running(float* running_mean, float* running_var, const float* mean, const float* var,
                          float momentum, float unbias, int64_t cols) override {
    cpu::batch_norm_running(running_mean, running_var, mean, var, momentum, unbias, cols);
  }
  void batch_norm_gradient_sums(float* sum_dy, float* sum_dy_xhat, const float* dy, const float* xhat, int64_t rows,
                                int64_t cols) override {
    cpu::batch_norm_gradient_sums(sum_dy, sum_dy_xhat, dy, xhat, rows, cols);
  }
  void batch_norm_backward(float* dx, const float* dy, const float* xhat, const float* inv_std, const float* weight,
                           const float* sum_dy, const float* sum_dy_xhat, int64_t count, int64_t rows,
                           int64_t cols) override {
    cpu::batch_norm_backward(dx, dy, xhat, inv_std, weight, sum_dy, sum_dy_xhat, count, rows, cols);
  }
  void batch_norm_inference(float* y, const float* x, const float* mean, const float* var, const float* weight,
                            const float* bias, int64_t rows, int64_t cols, float eps) override {
    cpu::batch_norm_inference(y, x, mean, var, weight, bias, rows, cols, eps);
  }

  // ---- results for the host ----

  int64_t count_correct(const float* logits, const int64_t* labels, int64_t rows, int64_t classes) override {
    int64_t correct = 0;
    for (int64_t i = 0; i < rows; ++i) correct += math::row_argmax(logits + i * classes, classes) == labels[i];
    return correct;
  }
  float max_abs_diff(const float* a, const float* b, int64_t n) override {
    float worst = 0.0f;
    for (int64_t i = 0; i < n; ++i) worst = math::nan_aware_max(worst, math::abs_diff(a[i], b[i]));
    return worst;
  }
  int64_t count_inf_or_nan(const float* x, int64_t n) override {
    int64_t found = 0;
    for (int64_t i = 0; i < n; ++i) found += math::is_inf_or_nan(x[i]) ? 1 : 0;
    return found;
  }
};
}  // namespace

Kernels& cpu_kernels() {
  static CpuKernels kernels;
  return kernels;
}

}  // namespace dpt
