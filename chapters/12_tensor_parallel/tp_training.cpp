// tp_training.cpp — one step: this group's samples, forward and backward
// (the TP all-reduces happen inside, in the layers), the DP average of the
// slices' gradients, the optimizer on the slices.
#include "tp_training.h"

#include <chrono>
#include <cmath>

#include "dpt/data_parallel.h"
#include "dpt/model_pieces.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/report.h"
#include "dpt/verdict.h"

namespace dpt::ch12 {

namespace {
// All-reduce payload and calls this rank has passed in `group` so far.
struct Tally {
  double bytes = 0, calls = 0;
};
Tally all_reduces(Communicator& group) {
  TrafficLog& log = group.traffic();
  return {double(log.collective_bytes("all_reduce", log.rank())), double(log.collective_calls("all_reduce", log.rank()))};
}
}  // namespace

TensorParallelRun train_tensor_parallel(Context& ctx, Groups& groups, const Options& o, const Dataset& data,
                                        TensorParallelMLP& model, StepRecorder* recorder, const std::string& label) {
  TensorParallelRun run;
  std::vector<Tensor> params = model.parameters();
  auto optimizer = make_optimizer(o.optimizer, params, o.lr);
  const int D = groups.dp_size(), d = groups.dp_rank();
  BatchSampler sampler(data.size(), o.batch * D, !o.no_shuffle, o.seed);  // the same global batch on every rank
  const int64_t full_count = parameters_per_rank(model.widths(), 1);
  ProgressBar bar(label, o.steps, ctx.is_root() && !o.quiet);
  MetricsWriter metrics(ctx.is_root() ? o.metrics : "");
  Tally tp_total, dp_total;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < o.steps; ++step) {
    Batch batch = gather_batch(data, strided_shard(sampler.indices(step), d, D), ctx.device);
    optimizer->zero_grad();
    const Tally before = all_reduces(groups.tp());
    Tensor loss = softmax_cross_entropy(model.forward(batch.x), batch.y);  // the same on every rank of the TP group
    loss.backward();
    const Tally after = all_reduces(groups.tp());
    tp_total.bytes += after.bytes - before.bytes, tp_total.calls += after.calls - before.calls;
    float global_loss = loss.item();
    if (Communicator* dp = groups.dp()) {  // D models on D shards: average their slices' gradients and losses
      const Tally dp_before = all_reduces(*dp);
      std::vector<Tensor> grads;
      for (const Tensor& p : params) grads.push_back(p.grad());
      average_over_ranks(*dp, grads);
      dp_total.bytes += all_reduces(*dp).bytes - dp_before.bytes;
      dp->all_reduce(&global_loss, 1, ReduceOp::Avg);
    }
    // The one-device check: world rank 0 decides; its TP group gathers the full model (dp index 0) to it.
    float keep = recorder && recorder->keeps(step, o.steps, full_count) ? 1.0f : 0.0f;
    ctx.comm.broadcast(&keep, 1, 0);
    if (keep != 0 && d == 0) {
      const std::vector<ModelPiece> pieces = model.pieces();
      std::vector<float> weights = gather_model_flat(groups.tp(), model.widths(), pieces);
      std::vector<float> grads = gather_model_flat(groups.tp(), model.widths(), gradients_of(pieces));
      if (recorder && ctx.is_root()) recorder->record(step, o.steps, weights.data(), grads.data(), full_count);
    }
    optimizer->step();
    require_finite_loss(global_loss, step, o.lr);  // the same value on every rank: all stop alike
    run.losses.push_back(global_loss);
    metrics.write(step, {{"loss", global_loss}});
    bar.update(step + 1, "loss " + fixed(global_loss, 4));
  }
  bar.finish();
  run.seconds = seconds_since(start);
  const double steps = double(std::max<int64_t>(1, o.steps));
  run.tp_bytes_per_step = tp_total.bytes / steps, run.tp_calls_per_step = tp_total.calls / steps;
  run.dp_bytes_per_step = dp_total.bytes / steps;
  run.hidden_elements = model.hidden_elements();
  // The replicated biases must have stayed equal over the TP group (every rank got the same gradient).
  for (std::size_t i = 3; i < params.size(); i += 4) {
    Tensor first = params[i].clone();
    groups.tp().broadcast(first, 0);
    float gap = max_abs_diff(first, params[i]);
    groups.tp().all_reduce(&gap, 1, ReduceOp::Max);
    run.replicated_spread = std::isnan(gap) || std::isnan(run.replicated_spread) ? NAN : std::max(run.replicated_spread, double(gap));
  }
  return run;
}

}  // namespace dpt::ch12
