// test_ch01_backward.cpp — chapter 01's two backward holes: linear_backward
// against hand arithmetic and finite differences of the layer, and
// softmax_cross_entropy_backward against finite differences of the loss in
// double and autograd through dpt::softmax_cross_entropy.
#include "support/catch.h"
#include <cmath>
#include <sstream>
#include <string>

#include "ch01.h"
#include "dpt/check.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "support/gradcheck.h"

using namespace dpt;
using dpt_test::max_relative_error;
using dpt_test::numeric_gradient;
using dpt_test::random_tensor;

TEST_CASE("linear_backward: returns (B,in), (out,in) and (out) gradients", "[ch01]") {
  Rng rng(2);
  Tensor x = random_tensor({4, 3}, rng), w = random_tensor({5, 3}, rng), dy = random_tensor({4, 5}, rng);
  ch01::LinearGrads g = ch01::linear_backward(x, w, dy);
  INFO("each gradient has the shape of what it is the gradient of: dx like x (4, 3), dweight like weight "
       "(5, 3), dbias like bias (5); got dx " << (g.dx.defined() ? shape_str(g.dx.shape()) : "undefined")
       << ", dweight " << (g.dweight.defined() ? shape_str(g.dweight.shape()) : "undefined") << ", dbias "
       << (g.dbias.defined() ? shape_str(g.dbias.shape()) : "undefined"));
  REQUIRE(g.dx.defined());
  REQUIRE(g.dweight.defined());
  REQUIRE(g.dbias.defined());
  CHECK(g.dx.shape() == Shape{4, 3});
  CHECK(g.dweight.shape() == Shape{5, 3});
  CHECK(g.dbias.shape() == Shape{5});
}

TEST_CASE("linear_backward: dx, dweight and dbias equal the chain rule worked by hand", "[ch01]") {
  // x (2, 2), weight (3, 2), dy (2, 3); small integers, so every product and
  // sum is exact in float and == is the right comparison.
  Tensor x = Tensor::from_vector({2, 2}, {1, 2, 3, 4}, Device::host());
  Tensor w = Tensor::from_vector({3, 2}, {1, 0, -1, 2, 0, 3}, Device::host());
  Tensor dy = Tensor::from_vector({2, 3}, {1, -1, 2, 0, 1, -2}, Device::host());
  ch01::LinearGrads g = ch01::linear_backward(x, w, dy);
  REQUIRE(g.dx.shape() == Shape{2, 2});
  REQUIRE(g.dweight.shape() == Shape{3, 2});
  REQUIRE(g.dbias.shape() == Shape{3});
  // Worked out in docs/instructor/ch01_key.md: dx (2, 4, -1, -4); dweight
  // (1, 2, 2, 2, -4, -4); dbias (1, 0, 0).
  {
    INFO("dx is not d loss / d x: input x[b][k] reaches every output y[b][o] of its own row, through weight[o][k]");
    CHECK(g.dx.to_vector() == std::vector<float>{2, 4, -1, -4});
  }
  {
    INFO("dweight is not d loss / d weight: weight[o][k] is used by every sample of the batch");
    CHECK(g.dweight.to_vector() == std::vector<float>{1, 2, 2, 2, -4, -4});
  }
  {
    INFO("dbias is not d loss / d bias: bias[o] is added to y[b][o] for every sample b of the batch");
    CHECK(g.dbias.to_vector() == std::vector<float>{1, 0, 0});
  }
}

TEST_CASE("linear_backward: matches finite differences of the layer", "[ch01]") {
  // With loss = Σ dy ⊙ (x·wᵀ + b), d loss/d y = dy exactly, so the finite
  // differences of this loss are the true dx, dweight, dbias. Square weight
  // (4, 4) too: a transposed dweight has the right shape there.
  for (int64_t out : {3, 4}) {
    Rng rng(3 + uint64_t(out));
    Tensor x = random_tensor({6, 4}, rng), w = random_tensor({out, 4}, rng), b = random_tensor({out}, rng);
    Tensor dy = random_tensor({6, out}, rng);
    auto loss = [&] { return sum(mul(linear(x, w, b), dy)); };
    ch01::LinearGrads g = ch01::linear_backward(x, w, dy);
    REQUIRE(g.dx.defined());
    REQUIRE(g.dweight.defined());
    REQUIRE(g.dbias.defined());
    INFO("weight (" << out << ", 4), batch 6; largest |yours - finite difference| / max(1, |fd|) must be below "
         "1e-2 (float32 noise ~1e-3, a wrong formula O(1))");
    {
      INFO("dx is not the gradient of the loss with respect to x");
      CHECK(max_relative_error(g.dx.to_vector(), numeric_gradient(loss, x)) < 1e-2);
    }
    {
      INFO("dweight is not the gradient of the loss with respect to weight (a transposed product has the "
           "right shape when weight is square)");
      CHECK(max_relative_error(g.dweight.to_vector(), numeric_gradient(loss, w)) < 1e-2);
    }
    {
      INFO("dbias is not the gradient of the loss with respect to bias (every sample of the batch adds to it)");
      CHECK(max_relative_error(g.dbias.to_vector(), numeric_gradient(loss, b)) < 1e-2);
    }
  }
}

