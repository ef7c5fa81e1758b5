// test_ch03_step.cpp — chapter 03's naive_data_parallel_step against one
// device computing the whole global batch serially (support/ch03_problem.h):
// the same weights after each step, bit-identical replicas, each rank reading
// only its shard and moving its gradients once, through the host.
#include "support/catch.h"
#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <string>

#include "ch03.h"
#include "dpt/data_parallel.h"
#include "dpt/step_check.h"
#include "support/ch03_problem.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt_test;

// ----------------------------------------------------------------------------
// naive_data_parallel_step

namespace {
// What each rank saw over `steps` steps of `world` ranks, batch 4 per rank,
// SGD (or `optimizer`) from the same start; rank r's data set may be `data_for(r)`.
struct StepRun {
  std::vector<std::vector<std::vector<float>>> weights, grads;  // [rank][step]: after the step
  std::vector<std::vector<float>> losses;                       // [rank][step]
  std::vector<std::vector<int64_t>> matrix;                     // traffic of the last step, every rank's sends
};

StepRun run_steps(int world, int steps, const std::string& optimizer, float lr,
                  const std::function<Dataset(int)>& data_for) {
  StepRun run;
  run.weights.resize(world), run.grads.resize(world), run.losses.resize(world);
  std::mutex mutex;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    Dataset data = data_for(ctx.rank);
    MLP replica = small_model(ctx.device, 11);  // the same start on every rank
    auto opt = make_optimizer(optimizer, replica.parameters(), lr);
    for (int s = 0; s < steps; ++s) {
      ctx.comm.barrier();
      if (ctx.is_root()) ctx.comm.traffic().clear();
      ctx.comm.barrier();
      float loss = ch03::naive_data_parallel_step(ctx, replica, *opt, data, global_batch(s, 4 * world));
      ctx.comm.barrier();
      std::lock_guard<std::mutex> lock(mutex);
      run.weights[ctx.rank].push_back(weights_of(replica));
      run.grads[ctx.rank].push_back(grads_of(replica));
      run.losses[ctx.rank].push_back(loss);
      if (ctx.is_root() && s == steps - 1) run.matrix = ctx.comm.traffic().matrix();
    }
  });
  return run;
}
}  // namespace

TEST_CASE("naive_data_parallel_step: each step is one device's SGD step on the whole global batch",
          "[ch03][needs:shard_indices][needs:host_average_gradients]") {
  const float lr = 0.1f;
  const int steps = 3;
  for (int world : {1, 2, 3, 4}) {
    Dataset data = small_data();
    StepRun run = run_steps(world, steps, "sgd", lr, [&](int) { return data; });
    MLP one = small_model(Device::host(), 11);  // the oracle, serially
    std::vector<Tensor> params = one.parameters();
    bool failed = false;  // one message per run: later steps start from other weights
    for (int s = 0; s < steps && !failed; ++s) {
      std::vector<float> g = one_device_gradient(one, data, global_batch(s, 4 * world));
      std::vector<float> w = weights_of(one);
      for (std::size_t i = 0; i < w.size(); ++i) w[i] -= lr * g[i];
      unflatten(w, params);
      for (int r = 0; r < world && !failed; ++r) {
        const std::vector<float>& gr = run.grads[r][s];
        double dg = max_abs_difference(gr, g) / max_abs(g), dw = max_abs_difference(run.weights[r][s], w);
        // Sums in another order: ~1e-6 of the gradient (dpt/step_check.h); the
        // weights then differ by lr times that, plus a rounding of w itself.
        if (std::isfinite(dg) && dg <= kStepGradientTolerance && dw <= lr * 1e-4 * max_abs(g) + 1e-6 * max_abs(w))
          continue;
        failed = true;
        std::string why;
        if (world > 1 && std::fabs(factor(gr, g) - world) < 0.05) {
          why = ": it is " + std::to_string(world) + "x one device's, a sum where the loss is a mean";
        } else if (std::isfinite(dg) && dg <= kStepGradientTolerance) {
          why = ": the gradient left in grad() is one device's, but the weights moved by another one; did "
                "optimizer.step() run before the gradients were averaged?";
        } else if (s > 0) {
          std::vector<float> both = g;  // this step's gradient plus the one applied at the step before
          for (std::size_t i = 0; i < both.size(); ++i) both[i] += run.grads[r][s - 1][i];
          if (max_abs_difference(gr, both) <= 1e-3 * max_abs(g))
            why = ": it is this step's gradient plus step " + std::to_string(s - 1) + "'s; each step must apply its "
                  "own batch's gradient only";
        }
        FAIL_CHECK("with " << world << (world == 1 ? " rank" : " ranks") << ", at step " << s << ", rank " << r
                           << " did not take one device's step "
                           << "on the global batch: max |g - g_one| / max |g_one| = " << dg << ", max |w - w_one| = "
                           << dw << why);
      }
    }
  }
}

