// test_ch05.cpp — chapter 05's holes: golden bucket layouts written out by
// hand, launch order and launch-when-complete checked against the test's own
// record while hooks fire in shuffled orders, the wait before the copy-back,
// the unused-parameter error (alone, and on two ranks: no hang), and the
// chapter's training against one device (threads, mpirun -np 2 and 4,
// --accumulate), with its overlap read back from the Chrome trace.
#include "support/catch.h"
#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "ch04.h"
#include "ch05.h"
#include "dpt/data_parallel.h"
#include "support/ranks.h"
#include "support/run_program.h"
#include "support/single_device.h"

using namespace dpt;
using namespace dpt::ch05;

namespace {
std::vector<std::vector<int>> params_of(const std::vector<Bucket>& buckets) {
  std::vector<std::vector<int>> out;
  for (const Bucket& b : buckets) out.push_back(b.params);
  return out;
}
using Layout = std::vector<std::vector<int>>;

// The chapter's default model, 784-512-512-10: fc0.weight, fc0.bias, fc1.weight, … in bytes.
const std::vector<int64_t> kMlpBytes = {784 * 512 * 4, 512 * 4, 512 * 512 * 4, 512 * 4, 512 * 10 * 4, 10 * 4};
const int64_t kMiB = 1 << 20;
}  // namespace

// ----------------------------------------------------------------------------
// assign_buckets

TEST_CASE("assign_buckets: golden layouts, reverse order, oversized parameter alone", "[ch05][needs:assign_buckets]") {
  // 1 MiB: {fc2.b, fc2.w, fc1.b} = 22 KiB, then fc1.w (exactly 1 MiB) would
  // overflow it: it closes; fc1.w fills its own; fc1.b; fc0.w (1.5 MiB) alone.
  CHECK(params_of(assign_buckets(kMlpBytes, kMiB, kMiB)) == Layout{{5, 4, 3}, {2}, {1}, {0}});
  CHECK(params_of(assign_buckets(kMlpBytes, 0, 0)) == Layout{{5}, {4}, {3}, {2}, {1}, {0}});  // one per parameter
  CHECK(params_of(assign_buckets(kMlpBytes, 25 * kMiB, 25 * kMiB)) == Layout{{5, 4, 3, 2, 1, 0}});
  // DDP's small first bucket: 100 bytes hold fc2.bias only; the rest fit 25 MiB.
  CHECK(params_of(assign_buckets(kMlpBytes, 25 * kMiB, 100)) == Layout{{5}, {4, 3, 2, 1, 0}});
  // A bucket that reaches its cap exactly closes; the next starts empty.
  CHECK(params_of(assign_buckets({8, 8, 8, 8, 8}, 16, 16)) == Layout{{4, 3}, {2, 1}, {0}});
  CHECK(params_of(assign_buckets({8, 8, 8, 8, 8}, 16, 8)) == Layout{{4}, {3, 2}, {1, 0}});
  CHECK(assign_buckets({}, kMiB, kMiB).empty());
}

TEST_CASE("assign_buckets: bytes add up, no bucket over its cap unless alone", "[ch05][needs:assign_buckets]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> bytes(std::size_t(1 + rng() % 12));
    for (auto& b : bytes) b = 4 * int64_t(1 + rng() % 300);
    int64_t cap = 4 * int64_t(rng() % 400), first = 4 * int64_t(rng() % 400);
    INFO("trial " << trial << " cap " << cap << " first " << first);
    auto buckets = assign_buckets(bytes, cap, first);
    std::vector<int> seen;
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      int64_t sum = 0;
      for (int p : buckets[b].params) sum += bytes[std::size_t(p)], seen.push_back(p);
      CHECK(sum == buckets[b].bytes);
      CHECK((buckets[b].params.size() == 1 || sum <= (b == 0 ? first : cap)));
    }
    std::vector<int> reverse(bytes.size());
    for (std::size_t i = 0; i < reverse.size(); ++i) reverse[i] = int(reverse.size() - 1 - i);
    CHECK(seen == reverse);  // every parameter once, in reverse parameters() order
  }
}

