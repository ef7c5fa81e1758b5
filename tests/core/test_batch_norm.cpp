// test_batch_norm.cpp — batch_norm's laws: gradients against finite
// differences, each normalized column's mean and spread, the running
// statistics' update (PyTorch's momentum and unbiased variance), evaluation
// mode, and the refusals. tests/pytorch/crosscheck_batch_norm.py checks the
// same op against torch.nn.functional.batch_norm.
#include "support/catch.h"

#include <cmath>
#include <string>

#include "dpt/check.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "support/gradcheck.h"

using namespace dpt;
using dpt_test::max_relative_error;
using dpt_test::numeric_gradient;
using dpt_test::random_tensor;

namespace {
// Column c of a (rows, cols) as doubles.
std::vector<double> column(const Tensor& a, int64_t c) {
  std::vector<double> out;
  for (int64_t i = 0; i < a.size(0); ++i) out.push_back(a.data()[i * a.size(1) + c]);
  return out;
}
double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}
// Σ (v − mean)² / (n − ddof).
double variance_of(const std::vector<double>& v, int ddof) {
  double m = mean_of(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / double(v.size() - ddof);
}
}  // namespace

TEST_CASE("batch_norm gradients for x, weight and bias match finite differences", "[ops][batch_norm]") {
  Rng rng(11);
  // Shifted, scaled columns: the op must remove both.
  Tensor x = random_tensor({6, 3}, rng, 2.0f), w = random_tensor({3}, rng), b = random_tensor({3}, rng);
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] += float(i % 3);
  Tensor r = random_tensor({6, 3}, rng);  // Σ y would have no x-gradient: weight each output
  std::vector<Tensor> inputs{x, w, b};
  for (auto& t : inputs) t.set_requires_grad(true);
  auto loss = [&] { return sum(mul(batch_norm(x, w, b), r)); };
  loss().backward();
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    INFO("input " << k << " (0 x, 1 weight, 2 bias)");
    REQUIRE(inputs[k].grad().defined());
    CHECK(max_relative_error(inputs[k].grad().to_vector(), numeric_gradient(loss, inputs[k])) < 1e-2);
  }
}

TEST_CASE("batch_norm's columns have mean = bias and biased std = |weight|", "[ops][batch_norm]") {
  Rng rng(12);
  Tensor x = random_tensor({16, 4}, rng, 3.0f), w = random_tensor({4}, rng), b = random_tensor({4}, rng);
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] += 5.0f;
  Tensor y = batch_norm(x, w, b);
  for (int64_t c = 0; c < 4; ++c) {
    INFO("column " << c);
    std::vector<double> yc = column(y, c), xc = column(x, c);
    CHECK(mean_of(yc) == Approx(b.data()[c]).margin(1e-5));
    // eps = 1e-5 against a variance of ~9: the spread shrinks by √(σ²/(σ²+eps)), ≈ 6e-7 relative.
    double expected = std::abs(w.data()[c]) * std::sqrt(variance_of(xc, 0) / (variance_of(xc, 0) + 1e-5));
    CHECK(std::sqrt(variance_of(yc, 0)) == Approx(expected).epsilon(1e-5));
  }
}

TEST_CASE("batch_norm updates running statistics with momentum 0.1 and the unbiased variance",
          "[ops][batch_norm]") {
  Rng rng(13);
  Tensor x = random_tensor({5, 3}, rng, 2.0f), w = random_tensor({3}, rng), b = random_tensor({3}, rng);
  BatchNormRunning running{Tensor::zeros({3}, Device::host()), Tensor::full({3}, 1.0f, Device::host())};
  batch_norm(x, w, b, 1e-5f, &running);
  Tensor x2 = random_tensor({5, 3}, rng, 0.5f);
  batch_norm(x2, w, b, 1e-5f, &running);
  for (int64_t c = 0; c < 3; ++c) {
    INFO("column " << c);
    double mean = 0.9 * (0.1 * mean_of(column(x, c))) + 0.1 * mean_of(column(x2, c));
    double var = 0.9 * (0.9 * 1.0 + 0.1 * variance_of(column(x, c), 1)) + 0.1 * variance_of(column(x2, c), 1);
    CHECK(running.mean.data()[c] == Approx(mean).margin(1e-6));
    CHECK(running.var.data()[c] == Approx(var).epsilon(1e-5));
  }
}

TEST_CASE("batch_norm_inference normalizes by the running statistics, not the batch's", "[ops][batch_norm]") {
  Rng rng(14);
  Tensor x = random_tensor({4, 2}, rng), w = random_tensor({2}, rng), b = random_tensor({2}, rng);
  BatchNormRunning running{Tensor::from_vector({2}, {0.5f, -1.0f}, Device::host()),
                           Tensor::from_vector({2}, {4.0f, 0.25f}, Device::host())};
  Tensor y = batch_norm_inference(x, w, b, running);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t c = 0; c < 2; ++c) {
      double expected = (x.data()[i * 2 + c] - running.mean.data()[c]) /
                            std::sqrt(double(running.var.data()[c]) + 1e-5) * w.data()[c] + b.data()[c];
      CHECK(y.data()[i * 2 + c] == Approx(expected).margin(1e-5));
    }
  // One row is a batch here: evaluation takes no variance of its own.
  CHECK(batch_norm_inference(x.rows(0, 1), w, b, running).numel() == 2);
}

TEST_CASE("batch_norm refuses one row in training and mismatched parameters, in a sentence", "[ops][batch_norm]") {
  Rng rng(15);
  Tensor x = random_tensor({1, 3}, rng), w = random_tensor({3}, rng), b = random_tensor({3}, rng);
  CHECK_THROWS_WITH(batch_norm(x, w, b), contains_text("at least 2 rows"));
  Tensor x4 = random_tensor({4, 4}, rng);
  CHECK_THROWS_WITH(batch_norm(x4, w, b), contains_text("weight and bias must be (4)"));
}

TEST_CASE("MLP with batch norm: same Linear weights, bn<l> after fc<l>, running statistics in its state",
          "[nn][batch_norm]") {
  Rng plain_rng(3), norm_rng(3);
  MLP plain({4, 5, 6, 3}, Device::host(), plain_rng);
  MLP normed({4, 5, 6, 3}, Device::host(), norm_rng, true);
  std::vector<std::string> names;
  for (const auto& p : normed.named_parameters()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"fc0.weight", "fc0.bias", "bn0.weight", "bn0.bias", "fc1.weight", "fc1.bias",
                                          "bn1.weight", "bn1.bias", "fc2.weight", "fc2.bias"});
  CHECK(normed.named_state().size() == names.size() + 4);  // bn0/bn1 running_mean and running_var
  CHECK(plain.named_state().size() == plain.named_parameters().size());
  for (std::size_t l = 0; l < 3; ++l) {  // batch norm draws no random numbers
    CHECK(max_abs_diff(plain.layers()[l].weight, normed.layers()[l].weight) == 0.0f);
    CHECK(max_abs_diff(plain.layers()[l].bias, normed.layers()[l].bias) == 0.0f);
  }
  Rng rng(4);
  Tensor x = random_tensor({8, 4}, rng, 3.0f);
  // Fresh running statistics (0, 1) are the identity up to eps; training normalizes instead.
  CHECK(max_abs_diff(normed.infer(x), plain.infer(x)) < 1e-4f);
  CHECK(max_abs_diff(normed.forward(x), plain.forward(x)) > 1e-2f);
  // forward moved the running mean of bn0 towards the batch's pre-activation mean.
  CHECK(max_abs_diff(normed.norms()[0].running.mean, Tensor::zeros({5}, Device::host())) > 0.0f);
}
