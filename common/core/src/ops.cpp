// ops.cpp — forward kernels and, right next to each, its backward closure.
//
// Convention: `dout` is d(loss)/d(output); a backward closure returns
// d(loss)/d(input) for each input in order, undefined where not needed.
// Every loop runs on the tensors' device through kernels.h (`K(t)`): this file
// checks shapes and builds the graph, and never reads a device pointer itself.
// A backward closure hands `dout`'s device pointer to the kernel rather than
// `dout.item()`, so a GPU backward pass never waits for the host.
#include "dpt/ops.h"

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/kernels.h"
#include "op_checks.h"

namespace dpt {

// ----------------------------------------------------------------------------
// in-place kernels

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
          float alpha, float beta) {
  check_2d("gemm", "a", a);
  check_2d("gemm", "b", b);
  check_2d("gemm", "c", c);
  int64_t m = transpose_a ? a.size(1) : a.size(0), k = transpose_a ? a.size(0) : a.size(1);
  int64_t kb = transpose_b ? b.size(1) : b.size(0), n = transpose_b ? b.size(0) : b.size(1);
  DPT_CHECK(k == kb && c.size(0) == m && c.size(1) == n,
            "gemm: op(a) is (" << m << ", " << k << "), op(b) is (" << kb << ", " << n
                               << "), c is " << shape_str(c.shape()));
  check_same_device("gemm", a, b);
  check_same_device("gemm", a, c);
  K(c).gemm(transpose_a, transpose_b, m, n, k, alpha, a.data(), b.data(), beta, c.data());
}

void axpy_(Tensor& y, float alpha, const Tensor& x) {
  DPT_CHECK(y.numel() == x.numel(), "axpy_: " << y.numel() << " vs " << x.numel() << " elements");
  check_same_device("axpy_", y, x);
  K(y).axpy(y.data(), alpha, x.data(), y.numel());
}

void scale_(Tensor& t, float s) { K(t).scale(t.data(), s, t.numel()); }

void fill_(Tensor& t, float value) { K(t).fill(t.data(), value, t.numel()); }

// ----------------------------------------------------------------------------
// reshape: a view in the graph; the gradient takes the input's shape back

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape before = x.shape();
  return record(x.reshape(shape), "reshape", {x},
                [before](const Tensor& dout) { return std::vector<Tensor>{dout.reshape(before)}; });
}

// ----------------------------------------------------------------------------
// matmul: a (M, K) · b (K, N) → (M, N);  da = dout · bᵀ,  db = aᵀ · dout

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_2d("matmul", "a", a);
  check_2d("matmul", "b", b);
  check_same_device("matmul", a, b);
  DPT_CHECK(a.size(1) == b.size(0),
            "matmul: a " << shape_str(a.shape()) << " · b " << shape_str(b.shape()) << ": inner sizes differ");
  Tensor out = Tensor::empty({a.size(0), b.size(1)}, a.device());
  gemm(a, false, b, false, out);
  return record(out, "matmul", {a, b}, [a, b](const Tensor& dout) -> std::vector<Tensor> {
    Tensor da, db;
    if (a.requires_grad()) {
      da = Tensor::empty(a.shape(), a.device());
      gemm(dout, false, b, true, da);
    }
    if (b.requires_grad()) {
      db = Tensor::empty(b.shape(), b.device());
      gemm(a, true, dout, false, db);
    }
    return {da, db};
  });
}

