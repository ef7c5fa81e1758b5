// test_ch10_feedback.cpp — the error-feedback hole against a serial
// simulation of every rank written out here, around a compressor the test
// owns (it delivers every third entry), then around the chapter's top-k and
// sign: the invariant Σ applied + mean residual = Σ mean gradient over
// several steps on 2–4 ranks, the same update on every rank, one reduce per step.
#include "support/catch.h"
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>

#include "ch10.h"
#include "support/ranks.h"
#include "support/single_device.h"  // nan_max

using namespace dpt;
using namespace dpt::ch10;

namespace {
// Delivers the entries i with i % 3 == 0 of a rank's input, averaged by the
// library all-reduce; counts its calls.
class EveryThird : public Compressor {
 public:
  int calls = 0;
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    ++calls;
    delivered.assign(x.size(), 0.0f);
    for (std::size_t i = 0; i < x.size(); i += 3) delivered[i] = x[i];
    x = delivered;
    comm.all_reduce(x.data(), int64_t(x.size()), ReduceOp::Avg);
  }
  std::string name() const override { return "every third"; }
};

// Rank r's gradient at step t: entries of mixed sign and size.
std::vector<float> gradient(int r, int t, int64_t psi) {
  std::mt19937 generator(uint32_t(1000 * t + r));
  std::normal_distribution<float> normal(0.0f, 1.0f + float(r));
  std::vector<float> g(static_cast<std::size_t>(psi));
  for (float& v : g) v = normal(generator);
  return g;
}

// What error_feedback_step returned on each rank, step by step.
struct Feedback {
  std::vector<std::vector<std::vector<float>>> applied, residual;  // [rank][step] (Ψ,)
  std::vector<int> calls;                                           // reduce calls per rank
};

// T steps of the hole on `world` ranks around a fresh compressor from `make`.
template <class Make>
Feedback run_feedback(int world, int steps, int64_t psi, Make make) {
  Feedback out;
  out.applied.resize(std::size_t(world)), out.residual.resize(std::size_t(world)), out.calls.resize(std::size_t(world));
  std::mutex mutex;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    auto compressor = make();
    std::vector<float> residual(std::size_t(psi), 0.0f);
    std::vector<std::vector<float>> applied, residuals;
    for (int t = 0; t < steps; ++t) {
      std::vector<float> g = gradient(ctx.rank, t, psi);
      error_feedback_step(ctx.comm, *compressor, g, residual);
      applied.push_back(g), residuals.push_back(residual);
    }
    std::lock_guard<std::mutex> lock(mutex);
    out.applied[std::size_t(ctx.rank)] = applied, out.residual[std::size_t(ctx.rank)] = residuals;
    if (auto* counted = dynamic_cast<EveryThird*>(compressor.get())) out.calls[std::size_t(ctx.rank)] = counted->calls;
  });
  return out;
}

// max over entries of |Σ_t applied_t + mean_r residual_r,T − Σ_t mean_r g_r,t|
// after the last step, and the largest |Σ_t mean g| (in double).
std::pair<double, double> invariant_gap(const Feedback& f, int steps, int64_t psi) {
  const int world = int(f.applied.size());
  double gap = 0, scale = 0;
  for (int64_t i = 0; i < psi; ++i) {
    double lhs = 0, rhs = 0;
    for (int t = 0; t < steps; ++t) {
      lhs += f.applied[0][std::size_t(t)][std::size_t(i)];
      for (int r = 0; r < world; ++r) rhs += double(gradient(r, t, psi)[std::size_t(i)]) / world;
    }
    for (int r = 0; r < world; ++r) lhs += double(f.residual[std::size_t(r)].back()[std::size_t(i)]) / world;
    gap = dpt_test::nan_max(gap, std::fabs(lhs - rhs));
    scale = std::max(scale, std::fabs(rhs));
  }
  return {gap, scale};
}

