// test_gpu_ring.cpp — chapter 04's ring and chapter 05's bucketed training on
// GPU buffers (label gpu; skipped without a GPU).
//
// The ring (the reference solution's phases and its Avg, ring_all_reduce) runs on
// cuda:0 buffers with 2 and 4 rank threads sharing the GPU, each rank on its
// own stream. Oracle: comm_contract.h's serial loops over small
// integer-valued floats, computed on the host, sharing no code with the ring.
// Sums of such values are exact in any order and Avg divides by 2 or 4
// (exact), so every comparison is exact (==). Counts: 0, below the world size
// (empty chunks), not divisible by it, and 100003 (above every eager limit).
//
// Bucketed training: chapter 05's loop on --device cuda (packs on the compute
// stream, rings on a communication stream after an event) against the same
// loop on cpu:k. Tolerance kSingleDeviceTolerance, as for every chapter
// on cuda vs cpu (tests/gpu/test_gpu_chapters.cpp says why).
//
// What this cannot show: a missing event wait (the ring starting before the
// pack) is a race; it shows up here only when the compute stream is still
// busy at launch, so a pass is evidence, not proof.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <nlohmann/json.hpp>
#include <unistd.h>
#include <vector>

#include "bucketed_training.h"
#include "ch04.h"
#include "dpt/data_parallel.h"
#include "dpt/device.h"
#include "dpt/launch.h"
#include "support/comm_contract.h"
#include "support/gpu.h"

using namespace dpt;
using dpt_test::first_difference;
using dpt_test::contract::contribution;
using dpt_test::contract::serial_reduce;

namespace {

// Runs `body` on `world` rank threads (threads communicator, eager limit 0:
// every send waits for its receive); each returns "" or what went wrong.
std::vector<std::string> on_rank_threads(int world, const std::string& device,
                                         const std::function<std::string(Context&)>& body,
                                         const std::string& trace_path = "") {
  LaunchOptions o;
  o.ranks = world;
  o.trace_path = trace_path;
  o.device = device;
  o.timeout_s = 60;
  o.eager_limit_bytes = 0;
  std::vector<std::string> wrong(std::size_t(world), "did not run");
  launch(o, [&](Context& ctx) { wrong[std::size_t(ctx.rank)] = body(ctx); });
  return wrong;
}

void check_all_ok(const std::vector<std::string>& wrong, const std::string& what) {
  for (std::size_t r = 0; r < wrong.size(); ++r) {
    INFO(what << ", rank " << r << ": " << wrong[r]);
    CHECK(wrong[r].empty());
  }
}

// The ring's result on this rank's cuda:0 buffer against the serial oracle.
std::string ring_on_gpu(Context& ctx, int64_t count, ReduceOp op) {
  Tensor data = Tensor::from_vector({count}, contribution(ctx.rank, count), Device::cuda(0));
  ch04::ring_all_reduce(ctx.comm, data.data(), count, op);
  return first_difference(data.to_vector(), serial_reduce(ctx.world, count, 0, op));
}

}  // namespace

// ----------------------------------------------------------------------------
// the ring on device buffers

TEST_CASE("ring all-reduce on cuda:0 buffers: Sum and Avg equal the serial oracle, 2 and 4 rank threads",
          "[gpu][ring]") {
  DPT_REQUIRE_GPU();
  for (int world : {2, 4})
    for (int64_t count : {int64_t(0), int64_t(1), int64_t(3), int64_t(4), int64_t(7), int64_t(1001), int64_t(100003)})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
        std::string what = std::to_string(world) + " ranks, count " + std::to_string(count) + ", " +
                           reduce_op_name(op);
        check_all_ok(on_rank_threads(world, "cpu", [&](Context& ctx) { return ring_on_gpu(ctx, count, op); }), what);
      }
}

TEST_CASE("ring scatter-reduce on cuda:0: rank r owns the full sum of chunk (r+1) mod n, uneven chunks",
          "[gpu][ring]") {
  DPT_REQUIRE_GPU();
  for (int world : {2, 4})
    for (int64_t count : {int64_t(3), int64_t(10), int64_t(100003)}) {  // count < n; chunks 3,3,2,2; odd
      check_all_ok(on_rank_threads(world, "cpu", [&](Context& ctx) {
        Tensor data = Tensor::from_vector({count}, contribution(ctx.rank, count), Device::cuda(0));
        ch04::ring_scatter_reduce(ctx.comm, data.data(), count);
        Range owned = ch04::ring_chunk(count, ctx.world, (ctx.rank + 1) % ctx.world);
        std::vector<float> got = data.to_vector(), sum = serial_reduce(ctx.world, count, 0, ReduceOp::Sum);
        return first_difference(std::vector<float>(got.begin() + owned.begin, got.begin() + owned.end),
                                std::vector<float>(sum.begin() + owned.begin, sum.begin() + owned.end));
      }), std::to_string(world) + " ranks, count " + std::to_string(count));
    }
}

TEST_CASE("ring on each rank's own GPU under --device cuda equals the serial oracle", "[gpu][ring]") {
  DPT_REQUIRE_GPU();
  check_all_ok(on_rank_threads(4, "cuda", [](Context& ctx) {
    const int64_t count = 100003;
    Tensor data = Tensor::from_vector({count}, contribution(ctx.rank, count), ctx.device);
    ch04::ring_all_reduce(ctx.comm, data.data(), count, ReduceOp::Avg);
    return first_difference(data.to_vector(), serial_reduce(ctx.world, count, 0, ReduceOp::Avg));
  }), "4 ranks on --device cuda");
}

// ----------------------------------------------------------------------------
// chapter 05 on cuda: packs on the compute stream, rings on the comm stream

