// test_ch02.cpp — chapter 02's holes: per-sample gradients against autograd on
// batches of one, their mean against the whole-batch gradient, the average
// against a serial double-precision mean, and gradient accumulation over
// micro-batches against one backward over the whole batch.
#include "support/catch.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "dpt/check.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/verdict.h"
#include "support/gradcheck.h"
#include "ch02.h"
#include "support/run_program.h"

using namespace dpt;
using dpt_test::random_tensor;

namespace {
struct Fixture {
  Rng rng{5};
  MLP model{{6, 8, 4}, Device::host(), rng};
  Batch batch;
  Fixture() {
    batch.x = random_tensor({5, 6}, rng);
    batch.y = {0, 3, 1, 2, 3};
  }
  // The oracle: autograd on rows [begin, end) as one batch.
  std::vector<Tensor> gradient_of_rows(int64_t begin, int64_t end) {
    for (auto& p : model.parameters()) p.zero_grad();
    std::vector<int64_t> y(batch.y.begin() + begin, batch.y.begin() + end);
    softmax_cross_entropy(model.forward(batch.x.rows(begin, end)), y).backward();
    std::vector<Tensor> grads;
    for (auto& p : model.parameters()) grads.push_back(p.grad().clone());
    for (auto& p : model.parameters()) p.zero_grad();
    return grads;
  }
};
}  // namespace

namespace {
// True when every element of t is 0.
bool all_zero(const Tensor& t) {
  for (float v : t.to_vector()) if (v != 0) return false;
  return true;
}

// Leaves a gradient in every parameter of the model, as a training loop that
// has not zeroed yet would: per_sample_gradients must not depend on it.
void leave_stale_gradients(Fixture& f) {
  for (auto& p : f.model.parameters()) p.zero_grad();
  softmax_cross_entropy(f.model.forward(f.batch.x), f.batch.y).backward();
}
}  // namespace

TEST_CASE("per_sample_gradients: each equals the gradient of that sample alone", "[ch02]") {
  Fixture f;
  auto per_sample = ch02::per_sample_gradients(f.model, f.batch);
  INFO("one list of gradients per sample of the batch (5), in sample order");
  REQUIRE(per_sample.size() == 5);
  for (int64_t i = 0; i < 5; ++i) {
    auto expected = f.gradient_of_rows(i, i + 1);
    INFO("sample " << i << ": one gradient per model parameter, in model.parameters() order");
    REQUIRE(per_sample[i].size() == expected.size());
    for (std::size_t p = 0; p < expected.size(); ++p) {
      INFO("sample " << i << ", parameter " << p);
      REQUIRE(per_sample[i][p].defined());
      REQUIRE(per_sample[i][p].shape() == expected[p].shape());
      if (all_zero(per_sample[i][p]))
        FAIL_CHECK("sample " << i << "'s gradient of parameter " << p << " is all zeros: was it a handle on the "
                   "model's gradient, zeroed in place later, rather than a copy of its own?");
      // Same float ops in the same order: equal to the last bit; 1e-6 only
      // forgives a student who sums differently. A gradient that still holds
      // earlier samples' (backward() adds into it) is off by O(0.1).
      INFO("is not the gradient of this sample's loss alone (autograd on a batch of one): did gradients of "
           "earlier samples stay in the model's gradients? backward() adds into them. Largest difference "
           << max_abs_diff(per_sample[i][p], expected[p]));
      CHECK(double(max_abs_diff(per_sample[i][p], expected[p])) <= 1e-6);
    }
  }
  for (auto& p : f.model.parameters()) {
    INFO("the model's gradients must be left cleared (undefined), as the spec says");
    CHECK_FALSE(p.grad().defined());
  }
}

TEST_CASE("per_sample_gradients: gradients already in the model on entry do not leak in", "[ch02]") {
  Fixture f;
  auto clean = ch02::per_sample_gradients(f.model, f.batch);
  leave_stale_gradients(f);
  auto after_stale = ch02::per_sample_gradients(f.model, f.batch);
  REQUIRE(clean.size() == after_stale.size());
  for (std::size_t i = 0; i < clean.size(); ++i)
    for (std::size_t p = 0; p < clean[i].size(); ++p) {
      INFO("sample " << i << ", parameter " << p << ": the result changed when the model's gradients held "
           "something on entry; they must be cleared before the first sample too");
      CHECK(double(max_abs_diff(clean[i][p], after_stale[i][p])) == 0);
    }
}

