// bucketed_training.cpp — chapter 05's loop: forward, backward with buckets
// launched from the grad-ready hooks, wait + unpack, optimizer step. The
// buckets' set-up, backward and the wait are the sync's (bucketed_sync.h, which
// chapter 14 drives too); what happens inside the hooks and on the progress
// thread is the engine's (bucket_engine.cpp); what the step's record says, the step record's
// (step_record.cpp). The loss is read after the optimizer step, where the
// host would wait for the GPU anyway (the next batch's upload), not between
// forward and backward.
#include "bucketed_training.h"

#include <chrono>
#include <cmath>
#include <memory>

#include "bucket_engine.h"
#include "bucketed_sync.h"
#include "dpt/check.h"
#include "dpt/data_parallel.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/report.h"
#include "dpt/timing.h"

namespace dpt::ch05 {

std::vector<int64_t> parameter_bytes(const MLP& model) {
  std::vector<int64_t> bytes;
  for (const Tensor& p : model.parameters()) bytes.push_back(4 * p.numel());
  return bytes;
}

std::string describe_layout(const std::vector<Bucket>& layout, const std::vector<std::string>& names) {
  Table table("bucket layout (filled in reverse parameters() order)", {"bucket", "parameters", "bytes"});
  for (std::size_t b = 0; b < layout.size(); ++b) {
    std::string listed;
    for (int p : layout[b].params) listed += (listed.empty() ? "" : ", ") + names[std::size_t(p)];
    table.add_row({std::to_string(b), listed, format_bytes(double(layout[b].bytes))});
  }
  return table.str();
}

std::string describe_layout(const std::vector<Bucket>& layout, const MLP& model) {
  std::vector<std::string> names;
  for (const NamedTensor& p : model.named_parameters()) names.push_back(p.name);
  return describe_layout(layout, names);
}

BucketedRun train_bucketed(Context& ctx, const Options& o, const Dataset& data, MLP& replica, const BucketPlan& plan,
                           const std::string& label, StepRecorder* recorder) {
  DPT_CHECK(plan.accumulate >= 1, "--accumulate must be >= 1, got " << plan.accumulate);
  std::vector<std::string> names;
  for (const NamedTensor& p : replica.named_parameters()) names.push_back(p.name);
  std::vector<Tensor> params = replica.parameters();
  BucketedSync sync(ctx, params, names, plan);  // your buckets, hooked on every parameter until it goes
  BucketedRun run;
  run.layout = sync.layout();
  run.gpu_clock = sync.gpu_clock();

  auto optimizer = make_optimizer(o.optimizer, params, o.lr);
  const int64_t K = plan.accumulate, micro = o.batch * ctx.world;  // samples per micro-batch, all ranks
  BatchSampler sampler(data.size(), micro * K, !o.no_shuffle, o.seed);  // same draw on every rank
  MetricsWriter metrics(ctx.is_root() ? o.metrics : "");
  ProgressBar bar(label, o.steps, ctx.is_root() && !o.quiet);
  ctx.comm.barrier();
  ctx.comm.traffic().clear();  // threads share one log: cleared between barriers
  ctx.comm.barrier();
  auto start = Clock::now();
  for (int64_t step = 0; step < o.steps; ++step) {
    auto step_start = Clock::now();
    ctx.comm.traffic().set_step(step);
    optimizer->zero_grad();
    sync.begin_step(step);
    std::vector<int64_t> global = sampler.indices(step);
    float loss_sum = 0;
    std::vector<Tensor> gpu_losses;  // on a GPU: each micro-batch's loss, read after the optimizer step
    for (int64_t k = 0; k < K; ++k) {
      std::vector<int64_t> slice(global.begin() + k * micro, global.begin() + (k + 1) * micro);
      Batch batch = gather_batch(data, strided_shard(slice, ctx.rank, ctx.world), ctx.device);
      Tensor loss;
      {
        auto span = ctx.trace.span("forward", "compute");
        loss = softmax_cross_entropy(replica.forward(batch.x), batch.y);
      }
      if (run.gpu_clock)
        gpu_losses.push_back(loss.clone());  // a device copy, queued: reading it now would stall the GPU's queue
      else
        loss_sum += loss.item();
      sync.backward(K == 1 ? loss : scale(loss, 1.0f / float(K)), /*syncing=*/k == K - 1);  // DDP's no_sync before
    }
    sync.finish();
    if (recorder) recorder->record(step, o.steps, params);  // outside the timed spans
    {
      auto span = ctx.trace.span("optimizer", "compute");
      optimizer->step();
    }
    // On a GPU the first item() waits for the step's kernels; the same float sum as the host's.
    for (const Tensor& l : gpu_losses) loss_sum += l.item();
    float global_loss = loss_sum / float(K);
    ctx.comm.all_reduce(&global_loss, 1, ReduceOp::Avg);
    run.losses.push_back(global_loss);
    BucketStep s = sync.summarise();
    s.step_s = seconds_between(step_start, Clock::now());
    run.steps.push_back(s);
    if (run.gpu_clock && ctx.trace.enabled())
      ctx.trace.instant("GPU clock (CUDA events)", "compute",
                        {{"step", double(step)}, {"backward_ms", s.backward_s * 1e3}, {"comm_ms", s.comm_s * 1e3},
                         {"hidden_ms", s.hidden_s * 1e3}});
    metrics.write(step, {{"loss", global_loss}, {"backward_s", s.backward_s}, {"comm_s", s.comm_s},
                         {"hidden_s", s.hidden_s}, {"step_s", s.step_s}});
    bar.update(step + 1, "loss " + fixed(global_loss, 4));
    if (!std::isfinite(global_loss)) {  // the same value on every rank: all stop here
      run.diverged_step = step;
      break;
    }
  }
  bar.finish();
  run.seconds = seconds_between(start, Clock::now());
  run.traffic = ctx.comm.gather_traffic();
  return run;
}

}  // namespace dpt::ch05
