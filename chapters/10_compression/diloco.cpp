// diloco.cpp — DiLoCo's loop around the outer-step hole (diloco.h).
#include "diloco.h"

#include <iostream>

#include "ch10.h"
#include "dpt/holes.h"
#include "dpt/ops.h"
#include "dpt/optim.h"

namespace dpt::ch10 {

DilocoRun train_diloco(Context& ctx, const Options& o, const Dataset& data, MLP& replica, const Diloco& d) {
  DilocoRun out;
  std::vector<Tensor> params = replica.parameters();
  auto inner = make_optimizer(o.optimizer, params, o.lr);  // each rank's own, state included
  std::vector<float> before = flatten(params), momentum(before.size(), 0.0f);  // θ₀ of the round; the outer step's own
  int64_t taken = 0;
  DataParallelStep step = [&](const std::vector<int64_t>& global) {
    Batch batch = gather_batch(data, strided_shard(global, ctx.rank, ctx.world), ctx.device);
    inner->zero_grad();
    Tensor loss = softmax_cross_entropy(replica.forward(batch.x), batch.y);
    loss.backward();
    inner->step();  // on this rank's own gradient: nothing sent
    if (++taken % d.inner_steps == 0) {
      std::vector<float> theta = flatten(params);
      diloco_outer_step(ctx.comm, theta, before, momentum, d.outer_lr, d.outer_momentum);  // the hole
      unflatten(theta, params);
      before = theta;
      ++out.outer_steps;
    }
    return loss.item();
  };
  const std::string hole = unwritten_hole(  // an unwritten hole throws on every rank at step H−1, before its message
      ctx.comm, [&] { out.run = run_data_parallel(ctx, o, data, replica, step, "diloco H=" + std::to_string(d.inner_steps)); });
  if (!hole.empty()) {
    out.written = false, out.not_written = hole;
    if (ctx.is_root()) std::cout << "  diloco: not written yet (" << hole << ")\n";
    return out;
  }
  out.replica_spread = replica_spread(ctx, replica);
  return out;
}

}  // namespace dpt::ch10
