// test_transformer_ops.cpp — chapter 14's ops (ops.h, "a transformer's ops")
// on the CPU: every input's gradient against central finite differences, each
// forward against plain loops written here (in double, sharing no code with
// the kernels), the laws a wrong backward breaks, and bad input.
//
// Shapes are odd on purpose (T = 5, 3 heads, width 7): a loop that mixes up
// two sizes cannot pass by their being equal.
//
// Forward tolerance, argued: the kernels compute in float (u ≈ 6e-8) over
// rows of ≤ 7 entries of O(1) values (exp of O(3), layer norm's rstd of O(1)),
// so they differ from the double oracles by a few u·O(10) ≈ 1e-6; 1e-5
// absolute is ~10× above that and ~10⁴× below a wrong index or a dropped term
// (O(0.1) and up). Gradients: gradcheck.h's 1e-2 relative, argued there.
#include "support/catch.h"
#include <cmath>
#include <limits>

#include "dpt/kernels.h"
#include "dpt/ops.h"
#include "support/gradcheck.h"

using namespace dpt;
using dpt_test::gradient_errors;
using dpt_test::random_tensor;

namespace {
constexpr double kForwardTolerance = 1e-5;
constexpr double kGradientTolerance = 1e-2;

// loss = Σ r ⊙ out: every output element matters, with an O(1) weight.
Tensor weighted_sum(const Tensor& out, const Tensor& r) { return sum(mul(out, r)); }

// Every entry of `errors` (one per input) within the gradient tolerance.
void check_gradients(const std::vector<double>& errors, const std::vector<const char*>& names) {
  for (std::size_t k = 0; k < errors.size(); ++k) {
    INFO("d loss / d " << names[k] << " against central finite differences (max relative error)");
    CHECK(errors[k] < kGradientTolerance);
  }
}

// Largest |got − want| over all entries.
double max_error(const Tensor& got, const std::vector<double>& want) {
  std::vector<float> g = got.to_vector();
  REQUIRE(g.size() == want.size());
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(double(g[i]) - want[i]));
  return worst;
}
}  // namespace

// ----------------------------------------------------------------------------
// batched_matmul

TEST_CASE("batched_matmul is one product per matrix, for every transpose flag and alpha", "[ops][transformer]") {
  Rng rng(21);
  const int64_t g = 3, m = 5, k = 4, n = 6;
  for (int flags = 0; flags < 4; ++flags) {
    bool ta = flags & 1, tb = flags & 2;
    INFO("transpose_a " << ta << ", transpose_b " << tb);
    Tensor a = random_tensor(ta ? Shape{g, k, m} : Shape{g, m, k}, rng);
    Tensor b = random_tensor(tb ? Shape{g, n, k} : Shape{g, k, n}, rng);
    Tensor c = batched_matmul(a, ta, b, tb, 0.5f);
    REQUIRE(c.shape() == Shape{g, m, n});
    std::vector<double> want;
    for (int64_t s = 0; s < g; ++s)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t q = 0; q < k; ++q) {
            double av = a.data()[s * m * k + (ta ? q * m + i : i * k + q)];
            double bv = b.data()[s * k * n + (tb ? j * k + q : q * n + j)];
            acc += av * bv;
          }
          want.push_back(0.5 * acc);
        }
    CHECK(max_error(c, want) < kForwardTolerance);
  }
}

TEST_CASE("batched_matmul gradients match finite differences for both inputs and every flag", "[ops][transformer]") {
  Rng rng(22);
  for (int flags = 0; flags < 4; ++flags) {
    bool ta = flags & 1, tb = flags & 2;
    INFO("transpose_a " << ta << ", transpose_b " << tb);
    Tensor a = random_tensor(ta ? Shape{3, 4, 5} : Shape{3, 5, 4}, rng);
    Tensor b = random_tensor(tb ? Shape{3, 2, 4} : Shape{3, 4, 2}, rng), r = random_tensor({3, 5, 2}, rng);
    check_gradients(gradient_errors([&] { return weighted_sum(batched_matmul(a, ta, b, tb, 0.7f), r); }, {a, b}),
                    {"a", "b"});
  }
}

