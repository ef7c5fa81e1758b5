// test_ch06.cpp — chapter 06's holes: average_parameters against a serial
// mean (bits equal on every rank, one all-reduce); local_sgd_step against a
// serial simulation of every replica (SGD and momentum written out in double
// here, sharing no code with dpt's optimizers), step by step: what each step
// sent, every rank's parameters, the optimizer state's bits, the bytes. Then
// training with both: H = 1 with SGD and momentum matches one device, with
// Adam it does not; H > 1 sends 1/H of the bytes. Then the chapter binary
// under threads and mpirun -np 4.
//
// Here: average_parameters and local_sgd_step against the serial simulation;
// training with them in test_ch06_training.cpp, the chapter's program in
// test_ch06_chapter.cpp.
#include "support/catch.h"
#include <cmath>
#include <cstring>
#include <mutex>

#include "ch06.h"
#include "dpt/data_parallel.h"
#include "local_sgd.h"
#include "support/ranks.h"
#include "support/single_device.h"  // nan_max

using namespace dpt;
using ch06::Averaging;
using ch06::Schedule;

// ----------------------------------------------------------------------------
// average_parameters: the serial mean, the same bits everywhere, one all-reduce

TEST_CASE("average_parameters: every rank gets the serial mean, bit-identical, in one all-reduce", "[ch06]") {
  for (int world : {1, 2, 3, 4}) {
    INFO(world << " ranks");
    // Rank r's element i: small integers, so the serial sum is exact in any order.
    auto value = [](int r, int64_t i) { return float((r + 1) * 100 + i % 13); };
    std::vector<std::vector<float>> got(static_cast<std::size_t>(world));
    int64_t calls = -1, bytes = -1;
    std::mutex mutex;
    dpt_test::run_ranks(world, [&](Context& ctx) {
      std::vector<Tensor> tensors = {Tensor::zeros({3, 5}, ctx.device), Tensor::zeros({7}, ctx.device)};
      int64_t i = 0;
      for (Tensor& t : tensors)
        for (int64_t k = 0; k < t.numel(); ++k) t.data()[k] = value(ctx.rank, i++);
      ctx.comm.barrier();
      ch06::average_parameters(ctx.comm, tensors);
      ctx.comm.barrier();  // every rank's call is logged before rank 0 reads
      std::lock_guard<std::mutex> lock(mutex);
      got[std::size_t(ctx.rank)] = flatten(tensors);
      if (ctx.is_root()) calls = ctx.comm.traffic().collective_calls("all_reduce", 0),
                         bytes = ctx.comm.traffic().collective_bytes("all_reduce", 0);
    });
    for (int r = 0; r < world; ++r) {
      INFO("rank " << r << ": the tensors keep their 22 elements");
      REQUIRE(got[std::size_t(r)].size() == 22);
      INFO("rank " << r << " holds other bits than rank 0 after averaging: every rank must receive the same mean");
      CHECK(std::memcmp(got[std::size_t(r)].data(), got[0].data(), 22 * sizeof(float)) == 0);  // same bits
    }
    double worst = 0;
    for (int64_t i = 0; i < 22; ++i) {
      double mean = 0;
      for (int r = 0; r < world; ++r) mean += value(r, i);
      mean /= world;
      worst = dpt_test::nan_max(worst, std::fabs(got[0][std::size_t(i)] - mean) / mean);
    }
    {
      INFO("the result is not the mean over ranks (largest relative error " << worst << "): a sum (ReduceOp::Sum) "
           "is " << world << "x the mean");
      CHECK(worst <= 2.4e-7);  // exact sum times fl(1/n): two roundings, <= 2^-23 relative
    }
    INFO("all tensors must go in one all-reduce of 22 floats (88 bytes): saw " << calls << " calls, " << bytes
         << " bytes in all");
    CHECK(calls == 1);  // one payload for all tensors
    CHECK(bytes == 22 * 4);
  }
}

// ----------------------------------------------------------------------------
// local_sgd_step: against a serial simulation of every replica, step by step

