// batch_norm.cpp — BatchNorm1d's training and evaluation forms, with the
// backward next to the forward.
//
// x is (B, C): B rows (samples), C columns (features), statistics per column.
//   forward:  μ = Σ x / N,  σ² = Σ (x − μ)² / N,  x̂ = (x − μ) / √(σ² + eps),
//             y = x̂ ⊙ weight + bias
//   backward: dbias = Σ dy,  dweight = Σ dy ⊙ x̂  (this caller's rows only),
//             dx = weight / √(σ² + eps) · (dy − (Σ dy)/N − x̂ · (Σ dy ⊙ x̂)/N)
// N and the Σ in dx run over the whole batch the statistics are over: x's own
// rows, or every rank's when a BatchStatistics combines them (ch03's
// SyncBatchNorm), which is why dx asks it to combine the two sums too.
//
// Left out: CUDA kernels (these are host loops; a cuda:k tensor is refused
// with a sentence), 3-D and 4-D inputs (BatchNorm2d's N·H·W rows), affine=False.
#include <cmath>
#include <vector>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt {

namespace {
void check_host(const char* op, const Tensor& t) {
  DPT_CHECK(t.device().is_host_memory(),
            op << ": runs on host memory (host, cpu:k) only, got a tensor on " << t.device().name()
               << "; batch norm has no GPU kernels in this dpt");
}

// x (B, C) and the per-column weight and bias: shapes, devices, memory.
void check_layer(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  DPT_CHECK(x.dim() == 2, op << ": x must be (B, C), got " << shape_str(x.shape()));
  int64_t columns = x.size(1);
  for (const Tensor* t : {&weight, &bias}) {
    DPT_CHECK(t->defined() && t->dim() == 1 && t->size(0) == columns,
              op << ": weight and bias must be (" << columns << ") for x " << shape_str(x.shape()));
    DPT_CHECK(&t->device() == &x.device(), op << ": x on " << x.device().name() << ", a parameter on "
                                              << t->device().name());
  }
  check_host(op, x);
}

// Column sums of a (rows, cols), in double.
std::vector<double> column_sums(const float* a, int64_t rows, int64_t cols) {
  std::vector<double> sums(static_cast<std::size_t>(cols), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) sums[c] += a[i * cols + c];
  return sums;
}
}  // namespace

// ----------------------------------------------------------------------------
// statistics

BatchMoments batch_moments(const Tensor& x) {
  DPT_CHECK(x.dim() == 2, "batch_moments: x must be (B, C), got " << shape_str(x.shape()));
  check_host("batch_moments", x);
  int64_t rows = x.size(0), cols = x.size(1);
  DPT_CHECK(rows > 0, "batch_moments: x has no rows");
  BatchMoments m{Tensor::empty({cols}, x.device()), Tensor::empty({cols}, x.device()), rows};
  std::vector<double> sums = column_sums(x.data(), rows, cols);
  const float* in = x.data();
  for (int64_t c = 0; c < cols; ++c) {
    double mean = sums[c] / double(rows), squares = 0;  // two passes: no E[x²] − μ² cancellation
    for (int64_t i = 0; i < rows; ++i) squares += (in[i * cols + c] - mean) * (in[i * cols + c] - mean);
    m.mean.data()[c] = float(mean);
    m.var.data()[c] = float(squares / double(rows));
  }
  return m;
}