TEST_CASE("assign_buckets: a negative cap is a clear error", "[ch05][needs:assign_buckets]") {
  CHECK_THROWS_WITH(assign_buckets({8}, -1, 8), contains_text("cap"));
}

// ----------------------------------------------------------------------------
// mark_ready

TEST_CASE("mark_ready: buckets launch in index order, each as soon as it may, when hooks fire shuffled",
          "[ch05][needs:mark_ready]") {
  // A layout written by hand (not assign_buckets: this test needs only mark_ready).
  std::vector<Bucket> layout = {{{5, 4}, 8}, {{3}, 4}, {{2, 1}, 8}, {{0}, 4}};
  std::mt19937 rng(11);
  std::vector<int> order = {0, 1, 2, 3, 4, 5};
  for (int trial = 0; trial < 300; ++trial) {
    std::shuffle(order.begin(), order.end(), rng);
    INFO("hooks fire in order " << order[0] << order[1] << order[2] << order[3] << order[4] << order[5]);
    std::vector<bool> marked(6, false);  // the test's own record
    std::vector<int> launched;
    auto complete = [&](int b) {
      for (int p : layout[std::size_t(b)].params)
        if (!marked[std::size_t(p)]) return false;
      return true;
    };
    BucketState state = make_bucket_state(layout, [&](int b) {
      CHECK(complete(b));  // never before its last gradient is ready
      launched.push_back(b);
    });
    for (int p : order) {
      marked[std::size_t(p)] = true;
      mark_ready(state, p);
      // Oracle: the longest prefix of complete buckets has launched, no more.
      std::size_t expect = 0;
      while (expect < layout.size() && complete(int(expect))) ++expect;
      REQUIRE(launched.size() == expect);
    }
    CHECK(launched == std::vector<int>{0, 1, 2, 3});
  }
}

TEST_CASE("mark_ready: a parameter marked twice in one step is an error naming it", "[ch05][needs:mark_ready]") {
  BucketState state = make_bucket_state({{{1, 0}, 8}}, [](int) {});
  mark_ready(state, 1);
  CHECK_THROWS_WITH(mark_ready(state, 1), contains_text("#1"));
}

// ----------------------------------------------------------------------------
// wait_and_unpack

TEST_CASE("wait_and_unpack: waits for every bucket, then copies it back in fill order",
          "[ch05][needs:mark_ready][needs:wait_and_unpack]") {
  dpt_test::run_ranks(1, [](Context& ctx) {
    std::vector<Bucket> layout = {{{2, 1}, 12}, {{0}, 8}};  // param 2 has 1 float, 1 has 2, 0 has 2
    BucketState state;
    state = make_bucket_state(layout, [&](int b) {
      // A slow "all-reduce": the right values appear only after 50 ms.
      state.work[std::size_t(b)] = ctx.comm.async([&state, b] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        for (std::size_t i = 0; i < state.flat[std::size_t(b)].size(); ++i)
          state.flat[std::size_t(b)][i] = float(10 * (b + 1) + int(i));
      });
    });
    std::vector<Tensor> grads = {Tensor::zeros({2}, ctx.device), Tensor::zeros({2}, ctx.device),
                                 Tensor::zeros({1}, ctx.device)};
    for (int p : {2, 1, 0}) mark_ready(state, p);
    wait_and_unpack(state, grads, {"a", "b", "c"});
    std::vector<std::vector<float>> got = {grads[0].to_vector(), grads[1].to_vector(), grads[2].to_vector()};
    ctx.comm.synchronize();  // a wait_and_unpack that did not wait must not leave the job writing freed memory
    // bucket 0 = (param 2, param 1) = [10 | 11 12], bucket 1 = param 0 = [20 21]
    CHECK(got[2] == std::vector<float>{10});
    CHECK(got[1] == std::vector<float>{11, 12});
    CHECK(got[0] == std::vector<float>{20, 21});
  });
}

