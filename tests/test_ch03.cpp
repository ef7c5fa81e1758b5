// test_ch03.cpp — chapter 03's holes against oracles that share no code with
// them: the master copy built again in the test, sharding checked as a set
// property, averages against a serial mean and the traffic log, the step
// against one device computing the whole global batch serially; then the whole
// chapter against single-device training (threads and real mpirun).
//
// Every failure says which property failed, in words (see FAIL_CHECK texts):
// docs/instructor/ch03_key.md lists the mistakes each one catches.
#include "support/catch.h"
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <algorithm>
#include <functional>
#include <sstream>

#include "ch03.h"
#include "dpt/data_parallel.h"
#include "dpt/ops.h"
#include "dpt/step_check.h"
#include "support/ranks.h"
#include "support/single_device.h"

using namespace dpt;

namespace {
// A small problem for the hole tests: 6 features, 4 classes, a 6-10-4 MLP.
constexpr int64_t kSamples = 96;
Dataset small_data() { return make_synthetic(kSamples, 6, 4, 5); }
MLP small_model(Device& device, uint64_t seed) {
  Rng rng(seed);
  return MLP({6, 10, 4}, device, rng);
}
// Step s's global batch: `size` distinct indices, in a scrambled order.
std::vector<int64_t> global_batch(int64_t step, int64_t size) {
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < size; ++i) idx.push_back((step * 29 + i * 13) % kSamples);
  return idx;
}
std::vector<float> weights_of(const MLP& m) { return flatten(m.parameters()); }
std::vector<float> grads_of(const MLP& m) {
  std::vector<Tensor> g;
  for (const Tensor& p : m.parameters()) g.push_back(p.grad());
  return flatten(g);
}
double max_abs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) m = std::max(m, double(std::fabs(x)));
  return m;
}
int64_t bits_differing(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}
// The oracle: one device, serially, on the whole batch: the gradient of the
// batch's mean loss at the model's weights (the model is left with it in grad()).
std::vector<float> one_device_gradient(MLP& model, const Dataset& data, const std::vector<int64_t>& batch) {
  for (Tensor& p : model.parameters()) p.zero_grad();
  Batch b = gather_batch(data, batch, Device::host());
  softmax_cross_entropy(model.forward(b.x), b.y).backward();
  return grads_of(model);
}
// g = a / b's least-squares factor: 1 when a = b, N when a is N × b (a sum for a mean).
double factor(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], bb += double(b[i]) * b[i];
  return bb > 0 ? ab / bb : 0;
}
}  // namespace

// ----------------------------------------------------------------------------
// replicate_master

TEST_CASE("replicate_master: every replica holds the master copy, bit for bit", "[ch03]") {
  Device& host = Device::host();
  const std::vector<float> master_weights = weights_of(small_model(host, 7));  // built again: the oracle
  for (int world : {1, 2, 3, 4}) {
    std::mutex mutex;
    std::map<int, std::vector<float>> replicas;
    dpt_test::run_ranks(world, [&](Context& ctx) {
      std::optional<MLP> master;
      if (ctx.is_root()) master.emplace(small_model(host, 7));
      MLP replica = small_model(ctx.device, 100 + ctx.rank);  // a start of its own
      ch03::replicate_master(ctx.comm, master ? &*master : nullptr, replica);
      std::lock_guard<std::mutex> lock(mutex);
      replicas[ctx.rank] = weights_of(replica);
    });
    for (int r = 0; r < world; ++r) {
      int64_t wrong = bits_differing(replicas[r], master_weights);
      if (wrong == 0) continue;
      FAIL_CHECK("with " << world << " ranks, rank " << r << "'s replica differs from the master copy in " << wrong
                         << " of " << master_weights.size() << " weights: every replica must start as the "
                         << "master copy (rank " << r << " kept a start of its own, or got another one)");
      break;  // one message per world size
    }
  }
}

// ----------------------------------------------------------------------------
// shard_indices

namespace {
// What is wrong with `world` ranks' shards of `global`, in words; "" when nothing.
std::string shard_problem(const std::vector<int64_t>& global, int world) {
  const int64_t total = int64_t(global.size());
  std::map<int64_t, std::vector<int>> owners;  // entry -> ranks whose shard holds it
  std::vector<int64_t> sizes;
  std::ostringstream out;
  out << "with " << world << (world == 1 ? " rank" : " ranks") << " and a global batch of " << total << ": ";
  for (int r = 0; r < world; ++r) {
    std::vector<int64_t> mine = ch03::shard_indices(global, r, world);
    if (mine != ch03::shard_indices(global, r, world))
      return out << "two calls with the same arguments gave rank " << r << " different shards", out.str();
    for (int64_t i : mine)
      if (std::find(global.begin(), global.end(), i) == global.end())
        return out << "rank " << r << " got " << i << ", which is not an entry of the global batch: a shard holds "
                   << "entries of `global` (sample indices), not positions in it", out.str();
    for (int64_t i : mine) owners[i].push_back(r);
    sizes.push_back(int64_t(mine.size()));
  }
  for (int64_t i : global)
    if (owners[i].size() > 1)
      return out << "sample " << i << " is in the shards of ranks " << owners[i].front() << " and "
                 << owners[i].back() << ": shards must be disjoint (it would count twice)", out.str();
  for (int64_t i : global)
    if (owners[i].empty())
      return out << "sample " << i << " is in no rank's shard: it was dropped (shards must cover the batch)", out.str();
  for (int r = 0; r < world; ++r)
    if (sizes[r] != total / world)
      return out << "rank " << r << " got " << sizes[r] << " samples, not " << total / world << ": shards must "
                 << "be equal (only then is the mean of the shards' mean losses the batch's mean loss)", out.str();
  return "";
}
}  // namespace

