// test_ch01.cpp — chapter 01's holes against oracles that share none of their code:
// hand arithmetic for the SGD update, hand arithmetic and finite differences
// for linear_backward; then the chapter program itself: its verdicts, its exit
// code, and how it stops when training diverges.
#include "support/catch.h"

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

TEST_CASE("sgd_update: moves each parameter by -lr times its gradient", "[ch01]") {
  Tensor p = Tensor::from_vector({2, 2}, {1.0f, -2.0f, 0.5f, 4.0f}, Device::host());
  Tensor g = Tensor::from_vector({2, 2}, {0.5f, 1.0f, -2.0f, 0.0f}, Device::host());
  ch01::sgd_update(p, g, 0.1f);
  // 1 − 0.1·0.5, −2 − 0.1·1, 0.5 + 0.1·2, 4 − 0: exact in float up to one rounding.
  std::vector<float> expected = {0.95f, -2.1f, 0.7f, 4.0f};
  for (int i = 0; i < 4; ++i) CHECK(p.data()[i] == Approx(expected[i]).epsilon(1e-6));
}

TEST_CASE("sgd_update: leaves the gradient untouched and updates in place", "[ch01]") {
  Rng rng(1);
  Tensor p = random_tensor({3, 5}, rng), g = random_tensor({3, 5}, rng);
  Tensor alias = p;  // another handle on the same storage sees the update
  std::vector<float> g_before = g.to_vector(), p_before = p.to_vector();
  ch01::sgd_update(p, g, 0.25f);
  CHECK(g.to_vector() == g_before);
  for (int i = 0; i < 15; ++i) CHECK(alias.data()[i] == Approx(p_before[i] - 0.25f * g_before[i]).epsilon(1e-6));
}

TEST_CASE("linear_backward: returns (B,in), (out,in) and (out) gradients", "[ch01]") {
  Rng rng(2);
  Tensor x = random_tensor({4, 3}, rng), w = random_tensor({5, 3}, rng), dy = random_tensor({4, 5}, rng);
  ch01::LinearGrads g = ch01::linear_backward(x, w, dy);
  REQUIRE(g.dx.defined());
  REQUIRE(g.dweight.defined());
  REQUIRE(g.dbias.defined());
  CHECK(g.dx.shape() == Shape{4, 3});
  CHECK(g.dweight.shape() == Shape{5, 3});
  CHECK(g.dbias.shape() == Shape{5});
}

TEST_CASE("linear_backward: dx, dweight and dbias equal a product worked by hand", "[ch01]") {
  // x (2, 2), weight (3, 2), dy (2, 3); small integers, so every product and
  // sum is exact in float and == is the right comparison.
  Tensor x = Tensor::from_vector({2, 2}, {1, 2, 3, 4}, Device::host());
  Tensor w = Tensor::from_vector({3, 2}, {1, 0, -1, 2, 0, 3}, Device::host());
  Tensor dy = Tensor::from_vector({2, 3}, {1, -1, 2, 0, 1, -2}, Device::host());
  ch01::LinearGrads g = ch01::linear_backward(x, w, dy);
  // dx = dy·w: row 0 = 1·(1,0) − 1·(−1,2) + 2·(0,3) = (2, 4); row 1 = (−1,2) − 2·(0,3) = (−1, −4).
  CHECK(g.dx.to_vector() == std::vector<float>{2, 4, -1, -4});
  // dweight = dyᵀ·x: row o = Σ_b dy[b][o]·x[b] → (1,2), (−1+3, −2+4) = (2,2), (2−6, 4−8) = (−4,−4).
  CHECK(g.dweight.to_vector() == std::vector<float>{1, 2, 2, 2, -4, -4});
  // dbias = column sums of dy.
  CHECK(g.dbias.to_vector() == std::vector<float>{1, 0, 0});
}

TEST_CASE("linear_backward: matches finite differences of the layer", "[ch01]") {
  // With loss = Σ dy ⊙ (x·wᵀ + b), d loss/d y = dy exactly, so the finite
  // differences of this loss are the true dx, dweight, dbias.
  Rng rng(3);
  Tensor x = random_tensor({6, 4}, rng), w = random_tensor({3, 4}, rng), b = random_tensor({3}, rng);
  Tensor dy = random_tensor({6, 3}, rng);
  auto loss = [&] { return sum(mul(linear(x, w, b), dy)); };
  ch01::LinearGrads g = ch01::linear_backward(x, w, dy);
  CHECK(max_relative_error(g.dx.to_vector(), numeric_gradient(loss, x)) < 1e-2);
  CHECK(max_relative_error(g.dweight.to_vector(), numeric_gradient(loss, w)) < 1e-2);
  CHECK(max_relative_error(g.dbias.to_vector(), numeric_gradient(loss, b)) < 1e-2);
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
  for (const char* verdict : {"✔ backward() vs finite differences", "✔ your linear_backward dx vs autograd",
                              "✔ your linear_backward dweight vs autograd", "✔ your linear_backward dbias vs autograd",
                              "✔ one sgd update vs the formula", "✔ loss on the data set, after / before",
                              "✔ largest step loss / first step loss"})
    CHECK_THAT(run.output, contains_text(verdict));
  CHECK(run.output.find("✘") == std::string::npos);
  CHECK_THAT(run.output, contains_text("all 7 checks passed"));
  std::remove(metrics.c_str());
}

TEST_CASE("chapter: ch01_sgd checks dpt's optimizers' first step too (momentum, adam, adamw)", "[ch01]") {
  for (const char* args : {"--optimizer momentum --lr 0.01", "--optimizer adam --lr 0.001", "--optimizer adamw --lr 0.001"}) {
    auto run = dpt_test::run_program("ch01_sgd", std::string("--quiet --steps 40 --model 64-32-10 --samples 512 ") + args);
    INFO(args << "\n" << run.output);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.output, contains_text("✔ one "));
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
  auto run = dpt_test::run_program("ch01_sgd", "--quiet --lr 1");  // measured: the loss reaches ~8e11, finite
  INFO(run.output);
  CHECK(run.exit_code == dpt::kVerdictFailed);
  CHECK_THAT(run.output, contains_text("✘ largest step loss / first step loss"));
  CHECK_THAT(run.output, contains_text("✘ loss on the data set, after / before"));
  CHECK_THAT(run.output, contains_text("checks FAILED"));
}
