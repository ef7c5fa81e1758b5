// data_parallel.cpp — the shared data-parallel loop of chapters 03 and 04.
#include "data_parallel.h"

#include <algorithm>
#include <cstring>

#include "ch03_holes.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/report.h"

namespace dpt::ch03 {

MLP make_replica(Context& ctx, const Options& o) {
  Options replica_options = o;
  replica_options.load_weights.clear();  // only the master reads the file
  MLP replica = build_model(replica_options, ctx.device);
  if (ctx.is_root()) {
    MLP master = build_model(o, Device::host());  // the CPU master copy
    copy_parameters(master, replica);
  }
  for (Tensor& p : replica.parameters()) ctx.comm.broadcast(p, 0);  // master → every replica
  return replica;
}

DataParallelRun train_data_parallel(Context& ctx, const Options& o, const Dataset& data, MLP& replica,
                                    const GradientAverager& average, const std::string& label) {
  std::vector<Tensor> params = replica.parameters();
  auto optimizer = make_optimizer(o.optimizer, params, o.lr);
  // Same seed on every rank: every rank computes the same global batch.
  BatchSampler sampler(data.size(), o.batch * ctx.world, !o.no_shuffle, o.seed);
  MetricsWriter metrics(ctx.is_root() ? o.metrics : "");
  ProgressBar bar(label, o.steps, ctx.is_root() && !o.quiet);
  DataParallelRun run;
  auto start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < o.steps; ++step) {
    ctx.comm.traffic().set_step(step);
    ctx.trace.reset_seconds();
    std::vector<Tensor> grads;
    Tensor loss;
    {
      auto span = ctx.trace.span("forward+backward", "compute");
      Batch batch = gather_batch(data, shard_indices(sampler.indices(step), ctx.rank, ctx.world), ctx.device);
      optimizer->zero_grad();
      loss = softmax_cross_entropy(replica.forward(batch.x), batch.y);
      loss.backward();
      for (Tensor& p : params) grads.push_back(p.grad());
    }
    {
      auto span = ctx.trace.span("average gradients", "comm");
      average(ctx, grads);  // now identical on every rank
    }
    {
      auto span = ctx.trace.span("optimizer", "compute");
      optimizer->step();
    }
    // The global loss is the mean of the shards' losses (equal shard sizes).
    float global_loss = loss.item();
    ctx.comm.all_reduce(&global_loss, 1, ReduceOp::Avg);
    run.losses.push_back(global_loss);
    double compute = ctx.trace.seconds("compute"), comm = ctx.trace.seconds("comm");
    run.compute_seconds += compute;
    run.comm_seconds += comm;
    metrics.write(step, {{"loss", global_loss}, {"compute_s", compute}, {"comm_s", comm}});
    bar.update(step + 1, "loss " + fixed(global_loss, 4));
  }
  bar.finish();
  run.seconds = seconds_since(start);
  TrafficLog all = ctx.comm.gather_traffic();  // every rank's sends (MPI: from every process)
  for (int64_t step = 0; step < o.steps; ++step) run.traffic_bytes += all.step_bytes(step);
  return run;
}

double single_device_difference(const Options& o, const Dataset& data, int world, const MLP& trained) {
  Options single = o;
  single.batch = o.batch * world;
  MLP reference = build_model(single, Device::host());
  auto optimizer = make_optimizer(single.optimizer, reference.parameters(), single.lr);
  BatchSampler sampler(data.size(), single.batch, !single.no_shuffle, single.seed);
  for (int64_t step = 0; step < single.steps; ++step) {
    Batch batch = gather_batch(data, sampler.indices(step), Device::host());
    optimizer->zero_grad();
    softmax_cross_entropy(reference.forward(batch.x), batch.y).backward();
    optimizer->step();
  }
  float worst = 0;
  auto a = reference.parameters(), b = trained.parameters();
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, max_abs_diff(a[i], b[i].to(Device::host())));
  return worst;
}

std::vector<float> flatten(const std::vector<Tensor>& tensors) {
  int64_t total = 0;
  for (const Tensor& t : tensors) total += t.numel();
  std::vector<float> flat(static_cast<std::size_t>(total));
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    copy_bytes(flat.data() + offset, Device::host(), t.data(), t.device(), t.nbytes());
    offset += t.numel();
  }
  return flat;
}

void unflatten(const std::vector<float>& flat, std::vector<Tensor>& tensors) {
  int64_t offset = 0;
  for (Tensor& t : tensors) {
    copy_bytes(t.data(), t.device(), flat.data() + offset, Device::host(), t.nbytes());
    offset += t.numel();
  }
}

void add_data_parallel_flags(CLI::App& app, bool& verify) {
  app.add_flag("--verify,!--no-verify", verify,
               "Also train on one device with the global batch and compare weights (default on)")
      ->capture_default_str();
}

}  // namespace dpt::ch03
