// test_ch10_feedback.cpp — the error-feedback hole held to its laws, around
// a compressor the test owns (it delivers every third entry), the chapter's
// `none`, top-k and sign: on every rank and after every step,
// Σ delivered + residual = Σ of its gradients (what each reduce call
// reported delivered is recorded by a wrapper); averaged over ranks, the
// updates applied plus the mean residual = the sum of the mean gradients; a
// compressor that delivers everything leaves no residual; the same update on
// every rank, one reduce per step; on a constant gradient the residual stays
// bounded (a residual kept but never sent passes the identities, not this).
#include "support/catch.h"
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>

#include "ch10.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch10;

namespace {
// Delivers the entries i with i % 3 == 0 of a rank's input, averaged by the
// library all-reduce.
class EveryThird : public Compressor {
 public:
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& delivered) override {
    delivered.assign(x.size(), 0.0f);
    for (std::size_t i = 0; i < x.size(); i += 3) delivered[i] = x[i];
    x = delivered;
    comm.all_reduce(x.data(), int64_t(x.size()), ReduceOp::Avg);
  }
  std::string name() const override { return "every third"; }
};

// Forwards to another compressor and keeps what each call reported in
// `delivered`: the d_t of the contract's per-rank identity.
class Recording : public Compressor {
 public:
  explicit Recording(std::unique_ptr<Compressor> inner) : inner_(std::move(inner)) {}
  std::vector<std::vector<float>> delivered;  // [call] (Ψ,)
  void reduce(Communicator& comm, std::vector<float>& x, std::vector<float>& d) override {
    inner_->reduce(comm, x, d);
    delivered.push_back(d);
  }
  std::string name() const override { return inner_->name(); }

 private:
  std::unique_ptr<Compressor> inner_;
};

// Rank r's gradient at step t: entries of mixed sign and size.
std::vector<float> gradient(int r, int t, int64_t psi) {
  std::mt19937 generator(uint32_t(1000 * t + r));
  std::normal_distribution<float> normal(0.0f, 1.0f + float(r));
  std::vector<float> g(static_cast<std::size_t>(psi));
  for (float& v : g) v = normal(generator);
  return g;
}

// What error_feedback_step returned on each rank, step by step, and what
// its reduce calls reported delivered.
struct Feedback {
  std::vector<std::vector<std::vector<float>>> applied, residual;  // [rank][step] (Ψ,)
  std::vector<std::vector<std::vector<float>>> delivered;           // [rank][call] (Ψ,)
};

// T steps of the hole on `world` ranks around a fresh compressor from `make`.
template <class Make>
Feedback run_feedback(int world, int steps, int64_t psi, Make make) {
  Feedback out;
  out.applied.resize(std::size_t(world)), out.residual.resize(std::size_t(world)), out.delivered.resize(std::size_t(world));
  std::mutex mutex;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    Recording compressor(make());
    std::vector<float> residual(std::size_t(psi), 0.0f);
    std::vector<std::vector<float>> applied, residuals;
    for (int t = 0; t < steps; ++t) {
      std::vector<float> g = gradient(ctx.rank, t, psi);
      error_feedback_step(ctx.comm, compressor, g, residual);
      applied.push_back(g), residuals.push_back(residual);
    }
    std::lock_guard<std::mutex> lock(mutex);
    out.applied[std::size_t(ctx.rank)] = applied, out.residual[std::size_t(ctx.rank)] = residuals;
    out.delivered[std::size_t(ctx.rank)] = compressor.delivered;
  });
  return out;
}

// Every rank called reduce once per step, each call's `delivered` of Ψ entries.
void check_one_reduce_per_step(const Feedback& f, int steps, int64_t psi) {
  for (std::size_t r = 0; r < f.delivered.size(); ++r) {
    INFO("rank " << r << " called compressor.reduce " << f.delivered[r].size() << " times in " << steps
                 << " steps: once per step");
    REQUIRE(f.delivered[r].size() == std::size_t(steps));
    for (const auto& d : f.delivered[r]) REQUIRE(d.size() == std::size_t(psi));
  }
}