namespace {
// Rank r's gradient at step t, element i: fixed numbers, different per rank
// and step, O(1). The replicas' gradients do not depend on their weights here,
// which the contract does not care about and which keeps the oracle short.
float gradient(int r, int64_t t, int64_t i) { return std::sin(0.7f * float(i) + 1.3f * float(r) + 0.37f * float(t)); }

// The oracle: R replicas of Ψ = 10 weights under torch's SGD (momentum μ,
// μ = 0: plain), in double, with the contract's schedule written out as a
// loop over local steps. Returns one letter per step (G/P/-) and fills
// `weights[t][r]` (after step t) and `state[t][r]` (the velocity).
struct Simulation {
  std::string actions;
  std::vector<std::vector<std::vector<double>>> weights, state;
  std::vector<int64_t> bytes;  // all-reduce bytes per rank, per step
};
Simulation simulate(int world, const ch06::Schedule& s, float momentum, int64_t steps, float lr) {
  const int64_t psi = 10;
  std::vector<std::vector<double>> w(std::size_t(world), std::vector<double>(psi, 0.5)), v(w);
  Simulation out;
  int64_t local = 0;  // local steps taken since the warm-up ended
  for (int64_t t = 0; t < steps; ++t) {
    auto mean = [&](std::vector<std::vector<double>>& x) {
      for (int64_t i = 0; i < psi; ++i) {
        double m = 0;
        for (auto& xr : x) m += xr[std::size_t(i)] / world;
        for (auto& xr : x) xr[std::size_t(i)] = m;
      }
    };
    bool warm = t < s.warmup;
    for (int r = 0; r < world; ++r)
      for (int64_t i = 0; i < psi; ++i) {
        double g = 0;
        if (warm) for (int q = 0; q < world; ++q) g += double(gradient(q, t, i)) / world;
        else g = gradient(r, t, i);
        double& b = v[std::size_t(r)][std::size_t(i)];
        b = t == 0 ? g : momentum * b + g;  // torch: the first velocity is the gradient
        w[std::size_t(r)][std::size_t(i)] -= lr * b;
      }
    char action = warm ? 'G' : '-';
    if (!warm && ++local % s.every == 0) {
      action = 'P';
      mean(w);
      if (s.average_state) mean(v);
    }
    out.actions += action;
    int64_t state_floats = momentum > 0 && s.average_state ? 1 : 0;
    out.bytes.push_back(action == 'G' ? 4 * psi : action == 'P' ? 4 * psi * (1 + state_floats) : 0);
    out.weights.push_back(w), out.state.push_back(v);
  }
  return out;
}

// The same run through local_sgd_step on `world` rank threads.
struct Stepped {
  std::string actions;  // rank 0's
  std::vector<std::vector<std::vector<float>>> weights, state;  // [t][r]
  std::vector<std::vector<int64_t>> bytes;                       // [t][r]
};
Stepped run_steps(int world, const ch06::Schedule& s, const std::string& optimizer, int64_t steps, float lr) {
  Stepped out;
  out.actions.assign(std::size_t(steps), '?');
  out.weights.assign(std::size_t(steps), std::vector<std::vector<float>>(std::size_t(world)));
  out.state = out.weights;
  out.bytes.assign(std::size_t(steps), std::vector<int64_t>(std::size_t(world)));
  std::mutex mutex;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    std::vector<Tensor> params = {Tensor::full({2, 3}, 0.5f, ctx.device), Tensor::full({4}, 0.5f, ctx.device)};
    for (Tensor& p : params) p.set_requires_grad(true);
    auto opt = make_optimizer(optimizer, params, lr);
    ctx.comm.barrier();
    ctx.comm.traffic().clear();
    ctx.comm.barrier();
    for (int64_t t = 0; t < steps; ++t) {
      int64_t i = 0;
      for (Tensor& p : params) {
        Tensor g = Tensor::zeros(p.shape(), ctx.device);
        for (int64_t k = 0; k < g.numel(); ++k) g.data()[k] = gradient(ctx.rank, t, i++);
        p.set_grad(g);
      }
      int64_t before = ctx.comm.traffic().collective_bytes("all_reduce", ctx.rank);
      ch06::Averaging a = ch06::local_sgd_step(ctx.comm, s, t, params, *opt);
      int64_t sent = ctx.comm.traffic().collective_bytes("all_reduce", ctx.rank) - before;
      std::vector<Tensor> state = opt->state_tensors();
      std::lock_guard<std::mutex> lock(mutex);
      out.weights[std::size_t(t)][std::size_t(ctx.rank)] = flatten(params);
      out.state[std::size_t(t)][std::size_t(ctx.rank)] = state.empty() ? std::vector<float>{} : flatten(state);
      out.bytes[std::size_t(t)][std::size_t(ctx.rank)] = sent;
      if (ctx.is_root()) out.actions[std::size_t(t)] = a == Averaging::Gradients ? 'G' : a == Averaging::Parameters ? 'P' : '-';
    }
  });
  return out;
}

