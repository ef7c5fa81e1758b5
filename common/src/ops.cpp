// ops.cpp — forward kernels and, right next to each, its backward closure.
//
// Convention: `dout` is d(loss)/d(output); a backward closure returns
// d(loss)/d(input) for each input in order, undefined where not needed.
#include "dpt/ops.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "dpt/autograd.h"
#include "dpt/check.h"

namespace dpt {

namespace {
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;

ConstMatrixMap as_matrix(const Tensor& t) { return {t.data(), t.size(0), t.size(1)}; }
MatrixMap as_matrix(Tensor& t) { return {t.data(), t.size(0), t.size(1)}; }
ConstVectorMap as_vector(const Tensor& t) { return {t.data(), t.numel()}; }
VectorMap as_vector(Tensor& t) { return {t.data(), t.numel()}; }

void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  DPT_CHECK(a.shape() == b.shape(),
            op << ": shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()) << " differ");
}
void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  DPT_CHECK(&a.device() == &b.device(),
            op << ": inputs on " << a.device().name() << " and " << b.device().name()
               << "; copy one with .to(device) first");
}
void check_2d(const char* op, const char* what, const Tensor& t) {
  DPT_CHECK(t.dim() == 2, op << ": " << what << " must be 2-D, got " << shape_str(t.shape()));
}
}  // namespace

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
  auto A = as_matrix(a);
  auto B = as_matrix(b);
  auto C = as_matrix(c);
  if (beta == 0.0f) C.setZero();
  else if (beta != 1.0f) C *= beta;
  if (m == 0 || n == 0 || k == 0) return;
  // Four spellings so Eigen sees the transposes and picks its packed kernels.
  if (!transpose_a && !transpose_b) C.noalias() += alpha * A * B;
  else if (!transpose_a && transpose_b) C.noalias() += alpha * A * B.transpose();
  else if (transpose_a && !transpose_b) C.noalias() += alpha * A.transpose() * B;
  else C.noalias() += alpha * A.transpose() * B.transpose();
}

void axpy_(Tensor& y, float alpha, const Tensor& x) {
  DPT_CHECK(y.numel() == x.numel(), "axpy_: " << y.numel() << " vs " << x.numel() << " elements");
  as_vector(y) += alpha * as_vector(x);
}

void scale_(Tensor& t, float s) { as_vector(t) *= s; }

void fill_(Tensor& t, float value) { as_vector(t).setConstant(value); }

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
  if (bias.defined())
    DPT_CHECK(bias.dim() == 1 && bias.size(0) == out_features,
              "linear: bias " << shape_str(bias.shape()) << " for " << out_features << " outputs");
  Tensor y = Tensor::empty({x.size(0), out_features}, x.device());
  gemm(x, false, weight, true, y);
  if (bias.defined()) as_matrix(y).rowwise() += as_vector(bias).transpose();
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
      as_vector(dbias) = as_matrix(dy).colwise().sum().transpose();
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
  as_vector(out) = as_vector(a) + as_vector(b);
  return record(out, "add", {a, b}, [](const Tensor& dout) -> std::vector<Tensor> {
    return {dout, dout};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  check_same_shape("mul", a, b);
  check_same_device("mul", a, b);
  Tensor out = Tensor::empty(a.shape(), a.device());
  as_vector(out) = as_vector(a).cwiseProduct(as_vector(b));
  return record(out, "mul", {a, b}, [a, b](const Tensor& dout) -> std::vector<Tensor> {
    Tensor da, db;  // d(a·b)/da = b, d(a·b)/db = a
    if (a.requires_grad()) {
      da = Tensor::empty(a.shape(), a.device());
      as_vector(da) = as_vector(dout).cwiseProduct(as_vector(b));
    }
    if (b.requires_grad()) {
      db = Tensor::empty(b.shape(), b.device());
      as_vector(db) = as_vector(dout).cwiseProduct(as_vector(a));
    }
    return {da, db};
  });
}

Tensor scale(const Tensor& a, float s) {
  Tensor out = Tensor::empty(a.shape(), a.device());
  as_vector(out) = s * as_vector(a);
  return record(out, "scale", {a}, [s](const Tensor& dout) -> std::vector<Tensor> {
    Tensor da = Tensor::empty(dout.shape(), dout.device());
    as_vector(da) = s * as_vector(dout);
    return {da};
  });
}

Tensor relu(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.device());
  as_vector(out) = as_vector(x).cwiseMax(0.0f);
  return record(out, "relu", {x}, [x](const Tensor& dout) -> std::vector<Tensor> {
    // The gradient passes where the input was positive (0 at exactly 0, as PyTorch).
    Tensor dx = Tensor::empty(x.shape(), x.device());
    const float* in = x.data();
    const float* g = dout.data();
    float* d = dx.data();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) d[i] = in[i] > 0.0f ? g[i] : 0.0f;
    return {dx};
  });
}