TEST_CASE("naive_data_parallel_step: replicas stay bit-identical, with momentum too",
          "[ch03][needs:shard_indices][needs:host_average_gradients]") {
  for (const std::string optimizer : {"sgd", "momentum"}) {
    for (int world : {3, 4}) {
      Dataset data = small_data();
      StepRun run = run_steps(world, 3, optimizer, 0.1f, [&](int) { return data; });
      bool failed = false;  // one message per run
      for (int s = 0; s < 3 && !failed; ++s)
        for (int r = 1; r < world && !failed; ++r) {
          int64_t wrong = bits_differing(run.weights[r][s], run.weights[0][s]);
          if (wrong == 0) continue;
          failed = true;
          FAIL_CHECK(optimizer << ", " << world << " ranks: after step " << s << " rank " << r << "'s replica differs "
                               << "from rank 0's in " << wrong << " weights: replicas must stay bit-identical (the "
                               << "same start, and every rank applying the same bits)");
        }
    }
  }
}

TEST_CASE("naive_data_parallel_step: each rank reads only its shard, and returns its shard's loss",
          "[ch03][needs:shard_indices][needs:host_average_gradients]") {
  const int world = 3;
  const Dataset clean = small_data();
  const std::vector<int64_t> global = global_batch(0, 4 * world);
  // Rank r's copy of the data: every sample but its shard's is NaN, so a rank
  // that reads another sample gets a NaN loss and spreads it to everyone.
  auto poisoned = [&](int rank) {
    Dataset d = clean;
    d.x = clean.x.clone();
    std::vector<int64_t> mine = ch03::shard_indices(global, rank, world);
    for (int64_t i = 0; i < d.size(); ++i)
      if (std::find(mine.begin(), mine.end(), i) == mine.end())
        for (int64_t k = 0; k < d.features(); ++k) d.x.data()[i * d.features() + k] = std::nanf("");
    return d;
  };
  StepRun run = run_steps(world, 1, "sgd", 0.1f, poisoned);
  for (int r = 0; r < world; ++r) {
    MLP one = small_model(Device::host(), 11);
    Batch b = gather_batch(clean, ch03::shard_indices(global, r, world), Device::host());
    float expected = softmax_cross_entropy(one.forward(b.x), b.y).item();
    if (!std::isfinite(run.losses[r][0]) || !std::isfinite(max_abs(run.weights[r][0])))
      FAIL_CHECK("rank " << r << " read samples outside its shard (they were NaN in its copy of the data): each rank "
                         << "trains on shard_indices(global, rank, world) only");
    else if (std::fabs(run.losses[r][0] - expected) > 1e-5 * std::fabs(expected))
      FAIL_CHECK("rank " << r << " returned the loss " << run.losses[r][0] << ", but its shard's mean loss before "
                         << "the step is " << expected << ": return this rank's own loss, at the start weights");
  }
  // The step's traffic is the host average's: S up and S down per rank, through rank 0.
  const int64_t s_bytes = small_model(Device::host(), 1).num_parameters() * 4;
  for (int r = 1; r < world; ++r)
    if (run.matrix[r][0] != s_bytes || run.matrix[0][r] != s_bytes)
      FAIL_CHECK("in one step rank " << r << " sent " << run.matrix[r][0] << " bytes to the host and got "
                                     << run.matrix[0][r] << " back; expected S = " << s_bytes << " each way: a step "
                                     << "moves its gradients once, through the host");
}