TEST_CASE("per_sample_gradients: samples differ (no gradient reused across samples)", "[ch02]") {
  Fixture f;
  auto per_sample = ch02::per_sample_gradients(f.model, f.batch);
  REQUIRE(per_sample.size() == 5);
  // Samples 1 and 4 share label 3 but not inputs: their gradients must differ.
  INFO("samples 1 and 4 have different inputs, so their gradients must differ: is one tensor shared between "
       "samples?");
  CHECK(max_abs_diff(per_sample[1][0], per_sample[4][0]) > 1e-3f);
}

TEST_CASE("average_gradients: equals a serial double-precision mean", "[ch02]") {
  Rng rng(6);
  std::vector<ch02::Gradients> per_sample(7);
  for (auto& g : per_sample) g = {random_tensor({3, 2}, rng), random_tensor({4}, rng)};
  std::vector<std::vector<float>> before;
  for (auto& g : per_sample) before.push_back(g[0].to_vector());
  ch02::Gradients mean = ch02::average_gradients(per_sample);
  INFO("one mean per parameter (2), with that parameter's shape");
  REQUIRE(mean.size() == 2);
  for (std::size_t p = 0; p < 2; ++p) {
    REQUIRE(mean[p].shape() == per_sample[0][p].shape());
    for (int64_t j = 0; j < mean[p].numel(); ++j) {
      double expected = 0;
      for (auto& g : per_sample) expected += g[p].data()[j];
      INFO("parameter " << p << ", element " << j << ": the mean over the N = 7 lists (their sum is "
           << expected << "; a sum is not a mean)");
      CHECK(mean[p].data()[j] == Approx(expected / 7).margin(1e-6));
    }
  }
  for (std::size_t k = 0; k < per_sample.size(); ++k) {
    INFO("list " << k << " changed: per_sample is the caller's and only read");
    CHECK(per_sample[k][0].to_vector() == before[k]);
  }
}

TEST_CASE("average_gradients: the mean of per-sample gradients is the batch gradient", "[ch02][needs:per_sample_gradients]") {
  Fixture f;
  ch02::Gradients mean = ch02::average_gradients(ch02::per_sample_gradients(f.model, f.batch));
  auto batch_grad = f.gradient_of_rows(0, 5);
  REQUIRE(mean.size() == batch_grad.size());
  // Same math summed in another order: float32 rounding, ~1e-7 at these sizes
  // (entries are O(0.1)); a sum instead of a mean is off by 4× the entries.
  for (std::size_t p = 0; p < mean.size(); ++p) {
    INFO("parameter " << p << ": the mean of the 5 per-sample gradients must be the gradient of the batch's "
         "mean loss");
    CHECK(double(max_abs_diff(mean[p], batch_grad[p])) <= 1e-5);
  }
}

// ----------------------------------------------------------------------------
// accumulated_gradient against one backward over the whole batch (autograd on
// all B rows at once, the definition of the batch gradient).

namespace {
// A batch of 10 samples (so that 3 and 4 micro-batches are unequal) with
// the oracle of chapter 02's fixture.
struct TenSamples : Fixture {
  TenSamples() {
    batch.x = random_tensor({10, 6}, rng);
    batch.y = {0, 3, 1, 2, 3, 1, 0, 2, 2, 3};
  }
};

// max |mine − expected| / max |expected| over the parameters; NaN when a list
// or a shape is wrong.
double relative_error(const ch02::Gradients& mine, const std::vector<Tensor>& expected) {
  if (mine.size() != expected.size()) return NAN;
  double worst = 0;
  for (std::size_t p = 0; p < expected.size(); ++p) {
    if (!mine[p].defined() || mine[p].shape() != expected[p].shape()) return NAN;
    double largest = max_abs_diff(expected[p], Tensor::zeros(expected[p].shape(), Device::host()));
    worst = std::max(worst, double(max_abs_diff(mine[p], expected[p])) / std::max(largest, 1e-30));
  }
  return worst;
}

// Same math summed in another order: float32 rounding, ~1e-7 relative at
// these sizes; every mistake below is off by 1e-2 or more.
constexpr double kAccumulationTolerance = 1e-5;

// The error of accumulated_gradient(K) against the whole batch's gradient.
double accumulation_error(TenSamples& f, int k) {
  ch02::Gradients mine = ch02::accumulated_gradient(f.model, f.batch, k);  // first: the oracle clears p.grad()
  return relative_error(mine, f.gradient_of_rows(0, 10));
}
}  // namespace