// Every property of the contract, step by step, each failure in words.
void check_against_simulation(int world, const ch06::Schedule& s, const std::string& optimizer, int64_t steps) {
  const float lr = 0.1f, momentum = optimizer == "momentum" ? 0.9f : 0.0f;
  Simulation want = simulate(world, s, momentum, steps, lr);
  Stepped got = run_steps(world, s, optimizer, steps, lr);
  INFO(world << " ranks, " << optimizer << ", H = " << s.every << ", W = " << s.warmup
             << (s.average_state ? ", --average-state" : "") << "; G: gradients averaged, P: parameters averaged, -: "
             "nothing sent");
  if (got.actions != want.actions) {  // the first step that differs; the weights would only echo it
    std::size_t t = 0;
    while (t < want.actions.size() && got.actions[t] == want.actions[t]) ++t;
    FAIL_CHECK("what each step sent (returned): got " << got.actions << "; step " << t << " returned "
               << got.actions[t] << " where the contract sends " << want.actions[t] << ". Warm-up steps average "
               "gradients; after them, a run of W + kH steps must end with identical replicas, averaged k times");
    return;  // fix the schedule first: every later check would fail with it
  }
  for (int64_t t = 0; t < steps; ++t) {
    const char action = want.actions[std::size_t(t)];
    for (int r = 0; r < world; ++r) {
      INFO("step " << t << " (" << action << "), rank " << r);
      const std::vector<float>& w = got.weights[std::size_t(t)][std::size_t(r)];
      REQUIRE(w.size() == 10);
      double worst = 0;
      for (std::size_t i = 0; i < w.size(); ++i)
        worst = dpt_test::nan_max(worst, std::fabs(double(w[i]) - want.weights[std::size_t(t)][std::size_t(r)][i]));
      if (!(worst <= 1e-5)) {  // float32 against double over a few O(0.1) steps: ~1e-7
        FAIL_CHECK("the parameters differ from the serial simulation of the replicas by " << worst << ": "
                   << (action == 'G' ? "a warm-up step is one optimizer step on the mean gradient over ranks"
                       : action == 'P' ? "an averaging step is a local optimizer step, then the mean of the replicas"
                                       : "a local step is one optimizer step on this rank's own gradient")
                   << "; the optimizer state is never reset (kept, or averaged with --average-state)");
        return;  // the first step that goes wrong says the most
      }
      if (action != '-' && std::memcmp(w.data(), got.weights[std::size_t(t)][0].data(), w.size() * sizeof(float)) != 0)
        FAIL_CHECK("the ranks hold different parameter bits at the end of a step that "
                   << (action == 'G' ? "averaged gradients" : "averaged parameters") << ": every rank must end it "
                   "with the same bits");
      const std::vector<float>& v = got.state[std::size_t(t)][std::size_t(r)];
      if (action == 'P' && s.average_state && !v.empty() &&
          std::memcmp(v.data(), got.state[std::size_t(t)][0].data(), v.size() * sizeof(float)) != 0)
        FAIL_CHECK("with --average-state the optimizer state must be averaged with the parameters, to the same bits "
                   "on every rank; rank " << r << "'s differs from rank 0's");
      int64_t sent = got.bytes[std::size_t(t)][std::size_t(r)];
      if (sent != want.bytes[std::size_t(t)])
        FAIL_CHECK("sent " << sent << " bytes through all_reduce, expected " << want.bytes[std::size_t(t)]
                   << " (4 per averaged float: gradients in the warm-up, parameters (and with --average-state the "
                      "state) at an averaging, nothing otherwise)");
    }
  }
}
}  // namespace

TEST_CASE("local_sgd_step: H=1 without warm-up averages parameters after every optimizer step",
          "[ch06][needs:average_parameters]") {
  check_against_simulation(3, Schedule{true, 1, 0, false}, "sgd", 5);
}

TEST_CASE("local_sgd_step: every H local steps, so that a run of kH steps ends averaged",
          "[ch06][needs:average_parameters]") {
  check_against_simulation(3, Schedule{true, 3, 0, false}, "sgd", 10);
  check_against_simulation(2, Schedule{true, 4, 0, false}, "momentum", 9);
}

TEST_CASE("local_sgd_step: W warm-up steps average gradients, then local steps", "[ch06][needs:average_parameters]") {
  check_against_simulation(3, Schedule{true, 3, 2, false}, "momentum", 12);
  check_against_simulation(2, Schedule{true, 1, 3, false}, "sgd", 6);
  check_against_simulation(2, Schedule{true, 5, 20, false}, "sgd", 8);  // warm-up longer than the run
}

TEST_CASE("local_sgd_step: momentum buffers stay each rank's own, never reset", "[ch06][needs:average_parameters]") {
  check_against_simulation(4, Schedule{true, 2, 0, false}, "momentum", 8);
}

TEST_CASE("local_sgd_step: --average-state averages the momentum buffers too, to the same bits",
          "[ch06][needs:average_parameters]") {
  check_against_simulation(3, Schedule{true, 2, 1, true}, "momentum", 7);
}