TEST_CASE("wait_and_unpack: a parameter with no gradient is an error naming it and its bucket",
          "[ch05][needs:mark_ready][needs:wait_and_unpack]") {
  struct Finished : Work {  // an all-reduce that is already done
    void wait() override {}
    bool done() override { return true; }
  };
  int launches = 0;
  BucketState state;
  state = make_bucket_state({{{3, 2}, 8}, {{1, 0}, 8}}, [&](int b) {
    ++launches;
    state.work[std::size_t(b)] = std::make_shared<Finished>();
  });
  for (int p : {3, 2, 0}) mark_ready(state, p);  // fc0.bias (#1) never became ready
  std::vector<Tensor> grads;
  for (int i = 0; i < 4; ++i) grads.push_back(Tensor::zeros({2}, Device::host()));
  CHECK_THROWS_WITH(wait_and_unpack(state, grads, {"fc0.weight", "fc0.bias", "fc1.weight", "fc1.bias"}),
                    contains_text("fc0.bias") && contains_text("bucket 1"));
  CHECK(launches == 1);
}

TEST_CASE("wait_and_unpack: a parameter unused on one of two ranks fails fast with its name, no hang",
          "[ch05][needs:mark_ready][needs:wait_and_unpack][needs:ring_scatter_reduce][needs:ring_all_gather]") {
  auto start = std::chrono::steady_clock::now();
  auto run = [] {
    dpt_test::run_ranks(2, [](Context& ctx) {
      auto shared = std::make_shared<BucketState>();  // kept alive by queued work, whatever happens
      BucketState& state = *shared;
      state = make_bucket_state({{{1}, 400}, {{0}, 400}}, [&ctx, weak = std::weak_ptr<BucketState>(shared)](int b) {
        auto shared = weak.lock();
        shared->work[std::size_t(b)] = ctx.comm.async([&ctx, shared, b] {
          ch04::ring_all_reduce(ctx.comm, shared->flat[std::size_t(b)].data(), 100, ReduceOp::Avg);
        });
      });
      std::vector<Tensor> grads = {Tensor::zeros({100}, ctx.device), Tensor::zeros({100}, ctx.device)};
      mark_ready(state, 1);
      if (ctx.rank == 0) mark_ready(state, 0);  // rank 1 never gets fc.weight's gradient
      wait_and_unpack(state, grads, {"fc.weight", "fc.bias"});
    }, 30);
  };
  CHECK_THROWS_WITH(run(), contains_text("fc.weight") && contains_text("bucket 1"));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 30);  // well within the communication timeout
}

// ----------------------------------------------------------------------------
// the chapter: same weights as one device, overlap in the trace

namespace {
// small_problem's 32-16-4 MLP is 2384 bytes: cap 0 gives 4 buckets, 0.0005
// MiB (524 bytes) gives 2 ({fc1.b, fc1.w, fc0.b}, {fc0.w}), 1 MiB gives 1.
const char* kCaps[] = {"--bucket-mb 0", "--bucket-mb 0.0005", "--bucket-mb 1", "--bucket-mb 1 --first-bucket-mb 0"};

// check_matches_single_device for --accumulate K: the oracle's batch is the
// whole step's, 8 per rank per micro-batch.
void check_accumulate_matches_single_device(int ranks, int k, const std::string& extra, bool mpi = false) {
  INFO(ranks << (mpi ? " MPI processes" : " rank threads") << ", --accumulate " << k << " " << extra);
  std::string single = dpt_test::single_device_weights(8 * ranks * k);
  std::string dp = dpt_test::temp_path("ch05_accumulate.safetensors");
  std::string args = "--accumulate " + std::to_string(k) + " " + extra + " --no-verify " +
                     dpt_test::small_problem(8) + " --save-weights " + dp;
  auto run = mpi ? dpt_test::run_mpi("ch05_bucketing", ranks, "--comm mpi --comm-timeout 20 " + args)
                 : dpt_test::run_program("ch05_bucketing", "--ranks " + std::to_string(ranks) + " " + args);
  INFO(dpt_test::summary_line(run.output));
  REQUIRE(run.exit_code == 0);
  CHECK(dpt_test::max_weight_difference(single, dp) < kSingleDeviceTolerance);
  std::remove(dp.c_str());
  std::remove(single.c_str());
}
}  // namespace

