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
// This file checks shapes and devices, builds the graph and calls kernels.h's
// batch-norm loops on the tensors' device (host loops in double, or the CUDA
// kernels of cuda_batch_norm.cuh); it never reads a device pointer.
//
// Left out: 3-D and 4-D inputs (BatchNorm2d's N·H·W rows), affine=False.
#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/kernels.h"
#include "dpt/ops.h"
#include "op_checks.h"

namespace dpt {

namespace {
// x (B, C) and the per-column weight and bias: shapes and devices.
void check_layer(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  DPT_CHECK(x.dim() == 2, op << ": x must be (B, C), got " << shape_str(x.shape()));
  int64_t columns = x.size(1);
  for (const Tensor* t : {&weight, &bias}) {
    DPT_CHECK(t->defined() && t->dim() == 1 && t->size(0) == columns,
              op << ": weight and bias must be (" << columns << ") for x " << shape_str(x.shape()));
    DPT_CHECK(&t->device() == &x.device(), op << ": x on " << x.device().name() << ", a parameter on "
                                              << t->device().name());
  }
}

// Whether the kernels for x's memory can read t: the same device, or host
// memory both (host and cpu:k share the CPU loops).
bool reachable(const Tensor& x, const Tensor& t) {
  return &t.device() == &x.device() || (t.device().is_host_memory() && x.device().is_host_memory());
}

// Per-column statistics (`what`: "the running statistics") for x's columns, where x's kernels read them.
void check_columns(const char* op, const char* what, const Tensor& mean, const Tensor& var, const Tensor& x) {
  int64_t columns = x.size(1);
  DPT_CHECK(mean.defined() && var.defined() && mean.numel() == columns && var.numel() == columns,
            op << ": " << what << " must hold " << columns << " means and variances, x is " << shape_str(x.shape()));
  DPT_CHECK(reachable(x, mean) && reachable(x, var),
            op << ": x on " << x.device().name() << ", " << what << " on " << mean.device().name() << " and "
               << var.device().name());
}
}  // namespace

// ----------------------------------------------------------------------------
// statistics

BatchMoments batch_moments(const Tensor& x) {
  DPT_CHECK(x.dim() == 2, "batch_moments: x must be (B, C), got " << shape_str(x.shape()));
  int64_t rows = x.size(0), cols = x.size(1);
  DPT_CHECK(rows > 0, "batch_moments: x has no rows");
  BatchMoments m{Tensor::empty({cols}, x.device()), Tensor::empty({cols}, x.device()), rows};
  K(x).batch_moments(m.mean.data(), m.var.data(), x.data(), rows, cols);
  return m;
}

// ----------------------------------------------------------------------------
// training mode

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, BatchNormRunning* running,
                  BatchStatistics* across) {
  check_layer("batch_norm", x, weight, bias);
  int64_t rows = x.size(0), cols = x.size(1);
  BatchMoments m = across ? across->combine(batch_moments(x)) : batch_moments(x);
  check_columns("batch_norm", "the combined statistics", m.mean, m.var, x);
  DPT_CHECK(m.count >= 2, "batch_norm: training needs at least 2 rows in the batch to take a variance, got "
                              << m.count << " (as PyTorch: use a batch of 2 or more)");
  int64_t count = m.count;

  Tensor inv_std = Tensor::empty({cols}, x.device());  // 1 / √(σ² + eps)
  Tensor xhat = Tensor::empty(x.shape(), x.device());
  Tensor y = Tensor::empty(x.shape(), x.device());
  K(x).batch_norm(y.data(), xhat.data(), inv_std.data(), x.data(), m.mean.data(), m.var.data(), weight.data(),
                  bias.data(), rows, cols, eps);

  if (running) {  // PyTorch: the running variance is the unbiased one
    check_columns("batch_norm", "the running statistics", running->mean, running->var, x);
    K(x).batch_norm_running(running->mean.data(), running->var.data(), m.mean.data(), m.var.data(),
                            running->momentum, float(count) / float(count - 1), cols);
  }

  return record(y, "batch_norm", {x, weight, bias},
                [x, weight, bias, xhat, inv_std, count, across](const Tensor& dy) -> std::vector<Tensor> {
    int64_t rows = dy.size(0), cols = dy.size(1);
    Tensor sum_dy = Tensor::empty({cols}, dy.device()), sum_dy_xhat = Tensor::empty({cols}, dy.device());
    K(dy).batch_norm_gradient_sums(sum_dy.data(), sum_dy_xhat.data(), dy.data(), xhat.data(), rows, cols);
    // The parameters' gradients are this caller's rows' (data parallel averages them).
    Tensor dweight = weight.requires_grad() ? sum_dy_xhat.clone() : Tensor();
    Tensor dbias = bias.requires_grad() ? sum_dy.clone() : Tensor();
    if (across) across->combine_gradient_sums(sum_dy, sum_dy_xhat);  // every rank calls it, needed or not
    Tensor dx;
    if (x.requires_grad()) {
      dx = Tensor::empty(dy.shape(), dy.device());
      K(dy).batch_norm_backward(dx.data(), dy.data(), xhat.data(), inv_std.data(), weight.data(), sum_dy.data(),
                                sum_dy_xhat.data(), count, rows, cols);
    }
    return {dx, dweight, dbias};
  });
}

// ----------------------------------------------------------------------------
// evaluation mode

Tensor batch_norm_inference(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const BatchNormRunning& running, float eps) {
  check_layer("batch_norm_inference", x, weight, bias);
  check_columns("batch_norm_inference", "the running statistics", running.mean, running.var, x);
  int64_t rows = x.size(0), cols = x.size(1);
  Tensor y = Tensor::empty(x.shape(), x.device());
  K(x).batch_norm_inference(y.data(), x.data(), running.mean.data(), running.var.data(), weight.data(), bias.data(),
                            rows, cols, eps);
  return y;
}

}  // namespace dpt
