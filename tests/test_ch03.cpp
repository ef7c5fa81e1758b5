// test_ch03.cpp — chapter 03's holes: sharding against a direct slice, host
// averaging against a serial mean and the traffic log, and the whole chapter
// against single-device training (threads and real mpirun), from a master
// copy the replicas did not start with, and its host-traffic table.
#include "support/catch.h"
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>

#include "ch03.h"
#include "dpt/ops.h"
#include "support/ranks.h"
#include "support/single_device.h"

using namespace dpt;

TEST_CASE("shard_indices: rank r gets the r-th contiguous slice", "[ch03]") {
  std::vector<int64_t> global = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
  CHECK(ch03::shard_indices(global, 0, 3) == std::vector<int64_t>{10, 11, 12, 13});
  CHECK(ch03::shard_indices(global, 1, 3) == std::vector<int64_t>{14, 15, 16, 17});
  CHECK(ch03::shard_indices(global, 2, 3) == std::vector<int64_t>{18, 19, 20, 21});
  CHECK(ch03::shard_indices(global, 0, 1) == global);
}

TEST_CASE("shard_indices: shards cover the global batch exactly once", "[ch03]") {
  std::vector<int64_t> global(24);
  std::iota(global.begin(), global.end(), 100);
  for (int world : {1, 2, 3, 4, 6, 8}) {
    std::multiset<int64_t> seen;
    for (int r = 0; r < world; ++r)
      for (int64_t i : ch03::shard_indices(global, r, world)) seen.insert(i);
    CHECK(seen == std::multiset<int64_t>(global.begin(), global.end()));
  }
}

TEST_CASE("shard_indices: a batch that does not divide is a clear error", "[ch03]") {
  std::vector<int64_t> global(10);
  CHECK_THROWS_AS(ch03::shard_indices(global, 0, 4), Error);
  CHECK_THROWS_WITH(ch03::shard_indices(global, 0, 4), contains_text("10") && contains_text("4"));
}

namespace {
// Rank r's gradient for parameter p, element j: distinct per rank, parameter
// and element, so a mean over the wrong ranks or elements cannot match.
float local_value(int rank, std::size_t p, int64_t j) { return float(rank + 1) * 0.5f + float(p) - 0.01f * float(j); }

std::vector<Tensor> local_gradients(Context& ctx) {
  std::vector<Tensor> grads = {Tensor::empty({3, 4}, ctx.device), Tensor::empty({5}, ctx.device)};
  for (std::size_t p = 0; p < grads.size(); ++p)
    for (int64_t j = 0; j < grads[p].numel(); ++j) grads[p].data()[j] = local_value(ctx.rank, p, j);
  return grads;
}
}  // namespace

TEST_CASE("host_average_gradients: every rank gets the serial mean", "[ch03]") {
  for (int world : {1, 2, 3, 4}) {
    INFO("world " << world);
    std::mutex mutex;
    std::vector<std::vector<std::vector<float>>> results(world);
    dpt_test::run_ranks(world, [&](Context& ctx) {
      std::vector<Tensor> grads = local_gradients(ctx);
      ch03::host_average_gradients(ctx.comm, grads);
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& g : grads) {
        CHECK(&g.device() == &ctx.device);  // the mean comes back to the rank's device
        results[ctx.rank].push_back(g.to_vector());
      }
    });
    for (int r = 0; r < world; ++r) {
      REQUIRE(results[r].size() == 2);
      for (std::size_t p = 0; p < 2; ++p)
        for (int64_t j = 0; j < int64_t(results[r][p].size()); ++j) {
          double mean = 0;
          for (int q = 0; q < world; ++q) mean += local_value(q, p, j) / double(world);
          CHECK(results[r][p][j] == Approx(mean).margin(1e-6));
        }
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
      INFO("from " << src << " to " << dst);
      bool through_host = (src == 0) != (dst == 0);
      CHECK(matrix[src][dst] == (through_host ? bytes : 0));
    }
}

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
}