namespace {

Options small_problem() {
  Options o;
  o.model = "32-64-64-4";  // 6 parameters: several buckets at a small cap
  o.samples = 512;
  o.steps = 20;
  o.batch = 8;
  o.optimizer = "momentum";
  o.lr = 0.05f;
  o.quiet = true;
  return o;
}

struct BucketedWeights {
  std::vector<float> weights;  // rank 0's final parameters, flattened
  std::string wrong;           // what the run's own record says went wrong ("" if nothing)
};

// Chapter 05's loop on 2 rank threads on `device` ("cpu" or "cuda").
BucketedWeights train_bucketed_on(const std::string& device, const ch05::BucketPlan& plan) {
  Options o = small_problem();
  Dataset data = load_dataset(o);
  BucketedWeights out;
  std::vector<std::string> wrong = on_rank_threads(2, device, [&](Context& ctx) {
    MLP replica = make_replica(ctx, o);
    ch05::BucketedRun run = ch05::train_bucketed(ctx, o, data, replica, plan, "gpu test");
    std::string seen;
    if (int64_t(run.losses.size()) != o.steps) seen += "stopped after " + std::to_string(run.losses.size()) + " steps; ";
    for (const ch05::BucketStep& s : run.steps)
      if (!s.in_order || s.launched_unready > 0) seen += "a bucket launched out of order or unready; ";
    // The record's times: CUDA events on cuda, the host's clock on cpu. On
    // either, the hidden part of each ring is an overlap with backward, so at
    // most the ring; without overlap every ring starts after backward ends
    // (on the GPU: after its pack, queued after backward_end), so none is.
    if (run.gpu_clock != (device == "cuda")) seen += "timed on the wrong clock; ";
    for (const ch05::BucketStep& s : run.steps) {
      if (!(s.backward_s > 0 && s.comm_s > 0 && s.hidden_s >= 0 && s.hidden_s <= s.comm_s))
        seen += "impossible times (backward " + std::to_string(s.backward_s) + " s, comm " + std::to_string(s.comm_s) +
                " s, hidden " + std::to_string(s.hidden_s) + " s); ";
      if (!plan.overlap && s.hidden_s != 0) seen += "communication hidden without overlap; ";
    }
    if (ctx.is_root()) out.weights = flatten(replica.parameters());
    return seen;
  });
  for (const std::string& w : wrong) out.wrong += w;
  return out;
}

}  // namespace

TEST_CASE("ch05's bucketed training on cuda, overlapped on a comm stream, ends where the cpu run ends",
          "[gpu][ring]") {
  DPT_REQUIRE_GPU();
  struct Case {
    const char* name;
    ch05::BucketPlan plan;
  };
  std::vector<Case> cases = {{"one bucket per parameter", {0, 0, true, 1, false}},
                             {"4 KiB buckets", {4096, 4096, true, 1, false}},
                             {"4 KiB buckets, 2 micro-batches", {4096, 4096, true, 2, false}},
                             {"4 KiB buckets, no overlap", {4096, 4096, false, 1, false}}};
  for (const Case& c : cases) {
    INFO(c.name);
    BucketedWeights cpu = train_bucketed_on("cpu", c.plan), gpu = train_bucketed_on("cuda", c.plan);
    CHECK(cpu.wrong.empty());
    CHECK(gpu.wrong.empty());
    double gap = max_abs_difference(gpu.weights, cpu.weights);
    INFO("max |w_cuda - w_cpu| = " << gap);
    CHECK(gap <= kSingleDeviceTolerance);
  }
}

TEST_CASE("ch05 on cuda with --trace draws backward and every bucket's ring on the rank's GPU stream tracks",
          "[gpu][ring]") {
  DPT_REQUIRE_GPU();
  Options o = small_problem();
  o.steps = 5;
  Dataset data = load_dataset(o);
  const ch05::BucketPlan plan{4096, 4096, true, 1, false};
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("dpt_gpu_trace_" + std::to_string(getpid()) + ".json")).string();
  std::size_t buckets = 0;
  check_all_ok(on_rank_threads(2, "cuda", [&](Context& ctx) {
    MLP replica = make_replica(ctx, o);
    ch05::BucketedRun run = ch05::train_bucketed(ctx, o, data, replica, plan, "gpu trace test");
    if (ctx.is_root()) buckets = run.layout.size();
    return run.gpu_clock ? std::string() : std::string("not timed on the GPU's clock");
  }, path), "ch05 with --trace on cuda");
  std::ifstream in(path);
  REQUIRE(in);
  nlohmann::json doc = nlohmann::json::parse(in);  // an independent parser: the file must be valid JSON
  std::remove(path.c_str());
  REQUIRE(buckets > 1);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    int64_t backward = 0, rings = 0;
    std::string compute_track, comm_track;
    for (const nlohmann::json& e : doc["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 2000 + r) compute_track = e["args"]["name"];
      if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 3000 + r) comm_track = e["args"]["name"];
      if (e["ph"] != "X") continue;
      const std::string name = e["name"];
      if (e["tid"] == 2000 + r && name == "backward (GPU)") ++backward;
      if (e["tid"] == 3000 + r && name.rfind("all-reduce bucket ", 0) == 0) {
        ++rings;
        CHECK(e["dur"].get<double>() > 0);  // a ring moves bytes: never an empty interval
      }
    }
    CHECK(compute_track == "rank " + std::to_string(r) + " GPU compute stream");
    CHECK(comm_track == "rank " + std::to_string(r) + " GPU comm stream");
    CHECK(backward == o.steps);                       // one per step
    CHECK(rings == o.steps * int64_t(buckets));       // one per bucket per step
  }
}