TEST_CASE("accumulated_gradient: equals the whole batch's gradient when K divides B", "[ch02]") {
  TenSamples f;
  for (int k : {1, 2, 5}) {
    auto mine = ch02::accumulated_gradient(f.model, f.batch, k);
    auto full = f.gradient_of_rows(0, 10);
    INFO("one list with one gradient per model parameter, in model.parameters() order");
    REQUIRE(mine.size() == full.size());
    double error = relative_error(mine, full);
    if (error <= kAccumulationTolerance) continue;
    // Diagnose against the two sums a student may have built instead.
    ch02::Gradients times_k;
    for (auto& g : full) times_k.push_back(scale(g, float(k)));
    FAIL("10 samples in " << k << " micro-batches of " << 10 / k << ": max |yours - batch gradient| / max |batch| is "
         << error
         << (relative_error(mine, times_k) <= kAccumulationTolerance
                 ? ": yours is K times the batch gradient. The batch's loss is the mean over its samples, not the "
                   "sum of the micro-batches' mean losses"
                 : ": not the gradient of the whole batch's mean loss (backward() adds into p.grad(): are the "
                   "gradients cleared once, before the first micro-batch, and never between?)"));
  }
}

TEST_CASE("accumulated_gradient: equals it when K does not divide B (10 samples in 3, 4 or 6 micro-batches)", "[ch02]") {
  TenSamples f;
  const double divides = accumulation_error(f, 2);
  for (int k : {3, 4, 6}) {
    double error = accumulation_error(f, k);
    if (error <= kAccumulationTolerance) continue;
    if (divides <= kAccumulationTolerance)
      FAIL("10 samples in " << k << " micro-batches (of unequal size: 10 is not a multiple of " << k << "): max "
           "|yours - batch gradient| / max |batch| is " << error << ", yet with 2 micro-batches of 5 it is right. "
           "Micro-batches of unequal size must weigh in proportion to their size (n_k / B), not 1/K each: the "
           "batch's mean gives every sample the weight 1/B");
    FAIL("10 samples in " << k << " micro-batches: max |yours - batch gradient| / max |batch| is " << error
         << " (with 2 micro-batches of 5 it is " << divides << "; the test for K dividing B says more)");
  }
}

TEST_CASE("accumulated_gradient: every micro-batch counts, not only the last", "[ch02]") {
  // K = B: micro-batches of one sample each, whatever the cutting rule. A
  // result that is sample 9's gradient alone, scaled, kept only the last.
  TenSamples f;
  auto mine = ch02::accumulated_gradient(f.model, f.batch, 10);
  auto full = f.gradient_of_rows(0, 10), last = f.gradient_of_rows(9, 10);
  double error = relative_error(mine, full);
  if (error <= kAccumulationTolerance) return;
  ch02::Gradients mine_times_b;
  for (auto& g : mine) mine_times_b.push_back(scale(g, 10.0f));
  bool only_last = relative_error(mine, last) <= kAccumulationTolerance ||
                   relative_error(mine_times_b, last) <= kAccumulationTolerance;
  FAIL("10 micro-batches of one sample: max |yours - batch gradient| / max |batch| is " << error
       << (only_last ? ": yours is the last sample's gradient alone. backward() adds into p.grad(); clearing the "
                       "gradients before each micro-batch throws the earlier ones away"
                     : ": not the gradient of the whole batch's mean loss"));
}

TEST_CASE("accumulated_gradient: gradients already in the model on entry do not leak in", "[ch02]") {
  TenSamples f;
  for (auto& p : f.model.parameters()) p.zero_grad();
  softmax_cross_entropy(f.model.forward(f.batch.x), f.batch.y).backward();  // a stale gradient in every p.grad()
  double error = accumulation_error(f, 2);
  INFO("the model's gradients held a whole batch's gradient on entry, and yours is off by " << error
       << " (relative): backward() adds into p.grad(), so clear them before the first micro-batch");
  CHECK(error <= kAccumulationTolerance);
}

TEST_CASE("accumulated_gradient: the model's gradients hold the result, and the returned tensors are copies", "[ch02]") {
  TenSamples f;
  auto mine = ch02::accumulated_gradient(f.model, f.batch, 2);
  std::vector<Tensor> in_model;
  for (auto& p : f.model.parameters()) in_model.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
  for (auto& p : f.model.parameters()) {  // what chapter 03 does next: change the model's gradients in place
    Tensor g = p.grad();
    if (g.defined()) scale_(g, 0.0f);
  }
  auto expected = f.gradient_of_rows(0, 10);
  {
    INFO("on return every p.grad() must hold the batch's gradient, what an optimizer step after accumulation reads");
    CHECK(relative_error(in_model, expected) <= kAccumulationTolerance);
  }
  INFO("a returned gradient changed when the model's gradients were changed in place afterwards: return copies "
       "of your own, not handles on p.grad()");
  CHECK(relative_error(mine, expected) <= kAccumulationTolerance);
}

