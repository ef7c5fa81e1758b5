// test_kernels.cpp — the CPU kernels (kernels.h on host memory) against plain
// serial math written here, in double where rounding matters, sharing nothing
// with kernel_math.h. The GPU kernels are compared with these in
// tests/gpu/test_gpu_ops.cpp, so what is pinned here pins both.
#include <cmath>
#include <limits>
#include <vector>

#include "dpt/device.h"
#include "dpt/kernels.h"
#include "dpt/nn.h"
#include "support/catch.h"
#include "support/gemm_offsets.h"

using namespace dpt;

namespace {
std::vector<float> random_values(std::size_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = scale * (2.0f * rng.uniform() - 1.0f);
  return v;
}

// op(x)[i][j] for x stored row-major with `cols` columns, transposed or not.
double at(const std::vector<float>& x, int64_t cols, bool transposed, int64_t i, int64_t j) {
  return transposed ? x[std::size_t(j * cols + i)] : x[std::size_t(i * cols + j)];
}
}  // namespace

// ----------------------------------------------------------------------------
// BLAS

TEST_CASE("cpu gemm matches a triple loop for all four transpose combinations, with alpha and beta", "[kernels]") {
  // m, n, k all different, so a swapped flag or leading dimension reads the
  // wrong element (or the wrong count of them) and misses by O(1).
  const int64_t m = 5, n = 7, k = 9;
  const float alpha = 0.75f, beta = -0.5f;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      auto a = random_values(std::size_t(m * k), 1);
      auto b = random_values(std::size_t(k * n), 2);
      auto c = random_values(std::size_t(m * n), 3);
      std::vector<float> out = c;
      cpu_kernels().gemm(ta, tb, m, n, k, alpha, a.data(), b.data(), beta, out.data());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t p = 0; p < k; ++p) dot += at(a, ta ? m : k, ta, i, p) * at(b, tb ? k : n, tb, p, j);
          double expected = alpha * dot + beta * c[std::size_t(i * n + j)];
          // |terms| ≤ 1, k = 9 float products and sums: error ≤ ~k·2⁻²⁴·9 ≈ 5e-6.
          INFO("transpose_a " << ta << " transpose_b " << tb << " at (" << i << ", " << j << ")");
          REQUIRE(std::fabs(out[std::size_t(i * n + j)] - expected) < 1e-5);
        }
    }
}

TEST_CASE("cpu gemm with beta 0 overwrites c, NaNs included, and with k = 0 only scales c", "[kernels]") {
  std::vector<float> a = {1, 2}, b = {3, 4};  // (1, 2) · (2, 1)
  std::vector<float> c = {std::numeric_limits<float>::quiet_NaN()};
  cpu_kernels().gemm(false, false, 1, 1, 2, 1.0f, a.data(), b.data(), 0.0f, c.data());
  CHECK(c[0] == 11.0f);
  c = {4.0f};
  cpu_kernels().gemm(false, false, 1, 1, 0, 1.0f, a.data(), b.data(), 0.5f, c.data());
  CHECK(c[0] == 2.0f);
}

TEST_CASE("cpu axpy, scale, fill and the elementwise kernels compute their one formula", "[kernels]") {
  std::vector<float> x = {1.5f, -2.0f, 0.25f}, y = {0.5f, 4.0f, -1.0f}, out(3);
  Kernels& k = cpu_kernels();
  k.add(out.data(), x.data(), y.data(), 3);
  CHECK(out == std::vector<float>{2.0f, 2.0f, -0.75f});
  k.sub(out.data(), x.data(), y.data(), 3);
  CHECK(out == std::vector<float>{1.0f, -6.0f, 1.25f});
  k.mul(out.data(), x.data(), y.data(), 3);
  CHECK(out == std::vector<float>{0.75f, -8.0f, -0.25f});
  k.scaled_copy(out.data(), x.data(), 2.0f, 3);
  CHECK(out == std::vector<float>{3.0f, -4.0f, 0.5f});
  k.axpy(out.data(), -1.0f, x.data(), 3);  // 2x − x
  CHECK(out == x);
  k.scale(out.data(), 4.0f, 3);
  CHECK(out == std::vector<float>{6.0f, -8.0f, 1.0f});
  k.fill(out.data(), 7.0f, 3);
  CHECK(out == std::vector<float>{7.0f, 7.0f, 7.0f});
  // divide is a division: 1/3 as a float times x is not x / 3 for every x
  std::vector<float> q = {1.0f, 10.0f, 0.7f, -5.0f};
  k.divide(q.data(), 3.0f, 4);
  CHECK(q == std::vector<float>{1.0f / 3.0f, 10.0f / 3.0f, 0.7f / 3.0f, -5.0f / 3.0f});
}