void check_same_update_everywhere(const Feedback& f, int steps, int64_t psi) {
  for (std::size_t r = 1; r < f.applied.size(); ++r)
    for (int t = 0; t < steps; ++t) {
      INFO("step " << t << ": rank " << r << " applies other bits than rank 0 — the update must be the compressor's "
                   "mean, the same on every rank (a rank that adds something of its own afterwards drifts apart)");
      REQUIRE(std::memcmp(f.applied[r][std::size_t(t)].data(), f.applied[0][std::size_t(t)].data(), std::size_t(psi) * 4) == 0);
    }
}
}  // namespace

TEST_CASE("error feedback: nothing is lost — Σ applied + mean residual = Σ mean gradient, on 1-4 ranks", "[ch10][hole:error_feedback_step]") {
  const int steps = 6;
  const int64_t psi = 30;
  for (int world : {1, 2, 3, 4}) {
    INFO(world << " ranks, " << steps << " steps, a compressor that delivers every third entry");
    Feedback f = run_feedback(world, steps, psi, [] { return std::make_unique<EveryThird>(); });
    for (int r = 0; r < world; ++r) {
      INFO("rank " << r << " called compressor.reduce " << f.calls[std::size_t(r)] << " times in " << steps
                   << " steps: once per step");
      CHECK(f.calls[std::size_t(r)] == steps);
    }
    check_same_update_everywhere(f, steps, psi);
    auto [gap, scale] = invariant_gap(f, steps, psi);
    INFO("max |Σ applied + mean residual − Σ mean gradient| = " << gap << " (Σ mean gradient up to " << scale
         << "): what a message leaves out must be carried and sent later, once — not dropped (no feedback), "
            "not counted twice (the residual added twice), not replaced by this step's leftovers alone");
    CHECK(gap <= 1e-5 * std::max(1.0, scale));  // 6 steps of float sums of O(3) terms: ~1e-6
  }
}

TEST_CASE("error feedback: the residual is what this rank owed and its message left out", "[ch10][hole:error_feedback_step]") {
  // The serial simulation, rank by rank: owed p = g + e; delivered = p on
  // every third entry; e' = p − delivered.
  const int world = 3, steps = 4;
  const int64_t psi = 12;
  Feedback f = run_feedback(world, steps, psi, [] { return std::make_unique<EveryThird>(); });
  for (int r = 0; r < world; ++r) {
    std::vector<double> e(std::size_t(psi), 0);
    for (int t = 0; t < steps; ++t) {
      std::vector<float> g = gradient(r, t, psi);
      for (int64_t i = 0; i < psi; ++i) {
        const double owed = double(g[std::size_t(i)]) + e[std::size_t(i)];
        e[std::size_t(i)] = i % 3 == 0 ? 0 : owed;
        INFO("rank " << r << ", step " << t << ", entry " << i << (i % 3 == 0 ? " (delivered)" : " (not delivered)")
                     << ": residual should be " << e[std::size_t(i)] << ", got "
                     << f.residual[std::size_t(r)][std::size_t(t)][std::size_t(i)]);
        REQUIRE(f.residual[std::size_t(r)][std::size_t(t)][std::size_t(i)] == Approx(e[std::size_t(i)]).epsilon(1e-5).margin(1e-5));
      }
    }
  }
}

TEST_CASE("error feedback around top-k and sign: the invariant holds, every rank applies the same bits", "[ch10][hole:error_feedback_step]") {
  const int steps = 5;
  const int64_t psi = 48;
  for (const char* spec : {"topk:5", "sign"})
    for (int world : {2, 4}) {
      INFO(spec << " on " << world << " ranks, " << steps << " steps");
      Feedback f = run_feedback(world, steps, psi, [&] { return make_compressor(spec, {{6, 4}, {24}}, 3); });
      check_same_update_everywhere(f, steps, psi);
      auto [gap, scale] = invariant_gap(f, steps, psi);
      INFO("max |Σ applied + mean residual − Σ mean gradient| = " << gap << ": with error feedback nothing a rank "
                                                                       "computed is lost, only delayed");
      CHECK(gap <= 1e-5 * std::max(1.0, scale));
    }
}