TEST_CASE("accumulated_gradient: peak memory is one micro-batch's, not the whole batch's", "[ch02]") {
  // A model on a device of its own, so its ledger sees only this test. The
  // whole batch's activations (1024 rows of 2 x 256 floats, several copies)
  // are 16x those of one micro-batch of 64; the parameters' gradients and
  // your copies of them (0.6 MB) are in both. Measured: yours ~0.15 of the
  // whole batch's peak; a pass over all 1024 rows is at least 1.
  Device& device = Device::cpu(7);
  Rng rng(9);
  MLP model({32, 256, 256, 4}, device, rng);
  Batch batch;
  batch.x = random_tensor({1024, 32}, rng).to(device);
  for (int64_t i = 0; i < 1024; ++i) batch.y.push_back(i % 4);
  auto measure = [&](const std::function<void()>& run) {
    for (auto& p : model.parameters()) p.zero_grad();
    device.reset_peak();
    const std::size_t before = device.peak_bytes();
    run();
    return double(device.peak_bytes() - before);
  };
  double whole = measure([&] { softmax_cross_entropy(model.forward(batch.x), batch.y).backward(); });
  double mine = measure([&] { ch02::accumulated_gradient(model, batch, 16); });
  INFO("peak bytes above the start: whole batch at once " << whole << ", yours in 16 micro-batches " << mine
       << ". Each forward and backward must see one micro-batch of at most 64 rows, never all 1024");
  CHECK(mine <= 0.5 * whole);
}

TEST_CASE("accumulated_gradient: K outside 1..B is an error that says so", "[ch02]") {
  TenSamples f;
  {
    INFO("a real call first: 10 samples in 10 micro-batches");
    REQUIRE(ch02::accumulated_gradient(f.model, f.batch, 10).size() == f.model.parameters().size());
  }
  for (int k : {11, -1, 0}) {  // 0 last: a division by it ends the test
    INFO(k << " micro-batches of a batch of 10 must be a dpt::Error: 1 <= K <= B");
    CHECK_THROWS_AS(ch02::accumulated_gradient(f.model, f.batch, k), Error);
  }
}

TEST_CASE("chapter: ch02_batching shows batch = mean of per-sample gradients, every verdict a ✔ (exit 0)", "[ch02]") {
  std::string metrics = dpt_test::temp_path("ch02.jsonl");
  auto run = dpt_test::run_program("ch02_batching", "--quiet --steps 40 --batch 16 --metrics " + metrics);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(dpt_test::read_jsonl(metrics).size() == 41);  // one line per mini-batch step, then the held-out report
  for (const char* verdict : {"✔ mean of your per-sample gradients vs the batch gradient",
                              "✔ your accumulated_gradient in 3 micro-batches vs the batch gradient",
                              "✔ 16x fewer optimizer steps", "640 per-sample steps vs 40",
                              "✔ |per-sample run's loss - batched run's loss|", "✔ batched run, loss on the data set",
                              "✔ largest step loss / first step loss"})
    CHECK_THAT(run.output, contains_text(verdict));
  CHECK_THAT(run.output, contains_text("(expected <= 0.0001)"));  // the tolerance, printed as a number
  CHECK(run.output.find("✘") == std::string::npos);
  CHECK_THAT(run.output, contains_text("all 6 checks passed"));
  std::remove(metrics.c_str());
}

TEST_CASE("chapter: ch02_batching stops with a sentence and exit 1 when the loss becomes nan", "[ch02]") {
  auto run = dpt_test::run_program("ch02_batching", "--quiet --steps 40 --lr 100");
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK_THAT(run.output, contains_text("training diverged at step"));
  CHECK(run.output.find("checks passed") == std::string::npos);
}

TEST_CASE("chapter: ch02_batching gives a ✘ and exit 3 when the loss explodes but stays finite", "[ch02]") {
  auto run = dpt_test::run_program("ch02_batching", "--quiet --data synthetic --lr 1");  // measured: the batched loss reaches ~8e11
  INFO(run.output);
  CHECK(run.exit_code == dpt::kVerdictFailed);
  CHECK_THAT(run.output, contains_text("✘ largest step loss / first step loss"));
  CHECK_THAT(run.output, contains_text("checks FAILED"));
}
