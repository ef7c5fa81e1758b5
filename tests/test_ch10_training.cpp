// test_ch10_training.cpp — chapter 10's training with each compressor on a
// small problem: bytes per step from the traffic log = each compressor's
// formula, worked out by hand here for the 32-16-4 model; error feedback's
// invariant over a whole run; the replicas stay identical.
#include "support/catch.h"
#include <CLI/CLI.hpp>
#include <cmath>
#include <mutex>

#include "ch10.h"
#include "compressed_training.h"
#include "dpt/options.h"
#include "support/ranks.h"
#include "support/single_device.h"

using namespace dpt;
using namespace dpt::ch10;

namespace {
Options training_problem(int64_t steps) {
  Options o;
  CLI::App app;
  add_common_flags(app, o);
  app.parse(dpt_test::small_problem(8));  // 32-16-4: weights (16, 32), (4, 16), biases 16 and 4
  o.steps = steps;
  return o;
}

CompressedRun train(int world, const Options& o, const Setting& s) {
  Dataset data = load_dataset(o);
  CompressedRun out;
  std::mutex mutex;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    MLP replica = make_replica(ctx, o);
    CompressedRun run = train_compressed(ctx, o, data, replica, s);
    std::lock_guard<std::mutex> lock(mutex);
    if (ctx.is_root()) out = run;
  });
  if (!out.written) FAIL(out.not_written);  // an unwritten hole stopped the run: say which
  return out;
}

// Bytes rank 0 handed over per step, by hand for Ψ = 512 + 16 + 64 + 4 = 596.
double expected_bytes(const std::string& spec, int n) {
  if (spec == "none") return 4 * 596;
  if (spec == "fp16" || spec == "bf16") {  // 298 words of two halves in n chunks, 2(n−1) messages of one chunk
    const int chunk = (298 + n - 1) / n;
    return 2.0 * (n - 1) * chunk * 4;
  }
  if (spec == "topk:7") return 7 * 8;                         // 7 index words + 7 values
  if (spec == "sign") return 4 * ((16 + 1) + (1 + 1) + (2 + 1) + (1 + 1));  // ⌈numel/32⌉ words + a scale, per tensor
  if (spec == "powersgd:2") return 4 * (2 * (16 + 32) + 2 * (4 + 16) + 16 + 4);  // P and Q per matrix, the biases
  return -1;
}
}  // namespace

TEST_CASE("compressed training: bytes per step in the traffic log = each compressor's formula", "[ch10]") {
  const Options o = training_problem(4);
  for (int world : {2, 3})
    for (const char* spec : {"none", "fp16", "bf16", "topk:7", "sign", "powersgd:2"}) {
      CompressedRun r = train(world, o, {spec, false});
      REQUIRE(r.steps == 4);
      const TrafficLog& t = r.run.traffic;
      // The loop's own loss: one float all-reduced per step, on top of the compressor's.
      const double measured = double(t.bytes_sent(0) + t.collective_bytes("all_reduce", 0) +
                                     t.collective_bytes("all_gather", 0)) / 4.0 - 4;
      INFO(spec << " on " << world << " ranks: rank 0 handed " << measured << " bytes per step to the communicator; "
                << "the formula says " << expected_bytes(spec, world));
      CHECK(measured == expected_bytes(spec, world));
    }
}

TEST_CASE("compressed training with error feedback: nothing lost over a run, replicas identical", "[ch10][hole:error_feedback_step]") {
  const Options o = training_problem(12);
  for (const char* spec : {"topk:7", "sign", "powersgd:2", "fp16"}) {
    CompressedRun with = train(3, o, {spec, true}), without = train(3, o, {spec, false});
    INFO(spec << " +EF on 3 ranks, 12 steps: on each rank |Σ delivered + residual − Σ gradient| = " << with.invariant_gap
              << " (float rounding allows " << with.invariant_bound << "); without error feedback it is "
              << without.invariant_gap << " — what the compressor dropped");
    CHECK(with.invariant_gap <= with.invariant_bound);
    CHECK(without.invariant_gap > 100 * with.invariant_bound);
    INFO("replicas must stay identical: max |w_r − w_0| = " << with.replica_spread);
    CHECK(with.replica_spread == 0);
  }
}
