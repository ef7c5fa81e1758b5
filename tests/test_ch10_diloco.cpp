// test_ch10_diloco.cpp — DiLoCo's outer step held to its laws: after T
// outer steps on pseudo-gradients that do not depend on where the ranks
// stood, the parameters equal PyTorch's SGD(nesterov=True) in closed form
// (a weighted sum of the Δs), on 1-4 ranks; the same bits on every rank
// and one all-reduce of Ψ floats per step; outer lr 1 without momentum =
// parameter averaging, step after step; and training: H = 1, lr 1,
// momentum 0 with inner SGD = one device on the global batch, with Adam not.
#include "support/catch.h"
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>

#include "ch10.h"
#include "diloco.h"
#include "support/ranks.h"
#include "support/single_device.h"

using namespace dpt;
using namespace dpt::ch10;

namespace {
// Rank r's parameters after its inner steps of outer step t, around θ₀.
std::vector<float> after_inner(int r, int t, const std::vector<float>& theta0) {
  std::mt19937 generator(uint32_t(77 * t + r));
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> theta = theta0;
  for (float& v : theta) v += normal(generator);
  return theta;
}

struct Outer {
  std::vector<std::vector<std::vector<float>>> params, momentum;  // [rank][step]
  int64_t calls = -1, bytes = -1;
};

Outer run_outer(int world, int steps, int64_t psi, float lr, float mu) {
  Outer out;
  out.params.resize(std::size_t(world)), out.momentum.resize(std::size_t(world));
  std::mutex mutex;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    std::vector<float> before(static_cast<std::size_t>(psi), 0.5f), momentum(static_cast<std::size_t>(psi), 0.0f);
    std::vector<std::vector<float>> ps, ms;
    ctx.comm.barrier();
    for (int t = 0; t < steps; ++t) {
      std::vector<float> params = after_inner(ctx.rank, t, before);
      diloco_outer_step(ctx.comm, params, before, momentum, lr, mu);
      ps.push_back(params), ms.push_back(momentum);
      before = params;
    }
    ctx.comm.barrier();
    std::lock_guard<std::mutex> lock(mutex);
    out.params[std::size_t(ctx.rank)] = ps, out.momentum[std::size_t(ctx.rank)] = ms;
    if (ctx.is_root()) out.calls = ctx.comm.traffic().collective_calls("all_reduce", 0), out.bytes = ctx.comm.traffic().collective_bytes("all_reduce", 0);
  });
  return out;
}
}  // namespace

// Δ_t = θ₀ − mean_r θ_r = −mean_r of rank r's move at outer step t: the same
// wherever the round started (after_inner moves every rank by its own noise).
static double pseudo_gradient(int world, int t, int64_t i) {
  const std::vector<float> zero(std::size_t(i + 1), 0.0f);
  double mean = 0;
  for (int r = 0; r < world; ++r) mean += double(after_inner(r, t, zero)[std::size_t(i)]) / world;
  return -mean;
}

TEST_CASE("diloco_outer_step: T outer steps = PyTorch's Nesterov SGD in closed form, on 1-4 ranks", "[ch10][hole:diloco_outer_step]") {
  // With the buffer 0 at first and Δ_1 … Δ_T fixed in advance, PyTorch's
  // SGD(lr η, momentum μ, nesterov=True) ends at
  //   θ_T      = θ₀ − η Σ_s (1 + μ (1 − μ^(T−s+1)) / (1 − μ)) Δ_s.
  const int steps = 3;
  const int64_t psi = 10;
  const double lr = 0.7, mu = 0.9;
  for (int world : {1, 2, 3, 4}) {
    Outer got = run_outer(world, steps, psi, float(lr), float(mu));
    for (int T = 1; T <= steps; ++T) {
      for (int r = 0; r < world; ++r) {
        INFO(world << " ranks, outer step " << T << ": rank " << r << " holds other bits than rank 0 — every rank must "
                   "end the outer step with the same parameters and momentum");
        CHECK(got.params[std::size_t(r)][std::size_t(T - 1)] == got.params[0][std::size_t(T - 1)]);
        CHECK(got.momentum[std::size_t(r)][std::size_t(T - 1)] == got.momentum[0][std::size_t(T - 1)]);
      }
      for (int64_t i = 0; i < psi; ++i) {
        double theta = 0.5;
        for (int s = 1; s <= T; ++s) {
          const double delta = pseudo_gradient(world, s - 1, i);
          theta -= lr * (1 + mu * (1 - std::pow(mu, T - s + 1)) / (1 - mu)) * delta;
        }
        const float p = got.params[0][std::size_t(T - 1)][std::size_t(i)];
        INFO(world << " ranks, after outer step " << T << ", entry " << i << ": expected parameter " << theta << ", got "
                   << p << " — after T outer steps the model must be where T steps of SGD with Nesterov momentum "
                      "(the page's rule, from rest) take it, each round taken as one step of one model");
        CHECK(p == Approx(theta).epsilon(1e-5).margin(1e-6));  // float rounding over 3 steps of O(1) terms: ~1e-7
      }
    }
    INFO(world << " ranks: " << steps << " outer steps must make " << steps << " all-reduces of " << psi
               << " floats; saw " << got.calls << " calls of " << got.bytes << " bytes in all");
    CHECK(got.calls == steps);
    CHECK(got.bytes == steps * psi * 4);
  }
}

