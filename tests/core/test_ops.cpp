// test_ops.cpp — every differentiable op against finite differences, and the
// forward math against plain loops.
#include "support/catch.h"
#include <cmath>

#include "dpt/nn.h"
#include "dpt/ops.h"
#include "support/gradcheck.h"

using namespace dpt;
using dpt_test::max_relative_error;
using dpt_test::numeric_gradient;
using dpt_test::random_tensor;

namespace {
// Checks d(loss)/d(input) from backward() against finite differences for every input.
void check_all_gradients(const std::function<Tensor()>& loss, std::vector<Tensor> inputs) {
  for (auto& in : inputs) {
    in.set_requires_grad(true);
    in.zero_grad();
  }
  loss().backward();
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    INFO("input " << k << " of shape " << shape_str(inputs[k].shape()));
    REQUIRE(inputs[k].grad().defined());
    auto numeric = numeric_gradient(loss, inputs[k]);
    CHECK(max_relative_error(inputs[k].grad().to_vector(), numeric) < 1e-2);
  }
}

// loss = Σ r ⊙ out: makes every output element matter with an O(1) weight.
Tensor weighted_sum(const Tensor& out, const Tensor& r) { return sum(mul(out, r)); }
}  // namespace

TEST_CASE("matmul gradients match finite differences", "[ops]") {
  Rng rng(1);
  Tensor a = random_tensor({3, 4}, rng), b = random_tensor({4, 5}, rng), r = random_tensor({3, 5}, rng);
  check_all_gradients([&] { return weighted_sum(matmul(a, b), r); }, {a, b});
}

TEST_CASE("matmul forward equals a triple loop", "[ops]") {
  Rng rng(2);
  Tensor a = random_tensor({5, 7}, rng), b = random_tensor({7, 3}, rng);
  Tensor c = matmul(a, b);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) {
      double acc = 0;
      for (int k = 0; k < 7; ++k) acc += double(a.data()[i * 7 + k]) * b.data()[k * 3 + j];
      CHECK(c.data()[i * 3 + j] == Approx(acc).margin(1e-5));
    }
}

TEST_CASE("gemm honours both transpose flags, alpha and beta", "[ops]") {
  Rng rng(3);
  Tensor a = random_tensor({4, 3}, rng), b = random_tensor({5, 4}, rng);  // aᵀ (3,4) · bᵀ (4,5)
  Tensor c = random_tensor({3, 5}, rng);
  Tensor c0 = c.clone();
  gemm(a, true, b, true, c, 2.0f, 0.5f);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += double(a.data()[k * 3 + i]) * b.data()[j * 4 + k];
      CHECK(c.data()[i * 5 + j] == Approx(2 * acc + 0.5 * c0.data()[i * 5 + j]).margin(1e-5));
    }
}

TEST_CASE("linear gradients match finite differences", "[ops]") {
  Rng rng(4);
  Tensor x = random_tensor({6, 4}, rng), w = random_tensor({3, 4}, rng), b = random_tensor({3}, rng);
  Tensor r = random_tensor({6, 3}, rng);
  check_all_gradients([&] { return weighted_sum(linear(x, w, b), r); }, {x, w, b});
}

TEST_CASE("linear forward is x times weight transposed plus bias", "[ops]") {
  Rng rng(5);
  Tensor x = random_tensor({2, 3}, rng), w = random_tensor({4, 3}, rng), b = random_tensor({4}, rng);
  Tensor y = linear(x, w, b);
  REQUIRE(y.shape() == Shape{2, 4});
  for (int i = 0; i < 2; ++i)
    for (int o = 0; o < 4; ++o) {
      double acc = b.data()[o];
      for (int k = 0; k < 3; ++k) acc += double(x.data()[i * 3 + k]) * w.data()[o * 3 + k];
      CHECK(y.data()[i * 4 + o] == Approx(acc).margin(1e-5));
    }
}

TEST_CASE("add, mul and scale gradients match finite differences", "[ops]") {
  Rng rng(6);
  Tensor a = random_tensor({3, 3}, rng), b = random_tensor({3, 3}, rng), r = random_tensor({3, 3}, rng);
  check_all_gradients([&] { return weighted_sum(add(a, b), r); }, {a, b});
  check_all_gradients([&] { return weighted_sum(mul(a, b), r); }, {a, b});
  check_all_gradients([&] { return weighted_sum(scale(a, -1.5f), r); }, {a});
}

