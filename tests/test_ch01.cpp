// test_ch01.cpp — chapter 01's holes against oracles that share none of their code:
// a serial torch.optim.SGD for the momentum update, hand arithmetic and finite differences
// for linear_backward, finite differences of the loss in double and autograd for
// softmax_cross_entropy_backward; then the chapter program itself: its verdicts, its exit
// code, and how it stops when training diverges.
#include "support/catch.h"
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "dpt/check.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/verdict.h"
#include "support/gradcheck.h"
#include "ch01.h"
#include "support/run_program.h"

using namespace dpt;
using dpt_test::max_relative_error;
using dpt_test::numeric_gradient;
using dpt_test::random_tensor;

namespace {
// The oracle: torch.optim.SGD(momentum=μ, dampening=0, nesterov=False), written
// here in double from its documentation, sharing no code with the hole:
//     step 1: b = g;  later: b = μ·b + g;  p = p − lr·b.
struct TorchSgd {
  std::vector<double> p, b;
  double momentum;
  void step(const std::vector<float>& g, double lr) {
    if (b.empty()) b.assign(g.begin(), g.end());
    else for (std::size_t i = 0; i < p.size(); ++i) b[i] = momentum * b[i] + g[i];
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= lr * b[i];
  }
};

// Largest |param − oracle| relative to the largest step the oracle took so far
// plus float32 rounding of the weights: 1e-5 is ~100x the rounding of a few
// float updates, a wrong rule is off by a whole step (O(1) on this scale).
double error_vs(const Tensor& param, const TorchSgd& oracle, const std::vector<float>& start) {
  double worst = 0, moved = 0;
  for (std::size_t i = 0; i < oracle.p.size(); ++i) {
    worst = std::max(worst, std::fabs(double(param.data()[i]) - oracle.p[i]));
    moved = std::max(moved, std::fabs(oracle.p[i] - start[i]));
  }
  return worst / std::max(moved, 1e-30);
}

// Runs `steps` calls of sgd_update on one parameter with fresh random
// gradients and the learning rates `lrs` (cycled), and returns the first
// step (1-based) after which the parameter left the oracle; 0 if none did.
int first_step_off(float momentum, int steps, const std::vector<float>& lrs, uint64_t seed) {
  Rng rng(seed);
  Tensor p = random_tensor({4, 3}, rng), velocity;
  std::vector<float> start = p.to_vector();
  TorchSgd oracle{{start.begin(), start.end()}, {}, momentum};
  for (int k = 1; k <= steps; ++k) {
    Tensor g = random_tensor({4, 3}, rng);  // a new gradient tensor each step, as backward() makes
    float lr = lrs[std::size_t(k - 1) % lrs.size()];
    ch01::sgd_update(p, g, velocity, lr, momentum);
    oracle.step(g.to_vector(), lr);
    if (!(error_vs(p, oracle, start) <= 1e-5)) return k;
  }
  return 0;
}

// What went wrong, in words, from the first step that left the oracle.
std::string first_step_words(int off) {
  return off == 1 ? "already the first step is wrong: it must move p to p - lr*g, against the gradient (torch's "
                    "first velocity is the gradient itself: no dampening, no Nesterov look-ahead)"
                  : "";
}
}  // namespace

TEST_CASE("sgd_update: with momentum 0 moves each parameter by -lr times its gradient", "[ch01]") {
  Tensor p = Tensor::from_vector({2, 2}, {1.0f, -2.0f, 0.5f, 4.0f}, Device::host());
  Tensor g = Tensor::from_vector({2, 2}, {0.5f, 1.0f, -2.0f, 0.0f}, Device::host());
  Tensor velocity;
  ch01::sgd_update(p, g, velocity, 0.1f, 0.0f);
  // 1 − 0.1·0.5, −2 − 0.1·1, 0.5 + 0.1·2, 4 − 0: exact in float up to one rounding.
  std::vector<float> expected = {0.95f, -2.1f, 0.7f, 4.0f};
  for (int i = 0; i < 4; ++i) {
    INFO("element " << i << ": plain SGD (momentum 0) moves p to p - lr*g, against the gradient");
    CHECK(p.data()[i] == Approx(expected[i]).epsilon(1e-6));
  }
}

TEST_CASE("sgd_update: the first step with momentum moves by -lr times the gradient", "[ch01]") {
  int off = first_step_off(0.9f, 1, {0.1f}, 11);
  INFO("momentum 0.9: " << first_step_words(off));
  CHECK(off == 0);
}

TEST_CASE("sgd_update: the velocity carries over between calls (torch's SGD over six steps)", "[ch01]") {
  for (float momentum : {0.5f, 0.9f}) {
    int off = first_step_off(momentum, 6, {0.05f}, 12);
    INFO("momentum " << momentum << ": the parameter left torch's SGD after step " << off << " of 6; "
                     << (off == 1 ? first_step_words(off)
                                  : "the velocity must remember earlier gradients between calls, kept in `velocity` "
                                    "(not restarted each step, not weighted by 1 - momentum, no look-ahead)"));
    CHECK(off == 0);
  }
}

TEST_CASE("sgd_update: the velocity sums gradients, not steps (the learning rate changes between calls)", "[ch01]") {
  int off = first_step_off(0.9f, 6, {0.1f, 0.02f, 0.05f}, 13);
  INFO("with a learning rate that changes between calls the parameter left torch's SGD after step "
       << off << " of 6; " << (off == 1 ? first_step_words(off)
                                        : "torch's velocity accumulates gradients, and the current lr scales it "
                                          "when it is applied"));
  CHECK(off == 0);
}