TEST_CASE("diloco_outer_step: with outer lr 1 and no momentum it is parameter averaging, step after step", "[ch10][hole:diloco_outer_step]") {
  const int world = 3, steps = 3;
  const int64_t psi = 8;
  Outer got = run_outer(world, steps, psi, 1.0f, 0.0f);
  std::vector<float> theta0(static_cast<std::size_t>(psi), 0.5f);
  for (int t = 0; t < steps; ++t) {
    for (int64_t i = 0; i < psi; ++i) {
      double mean = 0;
      for (int r = 0; r < world; ++r) mean += double(after_inner(r, t, theta0)[std::size_t(i)]) / world;
      INFO("outer step " << t << ", entry " << i << ": the mean of the ranks' parameters is " << mean << ", got "
                         << got.params[0][std::size_t(t)][std::size_t(i)]);
      CHECK(got.params[0][std::size_t(t)][std::size_t(i)] == Approx(mean).epsilon(1e-6).margin(1e-7));
    }
    theta0 = got.params[0][std::size_t(t)];
  }
}

namespace {
Options diloco_problem(const std::string& optimizer) {
  Options o;
  CLI::App app;
  add_common_flags(app, o);
  app.parse(dpt_test::small_problem(8));
  o.optimizer = optimizer;
  o.steps = 10;
  if (optimizer == "adam") o.lr = 1e-3f;
  return o;
}

// DiLoCo on 3 ranks; returns rank 0's model, which was kept alive by the run.
double gap_to_one_device(const Options& o, const Diloco& d, DilocoRun* seen = nullptr) {
  Dataset data = load_dataset(o);
  std::vector<float> weights;
  DilocoRun root;
  std::mutex mutex;
  dpt_test::run_ranks(3, [&](Context& ctx) {
    MLP replica = make_replica(ctx, o);
    DilocoRun run = train_diloco(ctx, o, data, replica, d);
    std::lock_guard<std::mutex> lock(mutex);
    if (ctx.is_root()) weights = flatten(replica.parameters()), root = run;
  });
  if (!root.written) FAIL(root.not_written);  // an unwritten hole stopped the run: say which
  if (seen) *seen = root;
  MLP single = train_single_device(o, data, 3 * o.batch);
  return max_abs_difference(weights, flatten(single.parameters()));
}
}  // namespace

TEST_CASE("DiLoCo with H=1, outer lr 1, momentum 0: inner SGD and momentum = one device, Adam not", "[ch10][hole:diloco_outer_step]") {
  for (const char* opt : {"sgd", "momentum"}) {
    const double gap = gap_to_one_device(diloco_problem(opt), Diloco{1, 1.0f, 0.0f});
    INFO(opt << ": max |w − w_one-device| = " << gap << " after 10 steps on 3 ranks — outer lr 1 without momentum "
             "makes the ranks' mean the new parameters, and the mean of SGD steps is the SGD step on the mean gradient");
    CHECK(gap <= kSingleDeviceTolerance);
  }
  const double adam = gap_to_one_device(diloco_problem("adam"), Diloco{1, 1.0f, 0.0f});
  INFO("adam: max |w − w_one-device| = " << adam << ": Adam's step is not linear in the gradient");
  CHECK(adam >= 10 * kSingleDeviceTolerance);
}

TEST_CASE("DiLoCo with H=5: one all-reduce of Psi floats per outer step, replicas identical after it", "[ch10][hole:diloco_outer_step]") {
  DilocoRun run;
  gap_to_one_device(diloco_problem("sgd"), Diloco{5, 0.7f, 0.9f}, &run);
  REQUIRE(run.written);
  const int64_t psi = 32 * 16 + 16 + 16 * 4 + 4;
  INFO("10 steps at H=5: 2 outer steps of one all-reduce of " << psi << " floats each, plus the loop's loss (1 float a step); saw "
       << run.run.traffic.collective_calls("all_reduce", 0) << " calls, " << run.run.traffic.collective_bytes("all_reduce", 0) << " bytes");
  CHECK(run.outer_steps == 2);
  CHECK(run.run.traffic.collective_calls("all_reduce", 0) == 2 + 10);
  CHECK(run.run.traffic.collective_bytes("all_reduce", 0) == 2 * psi * 4 + 10 * 4);
  CHECK(run.replica_spread == 0);
}
