// test_ch02.cpp — chapter 02's two holes by their results: per_sample_gradients
// (each kept gradient against autograd on a batch of one, the mean against
// one backward over the whole batch, one pass per sample) and
// accumulated_gradient against one backward over the whole batch.
//
// Here: both holes' results; accumulated_gradient's passes in
// test_ch02_passes.cpp, the chapter's program in test_ch02_chapter.cpp.
#include "support/catch.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "dpt/check.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "support/gradcheck.h"
#include "ch02.h"

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

// Σ_i samples[i][p][j] in double: the oracle's sum, from its own per-sample
// gradients (autograd on batches of one), never from the hole's.
std::vector<std::vector<double>> serial_sums(Fixture& f, int64_t count) {
  std::vector<std::vector<double>> sums;
  for (int64_t i = 0; i < count; ++i) {
    auto g = f.gradient_of_rows(i, i + 1);
    if (sums.empty()) for (auto& t : g) sums.emplace_back(std::size_t(t.numel()), 0.0);
    for (std::size_t p = 0; p < g.size(); ++p)
      for (int64_t j = 0; j < g[p].numel(); ++j) sums[p][std::size_t(j)] += g[p].data()[j];
  }
  return sums;
}

// What a kept sample's gradient that no longer is its own holds instead,
// in words: the sum or the mean of all samples' (a mean formed in its storage).
std::string what_it_holds(const Tensor& kept, const std::vector<double>& sum, int64_t count) {
  double off_sum = 0, off_mean = 0;
  for (int64_t j = 0; j < kept.numel(); ++j) {
    off_sum = std::max(off_sum, std::fabs(kept.data()[j] - sum[std::size_t(j)]));
    off_mean = std::max(off_mean, std::fabs(kept.data()[j] - sum[std::size_t(j)] / double(count)));
  }
  if (off_mean <= 1e-5) return "it holds the mean of all samples' gradients: was the mean formed in its storage";
  if (off_sum <= 1e-5) return "it holds the sum of all samples' gradients: was the mean summed into its storage";
  return "it changed after it was computed: was something written into it";
}
}  // namespace

TEST_CASE("per_sample_gradients: each kept gradient is that sample's alone, still after the mean is formed",
          "[ch02]") {
  Fixture f;
  auto yours = ch02::per_sample_gradients(f.model, f.batch);
  INFO("one list of gradients per sample of the batch (5), in sample order");
  REQUIRE(yours.samples.size() == 5);
  auto sums = serial_sums(f, 5);
  for (int64_t i = 0; i < 5; ++i) {
    auto expected = f.gradient_of_rows(i, i + 1);
    INFO("sample " << i << ": one gradient per model parameter, in model.parameters() order");
    REQUIRE(yours.samples[i].size() == expected.size());
    for (std::size_t p = 0; p < expected.size(); ++p) {
      const Tensor& kept = yours.samples[i][p];
      INFO("sample " << i << ", parameter " << p);
      REQUIRE(kept.defined());
      REQUIRE(kept.shape() == expected[p].shape());
      if (all_zero(kept))
        FAIL_CHECK("sample " << i << "'s gradient of parameter " << p << " is all zeros: was it a handle on the "
                   "model's gradient, zeroed in place later, rather than a copy of its own?");
      // Same float ops in the same order: equal to the last bit; 1e-6 only
      // forgives a student who sums differently. A gradient that still holds
      // earlier samples' (backward() adds into it), or one the mean was
      // formed in, is off by O(0.1).
      const double off = max_abs_diff(kept, expected[p]);
      if (off <= 1e-6) continue;
      if (i > 0 && max_abs_diff(kept, yours.samples[0][p]) == 0)
        FAIL_CHECK("sample " << i << "'s gradient of parameter " << p << " is sample 0's: is one tensor shared "
                   "between samples?");
      else if (i == 0 || yours.samples.size() < 2)
        FAIL_CHECK("sample 0's gradient of parameter " << p << " is not that sample's alone (autograd on a batch "
                   "of one) when per_sample_gradients returns: " << what_it_holds(kept, sums[p], 5)
                   << "? The kept gradients are the caller's, and the mean must be new tensors of its own. "
                   "Largest difference " << off);
      else
        FAIL_CHECK("sample " << i << "'s gradient of parameter " << p << " is not the gradient of this sample's "
                   "loss alone (autograd on a batch of one): did gradients of earlier samples stay in the model's "
                   "gradients? backward() adds into them. Largest difference " << off);
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
  REQUIRE(clean.samples.size() == after_stale.samples.size());
  for (std::size_t i = 0; i < clean.samples.size(); ++i)
    for (std::size_t p = 0; p < clean.samples[i].size(); ++p) {
      INFO("sample " << i << ", parameter " << p << ": the result changed when the model's gradients held "
           "something on entry; they must be cleared before the first sample too");
      CHECK(double(max_abs_diff(clean.samples[i][p], after_stale.samples[i][p])) == 0);
    }
}

TEST_CASE("per_sample_gradients: the mean is the whole batch's gradient", "[ch02]") {
  Fixture f;
  auto yours = ch02::per_sample_gradients(f.model, f.batch);
  auto batch_grad = f.gradient_of_rows(0, 5);
  auto sums = serial_sums(f, 5);
  INFO("one mean per model parameter, in model.parameters() order");
  REQUIRE(yours.mean.size() == batch_grad.size());
  // The oracle is one backward over all 5 rows; the same math summed in
  // another order differs by float32 rounding, ~1e-7 at these sizes (entries
  // are O(0.1)). A sum instead of a mean is off by 4x the entries.
  for (std::size_t p = 0; p < batch_grad.size(); ++p) {
    INFO("parameter " << p);
    REQUIRE(yours.mean[p].defined());
    REQUIRE(yours.mean[p].shape() == batch_grad[p].shape());
    for (int64_t j = 0; j < batch_grad[p].numel(); ++j) {
      const double mine = yours.mean[p].data()[j], truth = batch_grad[p].data()[j];
      if (std::fabs(mine - truth) <= 1e-5) continue;
      FAIL("parameter " << p << ", element " << j << ": your mean is " << mine << ", the gradient of the batch's "
           "mean loss is " << truth << " (the per-sample gradients sum to " << sums[p][std::size_t(j)]
           << " there; the batch's loss is the mean of the samples' losses, so its gradient is the mean of "
           "theirs, not their sum)");
    }
  }
}

TEST_CASE("per_sample_gradients: one forward and backward per sample, none over the whole batch", "[ch02]") {
  Fixture f;
  int passes = 0;  // a grad-ready hook fires once per backward() that reaches fc0.weight
  Tensor weight = f.model.parameters()[0];
  weight.add_grad_ready_hook([&](Tensor&) { ++passes; });
  struct Unhook {
    Tensor& w;
    ~Unhook() { w.clear_grad_ready_hooks(); }
  } unhook{weight};
  ch02::per_sample_gradients(f.model, f.batch);
  INFO("5 samples: the mean must be formed from the 5 per-sample gradients (a backward over the whole batch "
       "would compute the mean without them); your per_sample_gradients ran " << passes << " backward passes");
  CHECK(passes == 5);
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
           "In the batch's mean loss every sample weighs 1/B: what does a sample of a smaller micro-batch "
           "weigh in yours, and one of a larger?");
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