TEST_CASE("gemm_batched honours strides wider than a matrix, alpha and beta", "[kernels][transformer]") {
  // Strides with gaps: matrix i starts at i·stride, and the gaps are never touched.
  const int64_t m = 2, n = 3, k = 4, batch = 3, sa = m * k + 1, sb = k * n + 2, sc = m * n + 3;
  std::vector<float> a(batch * sa), b(batch * sb), c(batch * sc, 7.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i % 5) - 2.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(i % 7) * 0.5f - 1.0f;
  std::vector<float> before = c;
  cpu_kernels().gemm_batched(false, false, m, n, k, 2.0f, a.data(), sa, b.data(), sb, 0.5f, c.data(), sc, batch);
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t e = 0; e < sc; ++e) {
      int64_t i = e / n, j = e % n;
      if (e >= m * n) {  // a gap between two matrices of c
        CHECK(c[s * sc + e] == before[s * sc + e]);
        continue;
      }
      double acc = 0;
      for (int64_t q = 0; q < k; ++q) acc += double(a[s * sa + i * k + q]) * b[s * sb + q * n + j];
      CHECK(c[s * sc + e] == Approx(2.0 * acc + 0.5 * before[s * sc + e]).margin(kForwardTolerance));
    }
}

// ----------------------------------------------------------------------------
// embedding

TEST_CASE("embedding's row i is the table's row tokens[i]", "[ops][transformer]") {
  Rng rng(23);
  Tensor table = random_tensor({6, 4}, rng);
  std::vector<int64_t> tokens = {2, 5, 2, 0, 2, 5, 1};
  Tensor out = embedding(table, tokens);
  REQUIRE(out.shape() == Shape{7, 4});
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t j = 0; j < 4; ++j) CHECK(out.data()[i * 4 + j] == table.data()[tokens[i] * 4 + j]);
}

TEST_CASE("embedding's gradient adds every occurrence of a repeated token into its row", "[ops][transformer]") {
  Rng rng(24);
  Tensor table = random_tensor({6, 4}, rng);
  std::vector<int64_t> tokens = {2, 5, 2, 0, 2, 5};  // 2 three times, 5 twice; rows 1, 3, 4 unused
  Tensor r = random_tensor({6, 4}, rng);
  table.set_requires_grad(true);
  weighted_sum(embedding(table, tokens), r).backward();
  REQUIRE(table.grad().defined());
  std::vector<double> want(6 * 4, 0.0);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    for (int64_t j = 0; j < 4; ++j) want[tokens[i] * 4 + j] += r.data()[i * 4 + j];
  INFO("a row whose token repeats must hold the sum of all its occurrences' gradients, an unused row 0");
  CHECK(max_error(table.grad(), want) < kForwardTolerance);
  check_gradients(gradient_errors([&] { return weighted_sum(embedding(table, tokens), r); }, {table}), {"table"});
}

// ----------------------------------------------------------------------------
// layer_norm

TEST_CASE("layer_norm normalizes each row of a 3-D x, then scales and shifts", "[ops][transformer]") {
  Rng rng(25);
  const int64_t rows = 2 * 5, c = 7;
  Tensor x = random_tensor({2, 5, c}, rng, 2.0f), w = random_tensor({c}, rng), b = random_tensor({c}, rng);
  for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] += 3.0f;  // a mean far from 0
  Tensor out = layer_norm(x, w, b);
  REQUIRE(out.shape() == x.shape());
  std::vector<double> want;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < c; ++j) mean += x.data()[r * c + j] / double(c);
    for (int64_t j = 0; j < c; ++j) var += std::pow(x.data()[r * c + j] - mean, 2) / double(c);
    for (int64_t j = 0; j < c; ++j)
      want.push_back((x.data()[r * c + j] - mean) / std::sqrt(var + 1e-5) * w.data()[j] + b.data()[j]);
  }
  CHECK(max_error(out, want) < kForwardTolerance);
}

TEST_CASE("layer_norm gradients for x, weight and bias match finite differences", "[ops][transformer]") {
  Rng rng(26);
  Tensor x = random_tensor({2, 5, 7}, rng), w = random_tensor({7}, rng), b = random_tensor({7}, rng);
  Tensor r = random_tensor({2, 5, 7}, rng);
  check_gradients(gradient_errors([&] { return weighted_sum(layer_norm(x, w, b), r); }, {x, w, b}),
                  {"x", "weight", "bias"});
}