// The contract's per-rank identity after step T (1-based), on every rank and
// entry: Σ_{t<T} delivered_t + residual_{T-1} = Σ_{t<T} g_t (in double). Its
// mean over ranks alone would pass a residual of owed − the update: the
// other ranks' parts cancel in the mean, not on each rank.
void check_nothing_lost_on_each_rank(const Feedback& f, int steps, int64_t psi, const std::string& why) {
  for (std::size_t r = 0; r < f.delivered.size(); ++r) {
    double gap = 0, scale = 0, kept = 0, computed = 0;
    int64_t worst = 0;
    for (int64_t i = 0; i < psi; ++i) {
      double lhs = f.residual[r][std::size_t(steps - 1)][std::size_t(i)], rhs = 0;
      for (int t = 0; t < steps; ++t) {
        lhs += f.delivered[r][std::size_t(t)][std::size_t(i)];
        rhs += gradient(int(r), t, psi)[std::size_t(i)];
      }
      const double diff = std::fabs(lhs - rhs);
      if (!std::isnan(gap) && (std::isnan(diff) || diff > gap)) gap = diff, worst = i, kept = lhs, computed = rhs;
      scale = std::max(scale, std::fabs(rhs));
    }
    INFO("rank " << r << ", entry " << worst << ", after step " << steps << ": Σ delivered + residual = " << kept
                 << ", Σ of this rank's gradients = " << computed << " — " << why);
    CHECK(gap <= 1e-5 * std::max(1.0, scale));  // a few steps of float sums of O(3) terms: ~1e-6
  }
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

TEST_CASE("error feedback: nothing is lost — on each rank, after every step, Σ delivered + residual = Σ of its gradients, on 1-4 ranks", "[ch10][hole:error_feedback_step]") {
  const int steps = 6;
  const int64_t psi = 30;
  for (int world : {1, 2, 3, 4}) {
    INFO(world << " ranks, " << steps << " steps, a compressor that delivers every third entry");
    Feedback f = run_feedback(world, steps, psi, [] { return std::make_unique<EveryThird>(); });
    check_one_reduce_per_step(f, steps, psi);
    check_same_update_everywhere(f, steps, psi);
    for (int t = 1; t <= steps; ++t)
      check_nothing_lost_on_each_rank(f, t, psi,
        "on each rank, what its messages delivered plus what it still holds must be all it computed: what a "
        "message leaves out is carried and sent later, once — not dropped (no feedback), not counted twice (the "
        "residual added twice), not this step's leftovers alone, and not owed − the update (that is every rank's "
        "part; only this rank's `delivered` is its own)");
  }
}

TEST_CASE("error feedback: averaged over ranks, the updates applied plus the mean residual = the sum of the mean gradients", "[ch10][hole:error_feedback_step]") {
  const int world = 3, steps = 4;
  const int64_t psi = 12;
  Feedback f = run_feedback(world, steps, psi, [] { return std::make_unique<EveryThird>(); });
  check_one_reduce_per_step(f, steps, psi);
  for (int T = 1; T <= steps; ++T)
    for (int64_t i = 0; i < psi; ++i) {
      double lhs = 0, rhs = 0;
      for (int t = 0; t < T; ++t) lhs += f.applied[0][std::size_t(t)][std::size_t(i)];
      for (int r = 0; r < world; ++r) {
        lhs += f.residual[std::size_t(r)][std::size_t(T - 1)][std::size_t(i)] / world;
        for (int t = 0; t < T; ++t) rhs += double(gradient(r, t, psi)[std::size_t(i)]) / world;
      }
      INFO("after step " << T << ", entry " << i << ": Σ updates applied + mean residual = " << lhs
                         << ", Σ of the mean gradients = " << rhs
                         << " — the updates so far may lag the true sum only by what the ranks still hold");
      REQUIRE(lhs == Approx(rhs).epsilon(1e-5).margin(1e-5));
    }
}

TEST_CASE("error feedback around a compressor that delivers everything leaves no residual", "[ch10][hole:error_feedback_step]") {
  const int steps = 3;
  const int64_t psi = 16;
  for (int world : {1, 3}) {
    Feedback f = run_feedback(world, steps, psi, [] { return make_compressor("none", {{psi}}, 1); });
    check_one_reduce_per_step(f, steps, psi);
    for (int r = 0; r < world; ++r)
      for (int t = 0; t < steps; ++t)
        for (int64_t i = 0; i < psi; ++i) {
          INFO(world << " ranks, rank " << r << ", step " << t << ", entry " << i << ": residual "
                     << f.residual[std::size_t(r)][std::size_t(t)][std::size_t(i)]
                     << " — `none` delivers all a rank owes, so nothing is left to carry");
          REQUIRE(std::fabs(f.residual[std::size_t(r)][std::size_t(t)][std::size_t(i)]) <= 1e-6);
        }
  }
}

TEST_CASE("error feedback around top-k and sign: on each rank nothing is lost, every rank applies the same bits", "[ch10][hole:error_feedback_step]") {
  const int steps = 5;
  const int64_t psi = 48;
  for (const char* spec : {"topk:5", "sign"})
    for (int world : {2, 4}) {
      INFO(spec << " on " << world << " ranks, " << steps << " steps");
      Feedback f = run_feedback(world, steps, psi, [&] { return make_compressor(spec, {{6, 4}, {24}}, 3); });
      check_one_reduce_per_step(f, steps, psi);
      check_same_update_everywhere(f, steps, psi);
      check_nothing_lost_on_each_rank(f, steps, psi,
          "with error feedback nothing a rank computed is lost, only delayed: on each rank, Σ delivered + "
          "residual = Σ of its own gradients (owed − the update instead of owed − delivered keeps only the "
          "average of this over ranks)");
    }
}

// Σd + e = Σg holds for a residual that is kept and never sent, too: this
// law sees that case. On a gradient that does not change, what a step leaves
// out must go out with later messages, so every entry is sent in its turn
// and the residual stays bounded; kept and never sent, it grows
// by g − (what top-k takes of g) every step. Bound: (Ψ/k)·max|g|, an entry
// waiting at most about Ψ/k steps for its turn. Measured (200 steps, Ψ 48,
// k 5, four gradients): at most 4.0·max|g| with error feedback; 117·max|g|
// or more with a residual that never goes out.
TEST_CASE("error feedback: what a message leaves out goes out later — on a constant gradient the residual stays bounded", "[ch10][hole:error_feedback_step]") {
  const int steps = 200, k = 5;
  const int64_t psi = 48;
  std::vector<double> worst(2, 0.0), largest_g(2, 0.0);
  std::mutex mutex;
  dpt_test::run_ranks(2, [&](Context& ctx) {
    std::unique_ptr<Compressor> topk = make_compressor("topk:" + std::to_string(k), {{6, 4}, {24}}, 3);
    const std::vector<float> g0 = gradient(ctx.rank, 0, psi);  // the same every step
    std::vector<float> residual(std::size_t(psi), 0.0f);
    double most = 0, g_max = 0;
    for (float v : g0) g_max = std::max(g_max, double(std::fabs(v)));
    for (int t = 0; t < steps; ++t) {
      std::vector<float> g = g0;
      error_feedback_step(ctx.comm, *topk, g, residual);
      for (float e : residual) most = std::max(most, double(std::fabs(e)));
    }
    std::lock_guard<std::mutex> lock(mutex);
    worst[std::size_t(ctx.rank)] = most, largest_g[std::size_t(ctx.rank)] = g_max;
  });
  for (std::size_t r = 0; r < 2; ++r) {
    const double bound = double(psi) / k * largest_g[r];
    INFO("rank " << r << ": the largest |residual| over " << steps << " steps of the same gradient is " << worst[r]
                 << ", " << worst[r] / largest_g[r] << " x max|g| (bound " << bound
                 << "): what a step leaves out must be sent with a later step, or it piles up");
    CHECK(worst[r] <= bound);
  }
}