// ----------------------------------------------------------------------------
// linear: x (B, in), W (out, in), b (out) → y = x Wᵀ + b (B, out)
//   dx = dy W (B, in),  dW = dyᵀ x (out, in),  db = Σ_rows dy (out)

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_2d("linear", "x", x);
  check_2d("linear", "weight", weight);
  check_same_device("linear", x, weight);
  DPT_CHECK(x.size(1) == weight.size(1), "linear: x has " << x.size(1) << " features, weight "
                                                          << shape_str(weight.shape()) << " expects "
                                                          << weight.size(1));
  int64_t out_features = weight.size(0);
  if (bias.defined()) {
    DPT_CHECK(bias.dim() == 1 && bias.size(0) == out_features,
              "linear: bias " << shape_str(bias.shape()) << " for " << out_features << " outputs");
    check_same_device("linear", x, bias);
  }
  Tensor y = Tensor::empty({x.size(0), out_features}, x.device());
  gemm(x, false, weight, true, y);
  if (bias.defined()) K(y).add_bias(y.data(), bias.data(), y.size(0), out_features);
  return record(y, "linear", {x, weight, bias}, [x, weight, bias](const Tensor& dy) -> std::vector<Tensor> {
    Tensor dx, dweight, dbias;
    if (x.requires_grad()) {
      dx = Tensor::empty(x.shape(), x.device());
      gemm(dy, false, weight, false, dx);
    }
    if (weight.requires_grad()) {
      dweight = Tensor::empty(weight.shape(), weight.device());
      gemm(dy, true, x, false, dweight);
    }
    if (bias.defined() && bias.requires_grad()) {
      dbias = Tensor::empty(bias.shape(), bias.device());
      K(dy).sum_rows(dbias.data(), dy.data(), dy.size(0), dy.size(1));
    }
    return {dx, dweight, dbias};
  });
}

// ----------------------------------------------------------------------------
// elementwise: add, mul, scale, relu