// ----------------------------------------------------------------------------
// training mode

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, BatchNormRunning* running,
                  BatchStatistics* across) {
  check_layer("batch_norm", x, weight, bias);
  int64_t rows = x.size(0), cols = x.size(1);
  BatchMoments m = across ? across->combine(batch_moments(x)) : batch_moments(x);
  DPT_CHECK(m.mean.defined() && m.var.defined() && m.mean.numel() == cols && m.var.numel() == cols,
            "batch_norm: the combined statistics must hold " << cols << " means and variances");
  DPT_CHECK(m.count >= 2, "batch_norm: training needs at least 2 rows in the batch to take a variance, got "
                              << m.count << " (as PyTorch: use a batch of 2 or more)");
  int64_t count = m.count;

  Tensor inv_std = Tensor::empty({cols}, x.device());  // 1 / √(σ² + eps)
  Tensor xhat = Tensor::empty(x.shape(), x.device());
  Tensor y = Tensor::empty(x.shape(), x.device());
  const float *in = x.data(), *mean = m.mean.data(), *var = m.var.data();
  for (int64_t c = 0; c < cols; ++c) inv_std.data()[c] = 1.0f / std::sqrt(var[c] + eps);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t k = i * cols + c;
      xhat.data()[k] = (in[k] - mean[c]) * inv_std.data()[c];
      y.data()[k] = xhat.data()[k] * weight.data()[c] + bias.data()[c];
    }

  if (running) {  // PyTorch: the running variance is the unbiased one
    DPT_CHECK(running->mean.numel() == cols && running->var.numel() == cols,
              "batch_norm: running statistics for " << running->mean.numel() << " columns, x has " << cols);
    float keep = 1.0f - running->momentum, unbias = float(count) / float(count - 1);
    for (int64_t c = 0; c < cols; ++c) {
      running->mean.data()[c] = keep * running->mean.data()[c] + running->momentum * mean[c];
      running->var.data()[c] = keep * running->var.data()[c] + running->momentum * var[c] * unbias;
    }
  }

  return record(y, "batch_norm", {x, weight, bias},
                [x, weight, bias, xhat, inv_std, count, across](const Tensor& dy) -> std::vector<Tensor> {
    int64_t rows = dy.size(0), cols = dy.size(1);
    Tensor sum_dy = Tensor::empty({cols}, dy.device()), sum_dy_xhat = Tensor::empty({cols}, dy.device());
    std::vector<double> s1 = column_sums(dy.data(), rows, cols), s2(static_cast<std::size_t>(cols), 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < cols; ++c) s2[c] += double(dy.data()[i * cols + c]) * xhat.data()[i * cols + c];
    for (int64_t c = 0; c < cols; ++c) {
      sum_dy.data()[c] = float(s1[c]);
      sum_dy_xhat.data()[c] = float(s2[c]);
    }
    // The parameters' gradients are this caller's rows' (data parallel averages them).
    Tensor dweight = weight.requires_grad() ? sum_dy_xhat.clone() : Tensor();
    Tensor dbias = bias.requires_grad() ? sum_dy.clone() : Tensor();
    if (across) across->combine_gradient_sums(sum_dy, sum_dy_xhat);  // every rank calls it, needed or not
    Tensor dx;
    if (x.requires_grad()) {
      dx = Tensor::empty(dy.shape(), dy.device());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < cols; ++c) {
          int64_t k = i * cols + c;
          float centred = dy.data()[k] - sum_dy.data()[c] / float(count) -
                          xhat.data()[k] * sum_dy_xhat.data()[c] / float(count);
          dx.data()[k] = weight.data()[c] * inv_std.data()[c] * centred;
        }
    }
    return {dx, dweight, dbias};
  });
}

// ----------------------------------------------------------------------------
// evaluation mode

Tensor batch_norm_inference(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const BatchNormRunning& running, float eps) {
  check_layer("batch_norm_inference", x, weight, bias);
  int64_t rows = x.size(0), cols = x.size(1);
  DPT_CHECK(running.mean.numel() == cols && running.var.numel() == cols,
            "batch_norm_inference: running statistics for " << running.mean.numel() << " columns, x has " << cols);
  Tensor y = Tensor::empty(x.shape(), x.device());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t k = i * cols + c;
      float inv_std = 1.0f / std::sqrt(running.var.data()[c] + eps);
      y.data()[k] = (x.data()[k] - running.mean.data()[c]) * inv_std * weight.data()[c] + bias.data()[c];
    }
  return y;
}

}  // namespace dpt
