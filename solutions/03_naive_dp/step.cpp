// solutions/03_naive_dp/step.cpp — one naive data-parallel step on this rank.
#include "ch03.h"

#include "dpt/ops.h"

namespace dpt::ch03 {

float naive_data_parallel_step(Context& ctx, MLP& replica, Optimizer& optimizer, const Dataset& data,
                               const std::vector<int64_t>& global_batch) {
  Batch batch = gather_batch(data, shard_indices(global_batch, ctx.rank, ctx.world), ctx.device);
  optimizer.zero_grad();  // backward adds to grad(): last step's gradient must go
  Tensor loss = softmax_cross_entropy(replica.forward(batch.x), batch.y);  // mean over the shard
  loss.backward();
  std::vector<Tensor> grads;  // handles: averaging them changes the parameters' grad()
  for (const Tensor& p : replica.parameters()) grads.push_back(p.grad());
  host_average_gradients(ctx.comm, grads);  // now the global batch's gradient, on every rank
  optimizer.step();  // the same step from the same weights: replicas stay identical
  return loss.item();
}

}  // namespace dpt::ch03