TEST_CASE("relu gradient matches finite differences away from the kink", "[ops]") {
  Rng rng(7);
  // |x| ≥ 0.1 > eps = 0.01: a nudge never crosses zero, where relu is not differentiable.
  Tensor x = random_tensor({4, 5}, rng, 1.0f, 0.1f), r = random_tensor({4, 5}, rng);
  check_all_gradients([&] { return weighted_sum(relu(x), r); }, {x});
}

TEST_CASE("relu at exactly 0 outputs 0 and passes no gradient (PyTorch's convention)", "[ops]") {
  // relu is not differentiable at 0; dpt picks the subgradient 0, as PyTorch's
  // relu backward does (it masks with x > 0). Finite differences cannot pin this
  // (a central difference at the kink gives 1/2), so it is pinned by hand:
  // d/dx Σ r ⊙ relu(x) is r where x > 0 and 0 elsewhere, with exact values.
  Tensor x = Tensor::from_vector({5}, {-1.0f, -0.0f, 0.0f, 1e-30f, 2.0f}, Device::host());
  Tensor r = Tensor::from_vector({5}, {3.0f, 5.0f, 7.0f, 11.0f, 13.0f}, Device::host());
  x.set_requires_grad(true);
  Tensor y = relu(x);
  CHECK(y.to_vector() == std::vector<float>{0.0f, 0.0f, 0.0f, 1e-30f, 2.0f});
  weighted_sum(y, r).backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().to_vector() == std::vector<float>{0.0f, 0.0f, 0.0f, 11.0f, 13.0f});
}

TEST_CASE("sum and mean gradients match finite differences", "[ops]") {
  Rng rng(8);
  Tensor x = random_tensor({3, 4}, rng), r = random_tensor({3, 4}, rng);
  check_all_gradients([&] { return scale(sum(mul(x, x)), 0.5f); }, {x});
  check_all_gradients([&] { return scale(mean(mul(x, r)), 12.0f); }, {x});
}

TEST_CASE("softmax cross-entropy gradient matches finite differences", "[ops]") {
  Rng rng(9);
  Tensor z = random_tensor({5, 4}, rng, 2.0f);
  std::vector<int64_t> labels = {0, 3, 1, 1, 2};
  // ×B makes the per-element gradient O(1) instead of O(1/B).
  check_all_gradients([&] { return scale(softmax_cross_entropy(z, labels), 5.0f); }, {z});
}

TEST_CASE("softmax cross-entropy value equals the log-sum-exp formula", "[ops]") {
  Tensor z = Tensor::from_vector({2, 3}, {1, 2, 3, 1000, 0, -1000}, Device::host());
  float loss = softmax_cross_entropy(z, {2, 0}).item();
  double row0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0;
  double row1 = 0.0;  // logit 1000 dominates: −log softmax = 0 (and no overflow)
  CHECK(loss == Approx((row0 + row1) / 2).epsilon(1e-6));
}

TEST_CASE("mse loss value and gradient", "[ops]") {
  Rng rng(10);
  Tensor p = random_tensor({3, 2}, rng), t = random_tensor({3, 2}, rng);
  double expected = 0;
  for (int i = 0; i < 6; ++i) expected += std::pow(double(p.data()[i]) - t.data()[i], 2) / 6;
  CHECK(mse_loss(p, t).item() == Approx(expected).epsilon(1e-6));
  check_all_gradients([&] { return scale(mse_loss(p, t), 6.0f); }, {p});
}

TEST_CASE("MLP gradients match finite differences for every parameter", "[ops][nn]") {
  Rng rng(11);
  MLP model({5, 7, 6, 3}, Device::host(), rng);
  Tensor x = random_tensor({4, 5}, rng);
  std::vector<int64_t> labels = {0, 2, 1, 2};
  auto loss = [&] { return scale(softmax_cross_entropy(model.forward(x), labels), 4.0f); };
  loss().backward();
  for (auto& named : model.named_parameters()) {
    INFO(named.name);
    auto numeric = numeric_gradient(loss, named.tensor);
    CHECK(max_relative_error(named.tensor.grad().to_vector(), numeric) < 1e-2);
  }
}

TEST_CASE("shape mismatches are reported with both shapes", "[ops]") {
  Tensor a = Tensor::zeros({2, 3}, Device::host()), b = Tensor::zeros({2, 3}, Device::host());
  CHECK_THROWS_WITH(matmul(a, b), contains_text("(2, 3)") && contains_text("inner sizes differ"));
  CHECK_THROWS_WITH(softmax_cross_entropy(a, {0}), contains_text("2 rows of logits but 1 labels"));
  CHECK_THROWS_WITH(softmax_cross_entropy(a, {0, 3}), contains_text("label 3"));
}