TEST_CASE("cpu kernels scaled by a device scalar compute scalar * multiplier / divisor", "[kernels]") {
  float scalar = 3.0f;
  std::vector<float> a = {1.0f, -2.0f}, out(2);
  cpu_kernels().scale_by_scalar(out.data(), a.data(), &scalar, 2.0f, 4.0f, 2);  // factor 3·2/4 = 1.5
  CHECK(out == std::vector<float>{1.5f, -3.0f});
  cpu_kernels().fill_from_scalar(out.data(), &scalar, 1.0f, 6.0f, 2);
  CHECK(out == std::vector<float>{0.5f, 0.5f});
}

TEST_CASE("cpu relu keeps positives, and its backward passes dout only where x > 0", "[kernels]") {
  std::vector<float> x = {-1.0f, 0.0f, 2.5f}, dout = {10.0f, 20.0f, 30.0f}, out(3);
  cpu_kernels().relu(out.data(), x.data(), 3);
  CHECK(out == std::vector<float>{0.0f, 0.0f, 2.5f});
  cpu_kernels().relu_backward(out.data(), x.data(), dout.data(), 3);
  CHECK(out == std::vector<float>{0.0f, 0.0f, 30.0f});  // relu'(0) = 0, as PyTorch
}

// ----------------------------------------------------------------------------
// rows, columns and reductions

TEST_CASE("cpu add_bias adds the bias to every row and sum_rows sums every column", "[kernels]") {
  std::vector<float> y = {1, 2, 3, 4, 5, 6}, bias = {10, 20, 30}, dbias(3);  // (2, 3)
  cpu_kernels().add_bias(y.data(), bias.data(), 2, 3);
  CHECK(y == std::vector<float>{11, 22, 33, 14, 25, 36});
  cpu_kernels().sum_rows(dbias.data(), y.data(), 2, 3);
  CHECK(dbias == std::vector<float>{25, 47, 69});
}

TEST_CASE("cpu sum and sum_squares match a double loop to float rounding", "[kernels]") {
  auto x = random_values(1000, 4);
  double sum = 0, squares = 0;
  for (float v : x) {
    sum += v;
    squares += double(v) * v;
  }
  float got_sum = 0, got_squares = 0;
  cpu_kernels().sum(&got_sum, x.data(), int64_t(x.size()));
  cpu_kernels().sum_squares(&got_squares, x.data(), int64_t(x.size()));
  // 1000 float additions of |terms| ≤ 1: error ≤ 1000·2⁻²⁴·1000 ≈ 6e-2 worst
  // case, ~1e-4 in practice; 1e-3 still catches a dropped or doubled element.
  CHECK(std::fabs(got_sum - sum) < 1e-3);
  CHECK(std::fabs(got_squares - squares) < 1e-3);
}

// ----------------------------------------------------------------------------
// softmax-cross-entropy

