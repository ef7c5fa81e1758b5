// tp_training.cpp — one step on the grid: this model's windows, forward and
// backward (the TP all-reduces happen inside the blocks), the DP average of
// each share's gradient, the optimizer on the shares (tp_training.h).
#include "tp_training.h"

#include <chrono>

#include "dpt/autograd.h"
#include "dpt/data_parallel.h"
#include "dpt/flatten.h"
#include "dpt/memory_ledger.h"
#include "dpt/optim.h"
#include "dpt/text_windows.h"

namespace dpt::ch15 {

namespace {
AllReduces all_reduces_so_far(Communicator& group) {
  TrafficLog& log = group.traffic();
  return {double(log.collective_calls("all_reduce", log.rank())), double(log.collective_bytes("all_reduce", log.rank()))};
}
void add_difference(AllReduces& total, const AllReduces& before, const AllReduces& after) {
  total.calls += after.calls - before.calls, total.bytes += after.bytes - before.bytes;
}
Collectives pair_so_far(Communicator& group) {
  TrafficLog& log = group.traffic();
  return {{double(log.collective_calls("all_gather", log.rank())), double(log.collective_bytes("all_gather", log.rank()))},
          {double(log.collective_calls("reduce_scatter", log.rank())),
           double(log.collective_bytes("reduce_scatter", log.rank()))}};
}
void add_difference(Collectives& total, const Collectives& before, const Collectives& after) {
  add_difference(total.all_gather, before.all_gather, after.all_gather);
  add_difference(total.reduce_scatter, before.reduce_scatter, after.reduce_scatter);
}
void per_step(AllReduces& a, double steps) { a.calls /= steps, a.bytes /= steps; }

// Bytes charged to Activations (the embeddings, LayerNorms, residual adds)
// held at the end of one forward on `batch`, the graph then dropped.
double region_bytes(const TensorParallelGpt& model, const TokenBatch& batch, int64_t B, bool sp, Device& device) {
  const MemoryLedger& ledger = device.ledger();
  const double before = double(ledger.current(MemoryCategory::Activations));
  Tensor loss = sp ? model.sequence_parallel_loss(batch.inputs, batch.targets, B) : model.loss(batch.inputs, batch.targets, B);
  return double(ledger.current(MemoryCategory::Activations)) - before;
}

// --sp: each rank's replicated tensors saw only its positions; their
// gradients, summed over the group, are the whole batch's. One all-reduce.
void sum_replicated_gradients(Communicator& tp, const TensorParallelGpt& model, double& floats) {
  std::vector<Tensor> grads;
  for (const Tensor& p : model.replicated_parameters()) grads.push_back(p.grad());
  std::vector<float> flat = flatten(grads);
  tp.all_reduce(flat.data(), int64_t(flat.size()), ReduceOp::Sum);
  unflatten(flat, grads);
  floats += double(flat.size());
}

std::unique_ptr<Optimizer> make_optimizer(const Ch14Flags& f, std::vector<Tensor> params) {  // chapter 14's choice
  if (f.optimizer == "sgd") return std::make_unique<SGD>(std::move(params), f.lr);
  return std::make_unique<Adam>(std::move(params), f.lr, 0.9f, 0.999f, 1e-8f, f.weight_decay, /*decoupled=*/true);
}

// The gathered model (every rank of the group calls; rank 0 of the world evaluates).
double gathered_held_out_loss(const TensorParallelGpt& model, const Corpus& text, const Ch14Flags& f, bool root) {
  const std::vector<float> values = model.gather(false);
  if (!root) return 0;
  Rng unused(0);
  Gpt one(model.shape(), Device::host(), unused);
  set_flat_values(one, values);
  return held_out_loss(one, text, f);
}
}  // namespace

TpRun train_tensor_parallel_gpt(Context& ctx, ch12::Groups& groups, TensorParallelGpt& model, const Corpus& text,
                                const Ch14Flags& f, bool sp, bool verify, const Narrator& say, StepChart& chart) {
  TpRun run;
  const int64_t B = f.batch, T = f.shape.context;
  const int D = groups.dp_size(), d = groups.dp_rank();
  std::vector<Tensor> params = model.parameters();
  auto optimizer = make_optimizer(f, params);
  const WindowSampler sampler(int64_t(text.train.size()), T, B * D, !f.no_shuffle, f.seed);
  ProgressBar bar("training", f.steps, say.enabled());
  const auto start = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < f.steps; ++s) {
    const bool checked = verify && (s == 0 || s == f.steps - 1);  // the same on every rank: the gathers are collective
    if (checked) run.checked.push_back({s, model.gather(false), {}});
    TokenBatch mine = window_batch(text.train, sampler.replica_starts(s, d, D), T);
    if (s == 0 && sp) {  // the ledger's view of one forward, with and without --sp, on this batch
      run.region_bytes = region_bytes(model, mine, B, true, ctx.device);
      run.region_bytes_without_sp = region_bytes(model, mine, B, false, ctx.device);
    }
    chart.begin_step(s);  // the charted step's spans are stored on every rank (step_chart.h)
    optimizer->zero_grad();
    const AllReduces before = all_reduces_so_far(groups.tp());
    const Collectives pair_before = pair_so_far(groups.tp());
    // The same on every rank of the TP group; with --sp, this rank's share.
    StepChart::Compute forward(chart, "forward");  // a span; --slow-rank's lasts --slowdown times as long
    Tensor loss = sp ? model.sequence_parallel_loss(mine.inputs, mine.targets, B) : model.loss(mine.inputs, mine.targets, B);
    forward.end();
    const AllReduces between = all_reduces_so_far(groups.tp());
    const Collectives pair_between = pair_so_far(groups.tp());
    StepChart::Compute backward(chart, "backward");
    loss.backward();
    backward.end();
    add_difference(run.forward, before, between);
    add_difference(run.backward, between, all_reduces_so_far(groups.tp()));
    add_difference(run.sp_forward, pair_before, pair_between);
    add_difference(run.sp_backward, pair_between, pair_so_far(groups.tp()));
    float global_loss = loss.item();
    if (sp) {  // after the counted passes: the replicated gradients, and the loss's shares
      sum_replicated_gradients(groups.tp(), model, run.sp_grad_floats);
      groups.tp().all_reduce(&global_loss, 1, ReduceOp::Sum);
    }
    if (Communicator* dp = groups.dp()) {  // dp models on dp slices of the batch: average each share's gradient
      std::vector<Tensor> grads;
      for (const Tensor& p : params) grads.push_back(p.grad());
      const AllReduces dp_before = all_reduces_so_far(*dp);
      average_over_ranks(*dp, grads);
      run.dp_bytes_per_step += all_reduces_so_far(*dp).bytes - dp_before.bytes;
      dp->all_reduce(&global_loss, 1, ReduceOp::Avg);
    }
    if (checked) run.checked.back().averaged_gradient = model.gather(true);
    {
      auto span = ctx.trace.span("optimizer", "compute");
      optimizer->step();
    }
    chart.end_step(s);
    require_finite_loss(global_loss, s, f.lr);  // the same value on every rank: all stop alike
    run.train_loss.push_back(global_loss);
    if (((s + 1) % f.eval_every == 0 || s + 1 == f.steps) && f.eval_batches > 0) {
      const double held = gathered_held_out_loss(model, text, f, ctx.is_root());
      if (ctx.is_root()) run.held_out.push_back({s + 1, held});
    }
    bar.update(s + 1, "loss " + fixed(global_loss, 4));
  }
  bar.finish();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double steps = double(std::max<int64_t>(1, f.steps));
  run.dp_bytes_per_step /= steps;
  for (AllReduces* a : {&run.forward, &run.backward, &run.sp_forward.all_gather, &run.sp_forward.reduce_scatter,
                        &run.sp_backward.all_gather, &run.sp_backward.reduce_scatter})
    per_step(*a, steps);
  run.sp_grad_floats /= steps;
  if (!ctx.is_root()) run.checked.clear();
  return run;
}

}  // namespace dpt::ch15