TEST_CASE("shard_indices: shards are equal, disjoint and cover the global batch", "[ch03]") {
  std::vector<int64_t> global = global_batch(3, 24);  // 24 distinct entries, scrambled
  for (int world : {1, 2, 3, 4, 6, 8, 12, 24}) {
    std::string problem = shard_problem(global, world);
    if (!problem.empty()) {
      FAIL_CHECK(problem);
      break;  // one message: the smallest world size that shows it
    }
  }
}

TEST_CASE("shard_indices: a batch that does not divide is a clear error", "[ch03]") {
  std::vector<int64_t> global(10);
  CHECK_THROWS_AS(ch03::shard_indices(global, 0, 4), Error);
  CHECK_THROWS_WITH(ch03::shard_indices(global, 0, 4), contains_text("10") && contains_text("4"));
}

// ----------------------------------------------------------------------------
// host_average_gradients

namespace {
// Rank r's gradient for parameter p, element j: distinct per rank, parameter
// and element, and spread over magnitudes so that sums in another order round
// differently (a mean over the wrong ranks, or summed in two orders, shows).
float local_value(int rank, std::size_t p, int64_t j) {
  return (float(rank + 1) * 0.37f + float(p) - 0.011f * float(j)) * std::pow(10.0f, float((rank * 7 + j) % 5) - 2);
}

std::vector<Tensor> local_gradients(Context& ctx) {
  std::vector<Tensor> grads = {Tensor::empty({3, 4}, ctx.device), Tensor::empty({5}, ctx.device)};
  for (std::size_t p = 0; p < grads.size(); ++p)
    for (int64_t j = 0; j < grads[p].numel(); ++j) grads[p].data()[j] = local_value(ctx.rank, p, j);
  return grads;
}

// Every rank's averaged gradients (one host vector per rank), from a run of `world` ranks.
std::vector<std::vector<float>> averaged(int world) {
  std::mutex mutex;
  std::vector<std::vector<float>> results(world);
  dpt_test::run_ranks(world, [&](Context& ctx) {
    std::vector<Tensor> grads = local_gradients(ctx);
    ch03::host_average_gradients(ctx.comm, grads);
    bool on_device = &grads[0].device() == &ctx.device && &grads[1].device() == &ctx.device;
    std::lock_guard<std::mutex> lock(mutex);
    results[ctx.rank] = on_device ? flatten(grads) : std::vector<float>{};
  });
  return results;
}
}  // namespace

TEST_CASE("host_average_gradients: every rank gets the serial mean, on its device", "[ch03]") {
  for (int world : {1, 2, 3, 4}) {
    std::vector<std::vector<float>> results = averaged(world);
    std::vector<float> mean;  // serially, in double
    for (std::size_t p = 0; p < 2; ++p)
      for (int64_t j = 0; j < (p == 0 ? 12 : 5); ++j) {
        double m = 0;
        for (int q = 0; q < world; ++q) m += local_value(q, p, j) / double(world);
        mean.push_back(float(m));
      }
    bool root_right = false;
    for (int r = 0; r < world; ++r) {
      if (results[r].empty()) {
        FAIL_CHECK("rank " << r << "'s gradients are no longer on its device: the mean must come back to it");
        break;
      }
      double worst = 0;
      for (std::size_t i = 0; i < mean.size(); ++i)
        worst = std::max(worst, std::fabs(double(results[r][i]) - mean[i]) / (1e-3 + std::fabs(mean[i])));
      if (worst <= 1e-5) {  // float sums of up to 4 terms: a few 1e-7 relative
        root_right = root_right || r == 0;
      } else {
        double f = factor(results[r], mean);
        FAIL_CHECK("with " << world << " ranks rank " << r << " does not hold the mean over ranks (worst relative "
                           << "error " << worst << ")"
                           << (std::fabs(f - world) < 0.01 && world > 1
                                   ? ": it holds " + std::to_string(world) + "x the mean, a sum not divided by N"
                                   : root_right ? ": rank 0 holds it, rank " + std::to_string(r) +
                                                      " does not (the mean must reach every rank)"
                                                : ""));
        break;  // one message per world size
      }
    }
  }
}