TEST_CASE("cpu softmax-cross-entropy: probabilities, mean loss and gradient match the formulas", "[kernels]") {
  const int64_t rows = 3, classes = 4;
  auto logits = random_values(std::size_t(rows * classes), 5, 3.0f);
  std::vector<int64_t> labels = {2, 0, 3};
  std::vector<float> probs(logits.size()), dlogits(logits.size());
  float loss = 0, dloss = 0.5f;
  cpu_kernels().softmax_cross_entropy(probs.data(), &loss, logits.data(), labels.data(), rows, classes);
  cpu_kernels().softmax_cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), &dloss, rows, classes);
  double expected_loss = 0;
  for (int64_t i = 0; i < rows; ++i) {
    double denom = 0;  // small logits: no max subtraction needed here
    for (int64_t c = 0; c < classes; ++c) denom += std::exp(double(logits[std::size_t(i * classes + c)]));
    for (int64_t c = 0; c < classes; ++c) {
      std::size_t at_ic = std::size_t(i * classes + c);
      double p = std::exp(double(logits[at_ic])) / denom;
      CHECK(probs[at_ic] == Approx(p).epsilon(1e-6));
      CHECK(dlogits[at_ic] == Approx((p - (c == labels[std::size_t(i)] ? 1.0 : 0.0)) * dloss / rows).margin(1e-7));
    }
    expected_loss -= std::log(std::exp(double(logits[std::size_t(i * classes + labels[std::size_t(i)])])) / denom);
  }
  CHECK(loss == Approx(expected_loss / rows).epsilon(1e-6));
}

TEST_CASE("cpu softmax-cross-entropy stays finite for logits whose exp overflows a float", "[kernels]") {
  std::vector<float> logits = {1000.0f, 999.0f}, probs(2);
  std::vector<int64_t> labels = {1};
  float loss = 0;
  cpu_kernels().softmax_cross_entropy(probs.data(), &loss, logits.data(), labels.data(), 1, 2);
  // −log softmax = log(1 + e) for the smaller of two logits one apart.
  CHECK(loss == Approx(std::log(1.0 + std::exp(1.0))).epsilon(1e-6));
  CHECK(probs[0] == Approx(1.0 / (1.0 + std::exp(-1.0))).epsilon(1e-6));
}

// ----------------------------------------------------------------------------
// optimizers: two steps each, values worked out by hand from the update rules

TEST_CASE("cpu sgd_step subtracts lr * (g + weight_decay * p)", "[kernels]") {
  std::vector<float> p = {2.0f}, g = {1.0f};
  cpu_kernels().sgd_step(p.data(), g.data(), 0.1f, 0.5f, 1);  // 2 − 0.1·(1 + 1) = 1.8
  CHECK(p[0] == Approx(1.8f).epsilon(1e-6));
}

TEST_CASE("cpu momentum_step starts the velocity at d and then decays it", "[kernels]") {
  std::vector<float> p = {1.0f}, v = {123.0f}, g = {1.0f};  // v's old value must be ignored on the first step
  cpu_kernels().momentum_step(p.data(), v.data(), g.data(), 0.1f, 0.9f, 0.0f, true, 1);
  CHECK(v[0] == 1.0f);  // v = g
  CHECK(p[0] == Approx(0.9f).epsilon(1e-6));
  g[0] = 0.5f;
  cpu_kernels().momentum_step(p.data(), v.data(), g.data(), 0.1f, 0.9f, 0.0f, false, 1);
  CHECK(v[0] == Approx(1.4f).epsilon(1e-6));  // 0.9·1 + 0.5
  CHECK(p[0] == Approx(0.76f).epsilon(1e-6));  // 0.9 − 0.1·1.4
}