TEST_CASE("layer_norm's dx is blind to shifting a row: each row of dx sums to 0", "[ops][transformer]") {
  // out depends on x only through x − mean(x): adding a constant to a row
  // changes nothing, so the gradient has no component along (1, …, 1). The
  // term the row's mean contributes to the backward is what ensures it.
  Rng rng(27);
  Tensor x = random_tensor({3, 7}, rng), w = random_tensor({7}, rng), b = random_tensor({7}, rng);
  Tensor r = random_tensor({3, 7}, rng);
  x.set_requires_grad(true);
  weighted_sum(layer_norm(x, w, b), r).backward();
  std::vector<float> dx = x.grad().to_vector();
  for (int row = 0; row < 3; ++row) {
    double total = 0, size = 0;
    for (int j = 0; j < 7; ++j) total += dx[row * 7 + j], size += std::abs(dx[row * 7 + j]);
    INFO("row " << row << ": Σ dx = " << total << " (the mean's term in the backward is missing or wrong)");
    CHECK(std::abs(total) <= 1e-5 * size);  // float rounding of 7 terms: ~1e-7·size
  }
}

// ----------------------------------------------------------------------------
// gelu

TEST_CASE("gelu is GPT-2's tanh form, and its gradient matches finite differences", "[ops][transformer]") {
  Rng rng(28);
  // 903 elements: the CPU works in blocks of 256, so a partial block and its neighbours are covered.
  Tensor x = random_tensor({3, 301}, rng, 2.0f), r = random_tensor({3, 301}, rng);
  std::vector<double> want;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.data()[i];
    want.push_back(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  CHECK(max_error(gelu(x), want) < kForwardTolerance);
  check_gradients(gradient_errors([&] { return weighted_sum(gelu(x), r); }, {x}), {"x"});
}

// ----------------------------------------------------------------------------
// softmax

namespace {
// Softmax of each row of x (rows, cols) in double; causal: row r is query
// r mod cols and sees keys j ≤ r mod cols, the rest 0.
std::vector<double> softmax_oracle(const Tensor& x, int64_t rows, int64_t cols, bool causal) {
  std::vector<double> y(rows * cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t seen = causal ? r % cols + 1 : cols;
    double max = -std::numeric_limits<double>::infinity(), total = 0;
    for (int64_t j = 0; j < seen; ++j) max = std::max(max, double(x.data()[r * cols + j]));
    for (int64_t j = 0; j < seen; ++j) total += std::exp(x.data()[r * cols + j] - max);
    for (int64_t j = 0; j < seen; ++j) y[r * cols + j] = std::exp(x.data()[r * cols + j] - max) / total;
  }
  return y;
}
}  // namespace

TEST_CASE("softmax normalizes each row over the last axis, safely for large scores", "[ops][transformer]") {
  Rng rng(29);
  Tensor x = random_tensor({2, 3, 7}, rng, 3.0f);
  x.data()[0] = 1000.0f;  // exp(1000) overflows a float: only x − max is safe
  x.data()[1] = 999.0f;
  Tensor y = softmax(x);
  REQUIRE(y.shape() == x.shape());
  CHECK(max_error(y, softmax_oracle(x, 6, 7, false)) < kForwardTolerance);
}

TEST_CASE("causal softmax: query i attends to keys j <= i, its own position included, nothing after",
          "[ops][transformer]") {
  Rng rng(30);
  const int64_t t = 5;
  Tensor x = random_tensor({2, 3, t, t}, rng, 3.0f);  // batch 2, heads 3, T = 5
  Tensor y = softmax(x, true);
  CHECK(max_error(y, softmax_oracle(x, 2 * 3 * t, t, true)) < kForwardTolerance);
  for (int64_t r = 0; r < 2 * 3 * t; ++r)
    for (int64_t j = r % t + 1; j < t; ++j) {
      INFO("query " << r % t << " must give key " << j << " (later in time) probability exactly 0");
      CHECK(y.data()[r * t + j] == 0.0f);
    }
}

TEST_CASE("causal softmax: masked scores get probability 0 and gradient 0 whatever they hold (inf, 1e30, NaN)",
          "[ops][transformer]") {
  Rng rng(31);
  const int64_t t = 5, rows = 3 * t;
  Tensor clean = random_tensor({3, t, t}, rng), r = random_tensor({3, t, t}, rng);
  Tensor x = clean.clone();
  const float junk[3] = {std::numeric_limits<float>::infinity(), 1e30f, std::numeric_limits<float>::quiet_NaN()};
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t j = row % t + 1; j < t; ++j) x.data()[row * t + j] = junk[row / t];
  x.set_requires_grad(true);
  Tensor y = softmax(x, true);
  CHECK(y.to_vector() == softmax(clean, true).to_vector());  // bit for bit: masked entries are never read
  weighted_sum(y, r).backward();
  std::vector<float> dx = x.grad().to_vector();
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t j = 0; j < t; ++j) {
      INFO("query " << row % t << ", key " << j);
      if (j > row % t) CHECK(dx[row * t + j] == 0.0f);
      else CHECK(std::isfinite(dx[row * t + j]));
    }
}

