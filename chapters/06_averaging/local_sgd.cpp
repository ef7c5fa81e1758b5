// local_sgd.cpp — chapter 06's loop: gradient, parameter or no averaging per
// step, and the drift between replicas (provided code, see local_sgd.h).
#include "local_sgd.h"

#include <cmath>

#include "dpt/data_parallel.h"
#include "dpt/ops.h"
#include "dpt/optim.h"

namespace dpt::ch06 {

namespace {
double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); }

// The mean over ranks of one float, without all_reduce (kept for averaging).
double mean_over_ranks(Context& ctx, float value) {
  std::vector<float> all(std::size_t(ctx.world));
  ctx.comm.all_gather(&value, all.data(), 1);
  double sum = 0;
  for (float v : all) sum += v;
  return sum / ctx.world;
}
}  // namespace

LocalSgdRun train_local_sgd(Context& ctx, const Options& o, const Dataset& data, MLP& replica,
                            const Schedule& schedule) {
  std::vector<Tensor> params = replica.parameters();
  auto optimizer = make_optimizer(o.optimizer, params, o.lr);
  BatchSampler sampler(data.size(), o.batch * ctx.world, !o.no_shuffle, o.seed);  // same global batch everywhere
  LocalSgdRun run;
  ctx.comm.barrier();
  ctx.comm.traffic().clear();  // threads share one log: cleared between barriers
  ctx.comm.barrier();
  for (int64_t step = 0; step < o.steps; ++step) {
    ctx.comm.traffic().set_step(step);
    Batch batch = gather_batch(data, strided_shard(sampler.indices(step), ctx.rank, ctx.world), ctx.device);
    optimizer->zero_grad();
    Tensor loss = softmax_cross_entropy(replica.forward(batch.x), batch.y);
    loss.backward();
    Averaging what = Averaging::Gradients;
    if (schedule.parameters) {
      what = local_sgd_step(ctx.comm, schedule, step, params, *optimizer);  // the hole
    } else {
      std::vector<Tensor> grads;
      for (Tensor& p : params) grads.push_back(p.grad());
      average_gradients(ctx, grads);  // now the same mean on every rank
      optimizer->step();
    }
    run.losses.push_back(mean_over_ranks(ctx, loss.item()));
    run.drift.push_back(replica_spread(ctx, replica));  // how far apart the replicas are at the step's end
    if (what == Averaging::Gradients) ++run.gradient_steps;
    if (what == Averaging::Parameters) {
      run.averaged_at.push_back(step);
      run.spread_after_averaging = nan_max(run.spread_after_averaging, run.drift.back());
    }
    if (!std::isfinite(run.losses.back())) {  // the same value on every rank: all stop here
      run.diverged_step = step;
      break;
    }
  }
  run.traffic = ctx.comm.gather_traffic();
  return run;
}

}  // namespace dpt::ch06