TEST_CASE("cpu adam_step: bias-corrected moments, L2 or decoupled weight decay", "[kernels]") {
  // Reference: the update written out in double, step by step.
  auto reference = [](double p, double g, int steps, double lr, double wd, bool decoupled) {
    double m = 0, v = 0;
    for (int t = 1; t <= steps; ++t) {
      double d = g;
      if (decoupled) p *= 1 - lr * wd;
      else d += wd * p;
      m = 0.9 * m + 0.1 * d;
      v = 0.999 * v + 0.001 * d * d;
      double m_hat = m / (1 - std::pow(0.9, t)), v_hat = v / (1 - std::pow(0.999, t));
      p -= lr * m_hat / (std::sqrt(v_hat) + 1e-8);
    }
    return p;
  };
  for (bool decoupled : {false, true})
    for (float wd : {0.0f, 0.1f}) {
      std::vector<float> p = {1.0f}, m = {0.0f}, v = {0.0f}, g = {0.5f};
      for (int t = 1; t <= 2; ++t) {
        AdamStep s;
        s.lr = 0.1f;
        s.weight_decay = wd;
        s.decoupled = decoupled;
        s.correction1 = 1.0f - std::pow(0.9f, float(t));
        s.correction2 = 1.0f - std::pow(0.999f, float(t));
        cpu_kernels().adam_step(p.data(), m.data(), v.data(), g.data(), s, 1);
      }
      INFO("decoupled " << decoupled << " weight decay " << wd);
      // Without the corrections the first step would move p by lr·0.05/(0.0158+ε) ≈ 0.32, not ≈ 0.1.
      CHECK(p[0] == Approx(reference(1.0, 0.5, 2, 0.1, wd, decoupled)).epsilon(1e-5));
    }
}

// ----------------------------------------------------------------------------
// results for the host

TEST_CASE("cpu count_correct takes the first of tied maxima and never matches a label out of range", "[kernels]") {
  std::vector<float> logits = {0.1f, 0.9f, 0.9f,   // first max at 1
                               2.0f, -1.0f, 0.0f,  // max at 0
                               0.0f, 0.0f, 5.0f};  // max at 2
  CHECK(cpu_kernels().count_correct(logits.data(), std::vector<int64_t>{1, 0, 2}.data(), 3, 3) == 3);
  CHECK(cpu_kernels().count_correct(logits.data(), std::vector<int64_t>{2, 0, 7}.data(), 3, 3) == 1);
}

TEST_CASE("cpu max_abs_diff is the largest |a - b| and NaN when any difference is NaN", "[kernels]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> a = {1.0f, 2.0f, 3.0f}, b = {1.5f, 2.0f, 1.0f};
  CHECK(cpu_kernels().max_abs_diff(a.data(), b.data(), 3) == 2.0f);
  CHECK(cpu_kernels().max_abs_diff(a.data(), b.data(), 0) == 0.0f);
  for (std::size_t where : {0, 1, 2}) {  // before, between and after the largest difference
    std::vector<float> with_nan = a;
    with_nan[where] = nan;
    INFO("NaN at " << where);
    CHECK(std::isnan(cpu_kernels().max_abs_diff(with_nan.data(), b.data(), 3)));
  }
  std::vector<float> infs = {inf}, same_infs = {inf};
  CHECK(std::isnan(cpu_kernels().max_abs_diff(infs.data(), same_infs.data(), 1)));  // inf − inf
}

TEST_CASE("kernels_for gives host and cpu:k the CPU kernels, and TF32 starts off", "[kernels]") {
  CHECK(&kernels_for(Device::host()) == &cpu_kernels());
  CHECK(&kernels_for(Device::cpu(1)) == &cpu_kernels());
  CHECK_FALSE(tf32());
  set_tf32(true);
  CHECK(tf32());
  set_tf32(false);
}

TEST_CASE("cpu gemm gives the same bits wherever its operands start (views at 4 to 64 bytes in)", "[kernels]") {
  // ch07's layers are views at odd offsets in stages 0-2 and fresh blocks in
  // stage 3; its bit-equal stages need this (support/gemm_offsets.h).
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("transpose a " << ta << ", transpose b " << tb);
      CHECK(dpt_test::gemm_offset_mismatches(dpt::Device::cpu(0), ta, tb, 33, 65, 129, 0.0f) == 0);
      CHECK(dpt_test::gemm_offset_mismatches(dpt::Device::cpu(0), ta, tb, 64, 256, 784, 0.5f) == 0);
    }
}