TEST_CASE("sgd_update: leaves every gradient untouched and updates in place", "[ch01]") {
  Rng rng(1);
  Tensor p = random_tensor({3, 5}, rng), velocity;
  Tensor alias = p;  // another handle on the same storage sees the update
  std::vector<Tensor> grads = {random_tensor({3, 5}, rng), random_tensor({3, 5}, rng), random_tensor({3, 5}, rng)};
  std::vector<std::vector<float>> before;
  for (auto& g : grads) before.push_back(g.to_vector());
  std::vector<float> p_before = p.to_vector();
  ch01::sgd_update(p, grads[0], velocity, 0.25f, 0.0f);
  {
    INFO("the update must write into the parameter's storage, so that every handle on it (the model's) sees it; "
         "`param` was made to point at other storage");
    REQUIRE(p.same(alias));
  }
  double worst = 0;
  for (int i = 0; i < 15; ++i) worst = std::max(worst, std::fabs(double(alias.data()[i]) - (p_before[i] - 0.25 * before[0][i])));
  {
    INFO("with momentum 0 the step is p - lr*g, against the gradient: largest difference " << worst);
    CHECK(worst <= 1e-6);
  }
  ch01::sgd_update(p, grads[1], velocity, 0.25f, 0.9f);
  ch01::sgd_update(p, grads[2], velocity, 0.25f, 0.9f);
  for (std::size_t k = 0; k < grads.size(); ++k) {
    INFO("the gradient of step " << k + 1 << " changed: gradients are only read; the velocity must own its "
         "storage (a copy), not be a handle on a gradient the caller owns");
    CHECK(grads[k].to_vector() == before[k]);
  }
}

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
         "(B labels, each in 0..C-1), not a read outside the row");
    CHECK_THROWS_AS(ch01::softmax_cross_entropy_backward(logits, bad), Error);
  }
  INFO("logits must be 2-D (B, C): a 1-D tensor is a dpt::Error");
  CHECK_THROWS_AS(ch01::softmax_cross_entropy_backward(Tensor::zeros({3}, Device::host()), {0}), Error);
}

TEST_CASE("chapter: ch01_sgd trains, the loss falls, and every verdict is a ✔ (exit 0)", "[ch01]") {
  std::string metrics = dpt_test::temp_path("ch01.jsonl");
  auto run = dpt_test::run_program("ch01_sgd", "--quiet --metrics " + metrics);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  auto lines = dpt_test::read_jsonl(metrics);
  REQUIRE(lines.size() == 301);  // one per step, then the held-out report (evaluate.h)
  CHECK(lines[300]["step"] == 300);
  CHECK(lines[300].contains("test_accuracy"));
  double first = lines[0]["loss"].get<double>();  // before any update
  double last = 0;  // mean of the last 20 steps: single-batch losses are noisy
  for (int i = 280; i < 300; ++i) last += lines[i]["loss"].get<double>() / 20;
  CHECK(first > 2.0);         // ≈ ln 10 = 2.30 for 10 classes at initialisation
  CHECK(last < 0.6 * first);  // measured ≈ 0.40·first; 0.6 leaves room for other seeds' noise
  CHECK(run.output.find("ch01 summary") != std::string::npos);
  for (const char* verdict : {"✔ backward() vs finite differences",
                              "✔ your softmax_cross_entropy_backward dlogits vs autograd",
                              "✔ your linear_backward dx vs autograd",
                              "✔ your linear_backward dweight vs autograd", "✔ your linear_backward dbias vs autograd",
                              "✔ two sgd updates vs the formula", "✔ loss on the data set, after / before",
                              "✔ largest step loss / first step loss"})
    CHECK_THAT(run.output, contains_text(verdict));
  CHECK(run.output.find("✘") == std::string::npos);
  CHECK_THAT(run.output, contains_text("all 8 checks passed"));
  std::remove(metrics.c_str());
}

TEST_CASE("chapter: ch01_sgd checks two steps of momentum (yours), adam and adamw against the formula", "[ch01]") {
  for (const char* args : {"--optimizer momentum --lr 0.01", "--optimizer adam --lr 0.001", "--optimizer adamw --lr 0.001"}) {
    auto run = dpt_test::run_program("ch01_sgd", std::string("--quiet --steps 40 --model 64-32-10 --samples 512 ") + args);
    INFO(args << "\n" << run.output);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.output, contains_text("✔ two "));
  }
}

TEST_CASE("chapter: ch01_sgd stops with a sentence and exit 1 when the loss becomes nan", "[ch01]") {
  auto run = dpt_test::run_program("ch01_sgd", "--quiet --lr 100");  // nan within ~11 steps (100 is the largest --lr accepted)
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK_THAT(run.output, contains_text("training diverged at step"));
  CHECK_THAT(run.output, contains_text("try a smaller --lr"));
  CHECK(run.output.find("checks passed") == std::string::npos);
}

TEST_CASE("chapter: ch01_sgd gives a ✘ and exit 3 when the loss explodes but stays finite", "[ch01]") {
  auto run = dpt_test::run_program("ch01_sgd", "--quiet --data synthetic --lr 1");  // measured: the loss reaches ~8e11, finite
  INFO(run.output);
  CHECK(run.exit_code == dpt::kVerdictFailed);
  CHECK_THAT(run.output, contains_text("✘ largest step loss / first step loss"));
  CHECK_THAT(run.output, contains_text("✘ loss on the data set, after / before"));
  CHECK_THAT(run.output, contains_text("checks FAILED"));
}