// ----------------------------------------------------------------------------
// softmax_cross_entropy_backward against finite differences of the loss in
// double, written here from its definition (no code shared with the hole or
// with dpt's own op), and against autograd through dpt::softmax_cross_entropy.

namespace {
// The loss in double: (1/B) Σ_b [log Σ_k exp(z_bk) − z_b,label], the row's
// largest logit taken out of the log-sum-exp so that it is finite for any z.
double loss_in_double(const std::vector<double>& z, const std::vector<int64_t>& labels, int64_t classes) {
  const int64_t batch = int64_t(labels.size());
  double total = 0;
  for (int64_t b = 0; b < batch; ++b) {
    double largest = z[std::size_t(b * classes)];
    for (int64_t c = 1; c < classes; ++c) largest = std::max(largest, z[std::size_t(b * classes + c)]);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(z[std::size_t(b * classes + c)] - largest);
    total += largest + std::log(sum) - z[std::size_t(b * classes + labels[std::size_t(b)])];
  }
  return total / double(batch);
}

// Central differences of loss_in_double with step h = 1e-4: truncation
// h^2/6 times the third derivative, about 1e-9; rounding 1e-16/h, about
// 1e-12: far below float32 results.
std::vector<double> numeric_dlogits(const Tensor& logits, const std::vector<int64_t>& labels) {
  std::vector<float> f = logits.to_vector();
  std::vector<double> z(f.begin(), f.end()), grad(z.size());
  const double h = 1e-4;
  for (std::size_t i = 0; i < z.size(); ++i) {
    const double saved = z[i];
    z[i] = saved + h;
    const double up = loss_in_double(z, labels, logits.size(1));
    z[i] = saved - h;
    const double down = loss_in_double(z, labels, logits.size(1));
    z[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

// The sentence for a NaN/inf entry: the gradient is finite for every finite
// logit, and the row says which way exp() left float's range. exp(z) is inf
// in float above z ≈ 88.7 (inf/inf = NaN) and 0 below z ≈ −103.9 (0/0 =
// NaN); the row's own logits tell which one this row can have met.
std::string not_finite(const Tensor& logits, const std::vector<float>& got, std::size_t i) {
  const int64_t classes = logits.size(1), b = int64_t(i) / classes;
  const float* z = logits.data() + b * classes;
  const float lo = *std::min_element(z, z + classes), hi = *std::max_element(z, z + classes);
  std::ostringstream s;
  s << "dlogits[" << b << "][" << int64_t(i) % classes << "] is " << got[i]
    << ", but the gradient is finite for every finite logit. Row " << b << "'s logits lie in [" << lo << ", " << hi
    << "]. In float, exp() overflows to inf above about 88.7 (then inf/inf is NaN) and underflows to 0 below "
       "about -103.9 (a row whose every exp() is 0 gives 0/0 = NaN). ";
  if (hi > 88.0f)
    s << "This row's logits are large enough to overflow if exp() sees them as they are.";
  else
    s << "This row's logits are too small to overflow: every exp() this row computed must have underflowed to 0. "
         "Whatever is subtracted before exp() was far above this row's own logits.";
  return s.str();
}

// Checks yours against the finite differences and FAILs with a sentence that
// names what is off. The entries are at most 1/B; float32 softmax rounds to
// ~1e-7 of that, so 1e-6 absolute is 10x the noise and far below a mistake.
void check_against_numeric(const Tensor& logits, const std::vector<int64_t>& labels, const std::string& what) {
  Tensor mine = ch01::softmax_cross_entropy_backward(logits, labels);
  const int64_t batch = logits.size(0), classes = logits.size(1);
  INFO(what << ": logits (" << batch << ", " << classes << ")");
  REQUIRE(mine.defined());
  REQUIRE(mine.shape() == logits.shape());
  std::vector<double> numeric = numeric_dlogits(logits, labels);
  std::vector<float> got = mine.to_vector();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) FAIL(not_finite(logits, got, i));
    if (std::fabs(got[i] - numeric[i]) <= 1e-6 + 1e-5 * std::fabs(numeric[i])) continue;
    const int64_t b = int64_t(i) / classes, c = int64_t(i) % classes;
    FAIL("dlogits[" << b << "][" << c << "] is " << got[i] << ", finite differences of the loss give " << numeric[i]
         << (std::fabs(got[i] - batch * numeric[i]) <= 1e-5 * batch
                 ? ": that is B times the gradient. The loss is the mean over the batch, not the sum"
                 : ": not the gradient of the batch's mean loss with respect to that logit"));
  }
}
}  // namespace

TEST_CASE("softmax_cross_entropy_backward: matches finite differences of the mean loss", "[ch01]") {
  Rng rng(11);
  check_against_numeric(random_tensor({4, 5}, rng, 2.0f), {0, 4, 2, 4}, "4 samples, 5 classes");
  check_against_numeric(random_tensor({1, 3}, rng, 2.0f), {1}, "one sample");
  check_against_numeric(random_tensor({3, 1}, rng), {0, 0, 0}, "one class (the loss is 0 whatever the logits)");
}

TEST_CASE("softmax_cross_entropy_backward: each row sums to 0, negative at the label, positive elsewhere", "[ch01]") {
  // softmax(z_b) is positive and sums to 1 over the row; the label's one-hot
  // is 1 at the label: so a row of the gradient sums to 0, raising the
  // label's logit lowers the loss, and raising any other logit raises it.
  Rng rng(12);
  Tensor logits = random_tensor({5, 4}, rng, 2.0f);
  std::vector<int64_t> labels{3, 0, 1, 3, 2};
  std::vector<float> d = ch01::softmax_cross_entropy_backward(logits, labels).to_vector();
  REQUIRE(d.size() == 20);
  for (int64_t b = 0; b < 5; ++b) {
    double row = 0;
    for (int64_t c = 0; c < 4; ++c) {
      const float v = d[std::size_t(b * 4 + c)];
      row += v;
      if (c == labels[std::size_t(b)] && !(v < 0))
        FAIL("row " << b << ": the label's entry is " << v << ", but raising the label's logit must lower the "
             "loss, so its gradient is negative: is the one-hot added rather than subtracted?");
      if (c != labels[std::size_t(b)] && !(v > 0))
        FAIL("row " << b << ", class " << c << " (not the label): the entry is " << v << ", but raising another "
             "class's logit raises the loss, so its gradient is positive");
    }
    if (std::fabs(row) > 1e-6)
      FAIL("row " << b << " of dlogits sums to " << row << ", not 0: a sample's softmax sums to 1 over its own C "
           "classes, as its one-hot does. Is softmax taken over the row (one sample's logits), not over a "
           "column (the batch)?");
  }
}

TEST_CASE("softmax_cross_entropy_backward: finite and exact for logits near 1000 and -1000", "[ch01]") {
  Rng rng(13);
  Tensor big = random_tensor({3, 4}, rng, 3.0f);
  for (int64_t i = 0; i < big.numel(); ++i) big.data()[i] += i < 8 ? 1000.0f : -1000.0f;
  check_against_numeric(big, {1, 0, 3}, "logits near +1000 (rows 0, 1) and -1000 (row 2)");
  Tensor spread = Tensor::from_vector({2, 3}, {1000.0f, -1000.0f, 0.0f, -1000.0f, 999.0f, 1000.0f}, Device::host());
  check_against_numeric(spread, {2, 1}, "logits from -1000 to 1000 in one row");
}

TEST_CASE("softmax_cross_entropy_backward: equals autograd through dpt::softmax_cross_entropy", "[ch01]") {
  Rng rng(14);
  Tensor logits = random_tensor({8, 10}, rng, 2.0f);
  std::vector<float> before = logits.to_vector();
  std::vector<int64_t> labels{0, 9, 3, 3, 7, 1, 5, 2};
  Tensor mine = ch01::softmax_cross_entropy_backward(logits, labels);
  Tensor leaf = logits.clone().set_requires_grad(true);
  softmax_cross_entropy(leaf, labels).backward();
  REQUIRE(mine.shape() == leaf.grad().shape());
  {
    INFO("largest |yours - autograd| is " << max_abs_diff(mine, leaf.grad()) << "; entries are at most 1/B = 0.125 "
         "and float32 rounds them to ~1e-8: 1e-6 is a different formula, not rounding");
    CHECK(double(max_abs_diff(mine, leaf.grad())) <= 1e-6);
  }
  INFO("the logits changed: they are only read");
  CHECK(logits.to_vector() == before);
}

TEST_CASE("softmax_cross_entropy_backward: a label that is not a class, or a missing label, is an error", "[ch01]") {
  Rng rng(15);
  Tensor logits = random_tensor({2, 3}, rng);
  {
    INFO("a real call first: logits (2, 3), labels {0, 2}");
    REQUIRE(ch01::softmax_cross_entropy_backward(logits, {0, 2}).numel() == 6);  // the untouched hole stops here
  }
  for (auto bad : {std::vector<int64_t>{0, 3}, std::vector<int64_t>{-1, 0}, std::vector<int64_t>{0}}) {
    INFO(bad.size() << " labels, the first " << bad[0] << ", for 2 rows of 3 classes: must be a dpt::Error "
         "(B labels, each in 0..C-1), not a read outside the row (used as an index, such a label reads or writes "
         "outside the tensor: a crash or \"Subprocess aborted\" after this message comes from that)");
    CHECK_THROWS_AS(ch01::softmax_cross_entropy_backward(logits, bad), Error);
  }
  INFO("logits must be 2-D (B, C): a 1-D tensor is a dpt::Error");
  CHECK_THROWS_AS(ch01::softmax_cross_entropy_backward(Tensor::zeros({3}, Device::host()), {0}), Error);
}