TEST_CASE("softmax gradients match finite differences, with and without the causal mask", "[ops][transformer]") {
  Rng rng(32);
  Tensor x = random_tensor({2, 3, 5, 5}, rng, 2.0f), r = random_tensor({2, 3, 5, 5}, rng);
  check_gradients(gradient_errors([&] { return weighted_sum(softmax(x, false), r); }, {x}), {"x (no mask)"});
  check_gradients(gradient_errors([&] { return weighted_sum(softmax(x, true), r); }, {x}), {"x (causal)"});
}

// ----------------------------------------------------------------------------
// swap_axes_12 and columns

TEST_CASE("swap_axes_12 moves element (i, j, k, l) to (i, k, j, l)", "[ops][transformer]") {
  Rng rng(33);
  const int64_t a = 2, b = 3, c = 5, d = 4;
  Tensor x = random_tensor({a, b, c, d}, rng), r = random_tensor({a, c, b, d}, rng);
  Tensor y = swap_axes_12(x);
  REQUIRE(y.shape() == Shape{a, c, b, d});
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t l = 0; l < d; ++l) {
          INFO("x[" << i << "][" << j << "][" << k << "][" << l << "] must land at y[" << i << "][" << k << "]["
                    << j << "][" << l << "]");
          CHECK(y.data()[((i * c + k) * b + j) * d + l] == x.data()[((i * b + j) * c + k) * d + l]);
        }
  check_gradients(gradient_errors([&] { return weighted_sum(swap_axes_12(x), r); }, {x}), {"x"});
}

TEST_CASE("columns copies a block of columns, and its gradient lands only there", "[ops][transformer]") {
  Rng rng(34);
  Tensor x = random_tensor({5, 9}, rng), r = random_tensor({5, 3}, rng);
  Tensor y = columns(x, 4, 3);
  REQUIRE(y.shape() == Shape{5, 3});
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(y.data()[i * 3 + j] == x.data()[i * 9 + 4 + j]);
  check_gradients(gradient_errors([&] { return weighted_sum(columns(x, 4, 3), r); }, {x}), {"x"});
  std::vector<float> dx = x.grad().to_vector();
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 9; ++j) CHECK(dx[i * 9 + j] == (j >= 4 && j < 7 ? r.data()[i * 3 + j - 4] : 0.0f));
}

// ----------------------------------------------------------------------------
// bad input: one sentence each, naming what was expected and what was seen

TEST_CASE("transformer ops refuse bad input with a sentence", "[ops][transformer]") {
  Device& host = Device::host();
  Tensor table = Tensor::zeros({6, 4}, host);
  CHECK_THROWS_WITH(embedding(table, {1, 6, 2}), contains_text("token 6 at index 1") && contains_text("[0, 6)"));
  CHECK_THROWS_WITH(embedding(table, {0, 0, -1}), contains_text("token -1 at index 2"));

  Tensor a = Tensor::zeros({3, 5, 4}, host);
  CHECK_THROWS_WITH(batched_matmul(a, false, Tensor::zeros({2, 4, 6}, host), false),
                    contains_text("a holds 3 matrices, b 2"));
  CHECK_THROWS_WITH(batched_matmul(a, false, Tensor::zeros({3, 5, 6}, host), false),
                    contains_text("inner sizes differ"));
  CHECK_THROWS_WITH(batched_matmul(Tensor::zeros({5, 4}, host), false, a, false), contains_text("must be 3-D"));

  Tensor x = Tensor::zeros({2, 5, 7}, host);
  CHECK_THROWS_WITH(layer_norm(x, Tensor::zeros({5}, host), Tensor::zeros({7}, host)),
                    contains_text("weight (5,)") && contains_text("must both be (7,), x's last size"));
  CHECK_THROWS_WITH(layer_norm(x, Tensor::zeros({7}, host), Tensor()),
                    contains_text("needs both a weight and a bias of size 7"));
  CHECK_THROWS_WITH(softmax(Tensor::zeros({3, 5, 4}, host), true),
                    contains_text("causal mask needs scores (…, T, T)") && contains_text("(3, 5, 4)"));
  CHECK_THROWS_WITH(swap_axes_12(x), contains_text("must be 4-D"));
  CHECK_THROWS_WITH(columns(Tensor::zeros({5, 9}, host), 7, 3), contains_text("[7, 10) is outside x's 9 columns"));
}