Tensor add(const Tensor& a, const Tensor& b) {
  check_same_shape("add", a, b);
  check_same_device("add", a, b);
  Tensor out = Tensor::empty(a.shape(), a.device());
  K(a).add(out.data(), a.data(), b.data(), a.numel());
  return record(out, "add", {a, b}, [](const Tensor& dout) -> std::vector<Tensor> {
    return {dout, dout};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  check_same_shape("mul", a, b);
  check_same_device("mul", a, b);
  Tensor out = Tensor::empty(a.shape(), a.device());
  K(a).mul(out.data(), a.data(), b.data(), a.numel());
  return record(out, "mul", {a, b}, [a, b](const Tensor& dout) -> std::vector<Tensor> {
    Tensor da, db;  // d(a·b)/da = b, d(a·b)/db = a
    if (a.requires_grad()) {
      da = Tensor::empty(a.shape(), a.device());
      K(a).mul(da.data(), dout.data(), b.data(), a.numel());
    }
    if (b.requires_grad()) {
      db = Tensor::empty(b.shape(), b.device());
      K(b).mul(db.data(), dout.data(), a.data(), b.numel());
    }
    return {da, db};
  });
}

Tensor scale(const Tensor& a, float s) {
  Tensor out = Tensor::empty(a.shape(), a.device());
  K(a).scaled_copy(out.data(), a.data(), s, a.numel());
  return record(out, "scale", {a}, [s](const Tensor& dout) -> std::vector<Tensor> {
    Tensor da = Tensor::empty(dout.shape(), dout.device());
    K(dout).scaled_copy(da.data(), dout.data(), s, dout.numel());
    return {da};
  });
}

Tensor relu(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.device());
  K(x).relu(out.data(), x.data(), x.numel());
  return record(out, "relu", {x}, [x](const Tensor& dout) -> std::vector<Tensor> {
    // The gradient passes where the input was positive (0 at exactly 0, as PyTorch).
    Tensor dx = Tensor::empty(x.shape(), x.device());
    K(x).relu_backward(dx.data(), x.data(), dout.data(), x.numel());
    return {dx};
  });
}

// ----------------------------------------------------------------------------
// reductions: sum, mean → scalar

Tensor sum(const Tensor& x) {
  Tensor out = Tensor::empty({}, x.device());
  K(x).sum(out.data(), x.data(), x.numel());
  return record(out, "sum", {x}, [x](const Tensor& dout) -> std::vector<Tensor> {
    Tensor dx = Tensor::empty(x.shape(), x.device());  // dout everywhere
    K(x).fill_from_scalar(dx.data(), dout.data(), 1.0f, 1.0f, x.numel());
    return {dx};
  });
}

Tensor mean(const Tensor& x) {
  DPT_CHECK(x.numel() > 0, "mean of an empty tensor");
  return scale(sum(x), 1.0f / static_cast<float>(x.numel()));
}

// ----------------------------------------------------------------------------
// losses

// logits z (B, C); p = softmax(z) row-wise; loss = (1/B) Σ_i (logsumexp(z_i) − z_i[y_i])
// dz = (p − onehot(y)) / B · dloss
Tensor softmax_cross_entropy(const Tensor& logits, const std::vector<int64_t>& labels) {
  check_2d("softmax_cross_entropy", "logits", logits);
  int64_t batch = logits.size(0), classes = logits.size(1);
  DPT_CHECK(batch > 0, "softmax_cross_entropy: empty batch");
  DPT_CHECK(static_cast<int64_t>(labels.size()) == batch,
            "softmax_cross_entropy: " << batch << " rows of logits but " << labels.size() << " labels");
  for (int64_t i = 0; i < batch; ++i)  // the kernel reads logits[i][label]: check on the host first
    DPT_CHECK(labels[i] >= 0 && labels[i] < classes, "softmax_cross_entropy: label " << labels[i] << " at row "
                                                                                     << i << " outside [0, "
                                                                                     << classes << ")");
  Tensor probs = Tensor::empty(logits.shape(), logits.device());
  Tensor loss = Tensor::empty({}, logits.device());
  K(logits).softmax_cross_entropy(probs.data(), loss.data(), logits.data(), labels.data(), batch, classes);
  return record(loss, "softmax_cross_entropy", {logits},
                [probs, labels, batch, classes](const Tensor& dout) -> std::vector<Tensor> {
                  Tensor dz = Tensor::empty(probs.shape(), probs.device());
                  K(probs).softmax_cross_entropy_backward(dz.data(), probs.data(), labels.data(), dout.data(),
                                                          batch, classes);
                  return {dz};
                });
}

// loss = (1/N) Σ (pred − target)²;  dpred = 2 (pred − target) / N · dloss
Tensor mse_loss(const Tensor& pred, const Tensor& target) {
  check_same_shape("mse_loss", pred, target);
  check_same_device("mse_loss", pred, target);
  DPT_CHECK(pred.numel() > 0, "mse_loss of empty tensors");
  Kernels& k = K(pred);
  Tensor diff = Tensor::empty(pred.shape(), pred.device());
  k.sub(diff.data(), pred.data(), target.data(), pred.numel());
  float n = static_cast<float>(pred.numel());
  Tensor squares = Tensor::empty({}, pred.device());  // Σ diff², then / N into the loss
  k.sum_squares(squares.data(), diff.data(), diff.numel());
  Tensor loss = Tensor::empty({}, pred.device());
  k.fill_from_scalar(loss.data(), squares.data(), 1.0f, n, 1);
  return record(loss, "mse_loss", {pred}, [diff, n](const Tensor& dout) -> std::vector<Tensor> {
    Tensor dpred = Tensor::empty(diff.shape(), diff.device());
    K(diff).scale_by_scalar(dpred.data(), diff.data(), dout.data(), 2.0f, n, diff.numel());
    return {dpred};
  });
}

// ----------------------------------------------------------------------------
// helpers

double accuracy(const Tensor& logits, const std::vector<int64_t>& labels) {
  check_2d("accuracy", "logits", logits);
  int64_t batch = logits.size(0), classes = logits.size(1);
  DPT_CHECK(static_cast<int64_t>(labels.size()) == batch, "accuracy: rows and labels differ");
  if (batch == 0) return 0.0;
  if (classes == 0) return 0.0;  // no class to pick: no row is right
  int64_t correct = K(logits).count_correct(logits.data(), labels.data(), batch, classes);
  return double(correct) / double(batch);
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  DPT_CHECK(a.numel() == b.numel(), "max_abs_diff: " << a.numel() << " vs " << b.numel() << " elements");
  // Tensors on two devices (a GPU result against its CPU twin) meet on the host.
  if (&a.device() != &b.device())
    return max_abs_diff(a.to(Device::host()), b.to(Device::host()));
  return K(a).max_abs_diff(a.data(), b.data(), a.numel());
}

}  // namespace dpt