// ----------------------------------------------------------------------------
// reductions: sum, mean → scalar

Tensor sum(const Tensor& x) {
  Tensor out = Tensor::scalar(as_vector(x).sum(), x.device());
  return record(out, "sum", {x}, [x](const Tensor& dout) -> std::vector<Tensor> {
    return {Tensor::full(x.shape(), dout.item(), x.device())};
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
  Tensor probs = Tensor::empty(logits.shape(), logits.device());
  const float* z = logits.data();
  float* p = probs.data();
  double total = 0.0;
  for (int64_t i = 0; i < batch; ++i) {
    int64_t label = labels[i];
    DPT_CHECK(label >= 0 && label < classes,
              "softmax_cross_entropy: label " << label << " at row " << i << " outside [0, " << classes << ")");
    const float* row = z + i * classes;
    float max = *std::max_element(row, row + classes);  // subtract the max: exp never overflows
    double denom = 0.0;
    for (int64_t c = 0; c < classes; ++c) denom += std::exp(double(row[c] - max));
    for (int64_t c = 0; c < classes; ++c) p[i * classes + c] = float(std::exp(double(row[c] - max)) / denom);
    total += std::log(denom) + max - row[label];
  }
  Tensor loss = Tensor::scalar(float(total / batch), logits.device());
  return record(loss, "softmax_cross_entropy", {logits},
                [probs, labels, batch, classes](const Tensor& dout) -> std::vector<Tensor> {
                  Tensor dz = probs.clone();
                  float* d = dz.data();
                  for (int64_t i = 0; i < batch; ++i) d[i * classes + labels[i]] -= 1.0f;
                  scale_(dz, dout.item() / static_cast<float>(batch));
                  return {dz};
                });
}

// loss = (1/N) Σ (pred − target)²;  dpred = 2 (pred − target) / N · dloss
Tensor mse_loss(const Tensor& pred, const Tensor& target) {
  check_same_shape("mse_loss", pred, target);
  DPT_CHECK(pred.numel() > 0, "mse_loss of empty tensors");
  Tensor diff = Tensor::empty(pred.shape(), pred.device());
  as_vector(diff) = as_vector(pred) - as_vector(target);
  float n = static_cast<float>(pred.numel());
  Tensor loss = Tensor::scalar(as_vector(diff).squaredNorm() / n, pred.device());
  return record(loss, "mse_loss", {pred}, [diff, n](const Tensor& dout) -> std::vector<Tensor> {
    Tensor dpred = diff.clone();
    scale_(dpred, 2.0f * dout.item() / n);
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
  int64_t correct = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* row = logits.data() + i * classes;
    correct += (std::max_element(row, row + classes) - row) == labels[i];
  }
  return double(correct) / double(batch);
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  DPT_CHECK(a.numel() == b.numel(), "max_abs_diff: " << a.numel() << " vs " << b.numel() << " elements");
  // A NaN is the largest difference there is: Eigen's maxCoeff (like
  // std::max) would drop it and report a NaN run as equal.
  float worst = 0.0f;
  const float* x = a.data();
  const float* y = b.data();
  for (int64_t i = 0; i < a.numel(); ++i) {
    float d = std::fabs(x[i] - y[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? std::numeric_limits<float>::quiet_NaN() : d;
    if (std::isnan(worst)) break;
  }
  return worst;
}

}  // namespace dpt
