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
void per_step(AllReduces& a, double steps) { a.calls /= steps, a.bytes /= steps; }

// Bytes charged to Activations (the embeddings, LayerNorms, residual adds)
// held at the end of one forward on `batch`, the graph then dropped.
// A stage after the first starts from a residual stream of zeros, made before the count.
double region_bytes(const TensorParallelGpt& model, const TokenBatch& batch, int64_t B, bool sp, Device& device) {
  const int64_t rows = int64_t(batch.inputs.size()) / (sp ? model.group().size() : 1);
  const Tensor input = model.has_embeddings() ? Tensor() : Tensor::zeros({rows, model.shape().width}, device);
  const MemoryLedger& ledger = device.ledger();
  const double before = double(ledger.current(MemoryCategory::Activations));
  Tensor out = model.stage_forward(input, batch.inputs, batch.targets, B, sp);
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
double gathered_held_out_loss(Communicator& pp, const TensorParallelGpt& model, const Corpus& text, const Ch14Flags& f,
                              bool root) {
  const std::vector<float> values = gather_pipeline(pp, model, false);
  if (!root) return 0;
  Rng unused(0);
  Gpt one(model.shape(), Device::host(), unused);
  set_flat_values(one, values);
  return held_out_loss(one, text, f);
}

// Rank 0 learns the ops each stage of its pipeline ran and their seconds.
void record_stages(Communicator& pp, const GptStageStep& step, TpRun& run) {
  std::vector<int> ops;
  for (const ch13::Op& op : step.ran) ops.push_back(2 * op.micro_batch + (op.pass == ch13::Pass::Backward ? 1 : 0));
  std::vector<float> seconds(step.seconds.begin(), step.seconds.end());
  const std::size_t n = ops.size(), P = std::size_t(pp.size());
  std::vector<int> all_ops(n * P);
  std::vector<float> all_seconds(n * P);
  pp.all_gather(ops.data(), all_ops.data(), int64_t(n));  // every stage runs 2M ops
  pp.all_gather(seconds.data(), all_seconds.data(), int64_t(n));
  for (std::size_t s = 0; s < P; ++s) {
    run.ran_by_stage.emplace_back(), run.seconds_by_stage.emplace_back();
    for (std::size_t i = 0; i < n; ++i) {
      const int code = all_ops[s * n + i];
      run.ran_by_stage.back().push_back({code % 2 ? ch13::Pass::Backward : ch13::Pass::Forward, code / 2});
      run.seconds_by_stage.back().push_back(all_seconds[s * n + i]);
    }
  }
}
}  // namespace

TpRun train_tensor_parallel_gpt(Context& ctx, Ch15Grid& grid, TensorParallelGpt& model, const Corpus& text,
                                const Ch14Flags& f, bool sp, const PipelineSetting& pipe, bool verify,
                                const Narrator& say, StepChart& chart) {
  TpRun run;
  const int64_t B = f.batch, T = f.shape.context;
  const int D = grid.dp_size(), d = grid.dp_rank();
  Communicator& pp = grid.pp();
  std::vector<Tensor> params = model.parameters();
  auto optimizer = make_optimizer(f, params);
  const std::vector<ch13::Op> ops = stage_schedule(pipe.schedule, pp.rank(), pp.size(), pipe.micro_batches);
  const WindowSampler sampler(int64_t(text.train.size()), T, B * D, !f.no_shuffle, f.seed);
  ProgressBar bar("training", f.steps, say.enabled());
  const auto start = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < f.steps; ++s) {
    const bool checked = verify && (s == 0 || s == f.steps - 1);  // the same on every rank: the gathers are collective
    if (checked) run.checked.push_back({s, gather_pipeline(pp, model, false), {}});
    TokenBatch mine = window_batch(text.train, sampler.replica_starts(s, d, D), T);
    if (s == 0 && sp) {  // the ledger's view of one forward of the stage, with and without --sp, on this batch
      run.region_bytes = region_bytes(model, mine, B, true, ctx.device);
      run.region_bytes_without_sp = region_bytes(model, mine, B, false, ctx.device);
    }
    chart.begin_step(s);  // the charted step's spans are stored on every rank (step_chart.h)
    optimizer->zero_grad();
    // The TP all-reduces (or the --sp pair) happen inside the stage's blocks, counted per op.
    const double pp_before = double(pp.traffic().bytes_sent(pp.rank()));
    const GptStageStep step = pipeline_gpt_step(pp, model, mine, B, pipe.micro_batches, sp, ops, &chart);
    run.pp_bytes_per_step += double(pp.traffic().bytes_sent(pp.rank())) - pp_before;
    add_since(run.forward, {}, step.traffic.forward);
    add_since(run.backward, {}, step.traffic.backward);
    add_since(run.sp_forward, {}, step.traffic.sp_forward);
    add_since(run.sp_backward, {}, step.traffic.sp_backward);
    if (s == 0) record_stages(pp, step, run);
    float global_loss = float(step.loss);  // the last stage's; the others hold 0
    if (pp.size() > 1) pp.all_reduce(&global_loss, 1, ReduceOp::Sum);
    if (sp) {  // after the last micro-batch: the replicated gradients, and the loss's shares
      sum_replicated_gradients(grid.tp(), model, run.sp_grad_floats);
      grid.tp().all_reduce(&global_loss, 1, ReduceOp::Sum);
    }
    if (Communicator* dp = grid.dp()) {  // dp pipelines on dp slices of the batch: average each share's gradient
      std::vector<Tensor> grads;
      for (const Tensor& p : params) grads.push_back(p.grad());
      const AllReduces dp_before = all_reduces_so_far(*dp);
      average_over_ranks(*dp, grads);
      run.dp_bytes_per_step += all_reduces_so_far(*dp).bytes - dp_before.bytes;
      dp->all_reduce(&global_loss, 1, ReduceOp::Avg);
    }
    if (checked) run.checked.back().averaged_gradient = gather_pipeline(pp, model, true);
    {
      auto span = ctx.trace.span("optimizer", "compute");
      optimizer->step();
    }
    chart.end_step(s);
    require_finite_loss(global_loss, s, f.lr);  // the same value on every rank: all stop alike
    run.train_loss.push_back(global_loss);
    if (((s + 1) % f.eval_every == 0 || s + 1 == f.steps) && f.eval_batches > 0) {
      const double held = gathered_held_out_loss(pp, model, text, f, ctx.is_root());
      if (ctx.is_root()) run.held_out.push_back({s + 1, held});
    }
    bar.update(s + 1, "loss " + fixed(global_loss, 4));
  }
  bar.finish();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double steps = double(std::max<int64_t>(1, f.steps));
  run.dp_bytes_per_step /= steps, run.pp_bytes_per_step /= steps;
  for (AllReduces* a : {&run.forward, &run.backward, &run.sp_forward.all_gather, &run.sp_forward.reduce_scatter,
                        &run.sp_backward.all_gather, &run.sp_backward.reduce_scatter})
    per_step(*a, steps);
  run.sp_grad_floats /= steps;
  if (!ctx.is_root()) run.checked.clear(), run.ran_by_stage.clear(), run.seconds_by_stage.clear();
  return run;
}

}  // namespace dpt::ch15
