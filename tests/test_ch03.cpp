// test_ch03.cpp — chapter 03's holes against oracles that share no code with
// them: the master copy built again in the test, sharding checked as a set
// property, averages against a serial mean and the traffic log, the step
// against one device computing the whole global batch serially; then the whole
// chapter against single-device training (threads and real mpirun).
//
// Here: replicate_master, shard_indices, host_average_gradients; the step
// in test_ch03_step.cpp, the chapter's program in test_ch03_chapter.cpp.
//
// Every failure says which property failed, in words (see FAIL_CHECK texts):
// docs/instructor/ch03_key.md lists the mistakes each one catches.
#include "support/catch.h"
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <algorithm>
#include <sstream>

#include "ch03.h"
#include "dpt/data_parallel.h"
#include "support/ch03_problem.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt_test;

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
  {
    INFO("a real call first: 8 samples among 4 ranks");
    REQUIRE(ch03::shard_indices(std::vector<int64_t>(8), 0, 4).size() == 2);  // the untouched hole stops here
  }
  std::vector<int64_t> global(10);
  INFO("10 samples cannot be cut into 4 equal shards: the contract asks for a dpt::Error that names both numbers");
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