TEST_CASE("host_average_gradients: every rank holds the same bits", "[ch03]") {
  for (int world : {3, 4}) {
    std::vector<std::vector<float>> results = averaged(world);
    for (int r = 1; r < world; ++r) {
      int64_t wrong = bits_differing(results[r], results[0]);
      if (wrong == 0) continue;
      double apart = max_abs_difference(results[r], results[0]) / max_abs(results[0]);
      FAIL_CHECK("with " << world << " ranks rank " << r << "'s mean differs from rank 0's in " << wrong << " of "
                         << results[0].size() << " values, by up to " << apart << " relative: "
                         << (apart < 1e-5 ? "each rank got its own rounding (a sum in another order), "
                                          : "rank " + std::to_string(r) + " did not get rank 0's mean, ")
                         << "so replicas fed these would drift apart (every rank must get one mean, computed once)");
      break;  // one message per world size
    }
  }
}

TEST_CASE("host_average_gradients: every byte goes through rank 0, S up and S down per rank", "[ch03]") {
  const int world = 4;
  const int64_t bytes = (12 + 5) * 4;  // S: both gradients
  std::vector<std::vector<int64_t>> matrix;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    std::vector<Tensor> grads = local_gradients(ctx);
    ch03::host_average_gradients(ctx.comm, grads);
    ctx.comm.barrier();
    if (ctx.is_root()) matrix = ctx.comm.traffic().matrix();
  });
  for (int src = 0; src < world; ++src)
    for (int dst = 0; dst < world; ++dst) {
      bool through_host = (src == 0) != (dst == 0);
      int64_t expected = through_host ? bytes : 0;
      if (matrix[src][dst] == expected) continue;
      FAIL_CHECK("rank " << src << " sent " << matrix[src][dst] << " bytes to rank " << dst << ", expected "
                         << expected << " (S = " << bytes << "): "
                         << (through_host ? "each rank's gradients go up to the host once, and the mean comes "
                                            "down once, by send/recv (library collectives are not the hole)"
                                          : "every message must have the host, rank 0, at one end"));
    }
}

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

// ----------------------------------------------------------------------------
// the chapter

TEST_CASE("chapter: 4 ranks x batch 8 give the weights of one device x batch 32", "[ch03]") {
  dpt_test::check_matches_single_device("ch03_naive_dp", 4, false, "");
}

TEST_CASE("chapter: under mpirun, 2 and 4 processes give the weights of one device", "[ch03][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  for (int np : {2, 4}) dpt_test::check_matches_single_device("ch03_naive_dp", np, true, "");
}

TEST_CASE("chapter: replicas start from the master copy (--load-weights), threads and mpirun", "[ch03][mpi]") {
  dpt_test::check_matches_single_device("ch03_naive_dp", 3, false, "", dpt_test::load_master_weights_flag(7));
  if (mpi_available()) dpt_test::check_matches_single_device("ch03_naive_dp", 2, true, "", dpt_test::load_master_weights_flag(7));
}

TEST_CASE("chapter: the host-traffic table has one measured row, for the run's own world size", "[ch03]") {
  for (int world : {1, 3, 5, 9}) {
    INFO("--ranks " << world);
    auto run = dpt_test::run_program("ch03_naive_dp", "--ranks " + std::to_string(world) + " --no-verify " +
                                                          dpt_test::small_problem(8, false));
    INFO(dpt_test::summary_line(run.output));
    REQUIRE(run.exit_code == 0);
    // Table rows: " N  <theory>  <measured or ->".
    std::istringstream lines(run.output);
    int measured_rows = 0, own_rows = 0;
    for (std::string line; std::getline(lines, line);) {
      std::istringstream cells(line);
      std::string first, last, cell;
      cells >> first;
      if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos || line.find("B") == std::string::npos) continue;
      while (cells >> cell) last = cell;
      own_rows += first == std::to_string(world) ? 1 : 0;
      measured_rows += last != "-" ? 1 : 0;
      if (last != "-") CHECK(first == std::to_string(world));
    }
    CHECK(own_rows == 1);
    CHECK(measured_rows == 1);
  }
}

TEST_CASE("chapter: the default 300-step run's verdicts pass on 2 ranks, checked step by step", "[ch03]") {
  // Here a whole-run comparison drifted to 2.4e-4 (a ReLU input within rounding
  // of 0 switched at step ~260 in one run only) and printed a false ✘; the
  // check is now per step (dpt/step_check.h) and must pass on correct code.
  auto run = dpt_test::run_program("ch03_naive_dp", "--ranks 2 --quiet");
  INFO(dpt_test::summary_line(run.output));
  CHECK(run.exit_code == 0);
  CHECK_THAT(run.output, contains_text("synced gradient = one device's") && contains_text("of 300 steps"));
  CHECK_THAT(run.output, contains_text("started from the master copy"));
  CHECK_THAT(run.output, contains_text("replicas identical before step 0"));
}
