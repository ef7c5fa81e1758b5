// test_step_check.cpp — the step-by-step check against one device: it passes a
// correct data-parallel run, fails a sum for a mean, a dropped shard, a NaN and
// replicas started apart, keeps its memory budget, and does not raise a false
// alarm where a whole-run comparison drifts.
#include "support/catch.h"
#include <cmath>
#include <mutex>

#include "dpt/data_parallel.h"
#include "dpt/ops.h"
#include "dpt/step_check.h"
#include "dpt/verdict.h"
#include "support/ranks.h"

using namespace dpt;

namespace {
Options small_options() {
  Options o;
  o.model = "16-12-4";
  o.data = "synthetic";
  o.samples = 256;
  o.batch = 8;
  o.steps = 12;
  o.lr = 0.1f;
  o.quiet = true;
  return o;
}

// Runs `world` rank threads through the core loop with `sync`, and returns
// rank 0's replay of what its recorder kept.
StepCheck run_and_replay(const Options& o, int world, const GradientSync& sync, std::size_t budget = StepRecorder::kDefaultBudget) {
  std::mutex mutex;
  StepCheck check;
  dpt_test::run_ranks(world, [&](Context& ctx) {
    Dataset data = load_dataset(o);
    MLP replica = make_replica(ctx, o);
    StepRecorder recorder(ctx.is_root(), budget);
    train_data_parallel(ctx, o, data, replica, sync, "test", strided_shard, &recorder);
    if (!ctx.is_root()) return;
    std::lock_guard<std::mutex> lock(mutex);
    check = recorder.replay(o, data, o.batch * ctx.world);
  });
  return check;
}

GradientSync averaging(ReduceOp op) {
  return [op](Context& c, std::vector<Tensor>& grads) {
    for (Tensor& g : grads) c.comm.all_reduce(g.data(), g.numel(), op);
  };
}
}  // namespace

TEST_CASE("step check: a correct run passes every step, from the master copy", "[core]") {
  for (const char* optimizer : {"sgd", "momentum", "adam"}) {
    INFO(optimizer);
    Options o = small_options();
    o.optimizer = optimizer;
    StepCheck c = run_and_replay(o, 3, averaging(ReduceOp::Avg));
    CHECK(c.steps_run == 12);
    CHECK(c.checked.size() == 12);
    CHECK(c.start_difference == 0);
    CHECK(c.difference < kStepGradientTolerance);
    CHECK(c.difference < 1e-5);  // measured ~3e-7: rounding, with room
    Verdicts v;
    add_step_check_verdicts(v, c);
    CHECK(v.exit_code() == 0);
  }
}

TEST_CASE("step check: a sum for a mean, a dropped shard and a NaN fail, naming the step", "[core]") {
  Options o = small_options();
  StepCheck sum = run_and_replay(o, 2, averaging(ReduceOp::Sum));
  CHECK(sum.difference == Approx(1.0).margin(1e-5));  // 2g − g over max|g|
  CHECK(sum.worst_step >= 0);
  auto drop_last_shard = [](Context& c, std::vector<Tensor>& grads) {
    for (Tensor& g : grads) {
      if (c.rank == c.world - 1) fill_(g, 0.0f);
      c.comm.all_reduce(g.data(), g.numel(), ReduceOp::Avg);
    }
  };
  CHECK(run_and_replay(o, 4, drop_last_shard).difference > 0.01);
  auto nan_at_step_3 = [n = 0](Context& c, std::vector<Tensor>& grads) mutable {
    for (Tensor& g : grads) c.comm.all_reduce(g.data(), g.numel(), ReduceOp::Avg);
    if (c.rank == 0 && ++n == 4) grads[0].data()[0] = std::nan("");  // only rank 0 counts
  };
  StepCheck nan = run_and_replay(o, 2, nan_at_step_3);
  CHECK(std::isnan(nan.difference));
  CHECK(nan.worst_step == 3);
  Verdicts v;
  add_step_check_verdicts(v, nan);
  CHECK(v.exit_code() == kVerdictFailed);
  INFO("a failed check blames the ranks' averaging unless the chapter names what it combines");
  CHECK(v.all().back().why == std::string("at step 3, far above float rounding: ") + dpt::kStepCheckCause);
  Verdicts pipeline;
  add_step_check_verdicts(pipeline, nan, "the micro-batches' gradients were not weighted and summed into the batch's");
  CHECK(pipeline.all().back().why ==
        "at step 3, far above float rounding: the micro-batches' gradients were not weighted and summed into the batch's");
}

TEST_CASE("step check: replicas that did not start from the master copy fail the start check", "[core]") {
  Options o = small_options();
  o.steps = 2;
  std::mutex mutex;
  StepCheck check;
  dpt_test::run_ranks(2, [&](Context& ctx) {
    Dataset data = load_dataset(o);
    Options own = o;
    own.seed = o.seed + 1;  // the master copy never reached this replica
    MLP replica = build_model(own, ctx.device);
    StepRecorder recorder(ctx.is_root());
    train_data_parallel(ctx, o, data, replica, averaging(ReduceOp::Avg), "test", strided_shard, &recorder);
    std::lock_guard<std::mutex> lock(mutex);
    if (ctx.is_root()) check = recorder.replay(o, data, o.batch * ctx.world);
  });
  CHECK(check.start_difference > 1e-3);
  Verdicts v;
  add_step_check_verdicts(v, check);
  CHECK(v.exit_code() == kVerdictFailed);
}

TEST_CASE("step check: past its budget it checks spaced steps, always the first and the last", "[core]") {
  Options o = small_options();
  o.steps = 50;
  // Ψ = 16·12 + 12 + 12·4 + 4 = 256 floats: a snapshot (weights + gradients) is 2 KiB.
  StepCheck c = run_and_replay(o, 2, averaging(ReduceOp::Avg), 6 * 2048);
  CHECK(c.steps_run == 50);
  REQUIRE(c.checked.size() >= 5);
  CHECK(c.checked.size() <= 6);
  CHECK(c.checked.front() == 0);
  CHECK(c.checked.back() == 49);
  CHECK(c.difference < kStepGradientTolerance);
  StepCheck off = [&] {
    StepRecorder disabled;
    Dataset data = load_dataset(o);
    return disabled.replay(o, data, 16);
  }();
  CHECK(off.checked.empty());
}
