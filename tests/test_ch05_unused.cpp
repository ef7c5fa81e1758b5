// test_ch05_unused.cpp — chapter 05's --find-unused-parameters: the provided
// find_unused_parameters names exactly what the loss does not reach, and a
// parameter unused on one rank trains like one device with the flag, and
// without it fails naming the parameter.
#include "support/catch.h"
#include <string>
#include <vector>

#include "bucketed_training.h"
#include "ch05.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "support/ch05_ring_bucket.h"
#include "support/ch05_words.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch05;
using dpt_test::ring_bucket_state;
using dpt_test::Layout;

// ----------------------------------------------------------------------------
// --find-unused-parameters

namespace {
// The unused-parameter setup with real autograd: W (4,3) and b (4). Rank 0's
// loss mse(x0·Wᵀ + b, t0) uses both; rank 1's loss mean(b ⊙ b) never
// touches W. Layout {b}, {W} (reverse order, one parameter each).
struct TwoRankProblem {
  std::vector<float> w = {0.5f, -0.2f, 0.1f, 0.3f, 0.8f, -0.6f, -0.4f, 0.2f, 0.7f, 0.05f, -0.3f, 0.9f};
  std::vector<float> b = {0.1f, -0.5f, 0.25f, 0.6f};
  std::vector<float> x0 = {1.0f, 2.0f, -1.0f, 0.5f, -0.5f, 3.0f};  // (2, 3)
  std::vector<float> t0 = {0.3f, -0.1f, 0.2f, 1.0f, -0.7f, 0.4f, 0.0f, 0.5f};  // (2, 4)
  Tensor loss(int rank, const Tensor& W, const Tensor& B, Device& device) const {
    if (rank == 1) return mean(mul(B, B));
    return mse_loss(linear(Tensor::from_vector({2, 3}, x0, device), W, B), Tensor::from_vector({2, 4}, t0, device));
  }
};
constexpr int kUnusedSteps = 5;
constexpr float kUnusedLr = 0.1f;

// Trains the problem for kUnusedSteps SGD steps on 2 ranks with the chapter's
// holes and the ring; returns rank 0's {W, b}.
std::vector<std::vector<float>> train_two_ranks_with_buckets(bool find_unused) {
  std::vector<std::vector<float>> result;
  dpt_test::run_ranks(2, [&](Context& ctx) {
    TwoRankProblem problem;
    std::vector<Tensor> params = {Tensor::from_vector({4, 3}, problem.w, ctx.device).set_requires_grad(true),
                                  Tensor::from_vector({4}, problem.b, ctx.device).set_requires_grad(true)};
    auto shared = ring_bucket_state(ctx, {{{1}, 16}, {{0}, 48}}, params);
    BucketState& state = *shared;
    for (int p = 0; p < 2; ++p) params[std::size_t(p)].add_grad_ready_hook([&state, p](Tensor&) { mark_ready(state, p); });
    SGD sgd(params, kUnusedLr);
    for (int step = 0; step < kUnusedSteps; ++step) {
      reset_bucket_state(state);
      sgd.zero_grad();
      Tensor loss = problem.loss(ctx.rank, params[0], params[1], ctx.device);
      if (find_unused)
        for (int p : find_unused_parameters(loss, params)) mark_ready(state, p);
      loss.backward();
      std::vector<Tensor> grads = {params[0].grad(), params[1].grad()};
      wait_and_unpack(state, grads, {"fc.weight", "fc.bias"});
      sgd.step();
    }
    for (Tensor& p : params) p.clear_grad_ready_hooks();
    if (ctx.rank == 0) result = {params[0].to_vector(), params[1].to_vector()};
  }, 30);
  return result;
}
}  // namespace

TEST_CASE("find_unused_parameters: names exactly what the loss does not reach, zero gradient", "[ch05]") {
  Device& device = Device::host();
  Tensor W = Tensor::zeros({4, 3}, device).set_requires_grad(true), B = Tensor::zeros({4}, device).set_requires_grad(true);
  Tensor C = Tensor::zeros({4}, device).set_requires_grad(true);
  std::vector<Tensor> params = {W, B, C};
  C.set_grad(Tensor::full({4}, 2.0f, device));  // accumulated by an earlier micro-batch: kept
  CHECK(find_unused_parameters(mean(mul(B, B)), params) == std::vector<int>{0, 2});
  REQUIRE(W.grad().defined());
  CHECK(W.grad().to_vector() == std::vector<float>(12, 0.0f));
  CHECK(C.grad().to_vector() == std::vector<float>(4, 2.0f));
  CHECK_FALSE(B.grad().defined());  // reached: backward will fill it
  Tensor x = Tensor::zeros({2, 3}, device);
  CHECK(find_unused_parameters(sum(linear(x, W, B)), params) == std::vector<int>{2});
}

TEST_CASE("find-unused-parameters: a parameter unused on one rank trains like one device, and without the flag fails naming it",
          "[ch05][needs:mark_ready][needs:wait_and_unpack][needs:ring_scatter_reduce][needs:ring_all_gather]") {
  // Oracle: one device, no buckets, no communication: the mean of the two
  // ranks' losses, whose gradient in W is (dW0 + 0)/2: what the ranks'
  // average gives when rank 1 sends zeros for W.
  TwoRankProblem problem;
  Device& device = Device::host();
  std::vector<Tensor> params = {Tensor::from_vector({4, 3}, problem.w, device).set_requires_grad(true),
                                Tensor::from_vector({4}, problem.b, device).set_requires_grad(true)};
  SGD sgd(params, kUnusedLr);
  for (int step = 0; step < kUnusedSteps; ++step) {
    sgd.zero_grad();
    scale(add(problem.loss(0, params[0], params[1], device), problem.loss(1, params[0], params[1], device)), 0.5f)
        .backward();
    sgd.step();
  }
  std::vector<std::vector<float>> got = train_two_ranks_with_buckets(true);
  REQUIRE(got.size() == 2);
  // Values O(1), a handful of float ops per step: the two differ by rounding
  // only (~1e-7 each); 1e-5 also catches W never moving (it moves by > 0.01).
  auto on_host = [&](const std::vector<float>& v) { return Tensor::from_vector({int64_t(v.size())}, v, device); };
  for (int p = 0; p < 2; ++p) {
    Tensor want = on_host(params[std::size_t(p)].to_vector());
    INFO("parameter " << p);
    CHECK(max_abs_diff(on_host(got[std::size_t(p)]), want) < 1e-5);
    CHECK(max_abs_diff(want, on_host(p == 0 ? problem.w : problem.b)) > 1e-2);
  }
  CHECK_THROWS_WITH(train_two_ranks_with_buckets(false), contains_text("fc.weight") && contains_text("bucket 1"));
}