TEST_CASE("chapter: ch05 trains like one device for every bucket size (threads)", "[ch05]") {
  for (const char* caps : kCaps) dpt_test::check_matches_single_device("ch05_bucketing", 3, false, caps);
  dpt_test::check_matches_single_device("ch05_bucketing", 4, false, "--bucket-mb 0 --no-overlap");
}

TEST_CASE("chapter: with --accumulate K, ch05 trains like one device on the K-times batch", "[ch05]") {
  check_accumulate_matches_single_device(2, 3, "--bucket-mb 0");
  check_accumulate_matches_single_device(4, 2, "--bucket-mb 0.0005 --no-overlap");
}

TEST_CASE("chapter: under mpirun, ch05 trains 2 and 4 processes like one device", "[ch05][mpi]") {
  if (!mpi_available()) {
    WARN("skipped: this dpt was built without MPI");
    return;
  }
  for (int np : {2, 4}) dpt_test::check_matches_single_device("ch05_bucketing", np, true, "--bucket-mb 0");
  check_accumulate_matches_single_device(2, 3, "--bucket-mb 0.0005", true);
}

TEST_CASE("chapter: ch05's verdicts pass with and without overlap and print the layout", "[ch05]") {
  for (const char* overlap : {"--overlap", "--no-overlap"}) {
    auto run = dpt_test::run_program("ch05_bucketing", std::string("--ranks 2 --steps 10 --model 64-32-32-4 "
                                                                   "--bucket-mb 0 ") + overlap);
    INFO(overlap << ": " << dpt_test::summary_line(run.output));
    CHECK(run.exit_code == 0);
    CHECK(run.output.find("fc2.bias, ") == std::string::npos);  // cap 0: one parameter per bucket
    std::size_t at = run.output.find("fc0.weight");
    REQUIRE(at != std::string::npos);
    CHECK(run.output.substr(run.output.rfind('\n', at) + 1, 3) == " 5 ");  // the last bucket holds the first layer
    CHECK(run.output.find("\u2718") == std::string::npos);
  }
}

namespace {
// From a --trace file: for each rank's all-reduce spans (the async track,
// tid 1000 + r), whether it started before the end of the latest backward
// span of that rank (tid r) that started before it. Returns {early, late}.
std::pair<int, int> all_reduces_during_backward(const std::string& path, int world) {
  std::ifstream in(path);
  nlohmann::json trace = nlohmann::json::parse(in);
  const auto& events = trace.is_object() ? trace["traceEvents"] : trace;
  std::map<int, std::vector<std::pair<double, double>>> backward;  // rank → (start, end)
  std::vector<std::pair<int, double>> reduces;                      // (rank, start)
  for (const auto& e : events) {
    if (!e.contains("dur")) continue;
    std::string name = e["name"];
    int tid = e["tid"];
    double ts = e["ts"], dur = e["dur"];
    if (name.rfind("backward", 0) == 0 && tid < world) backward[tid].push_back({ts, ts + dur});
    if (name.rfind("all-reduce bucket", 0) == 0) reduces.push_back({tid - 1000, ts});
  }
  int early = 0, late = 0;
  for (auto [rank, start] : reduces) {
    double end = -1;
    for (auto [b0, b1] : backward[rank])
      if (b0 <= start) end = b1;
    (start < end ? early : late) += 1;
  }
  return {early, late};
}
}  // namespace

TEST_CASE("chapter: the trace shows all-reduces during backward with overlap, none without", "[ch05]") {
  for (bool overlap : {true, false}) {
    std::string path = dpt_test::temp_path(overlap ? "ch05_on.json" : "ch05_off.json");
    auto run = dpt_test::run_program("ch05_bucketing", std::string("--ranks 2 --steps 5 --quiet --no-verify "
                                                                   "--model 256-256-256-256-10 --bucket-mb 0 --trace ") +
                                                           path + (overlap ? "" : " --no-overlap"));
    INFO("overlap " << overlap << ": " << dpt_test::summary_line(run.output));
    REQUIRE(run.exit_code == 0);
    auto [early, late] = all_reduces_during_backward(path, 2);
    CHECK(early + late == 2 * 5 * 8);  // ranks × steps × buckets
    if (overlap) CHECK(early > 0);
    else CHECK(early == 0);
    std::remove(path.c_str());
  }
}
