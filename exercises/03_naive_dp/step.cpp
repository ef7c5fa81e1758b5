// exercises/03_naive_dp/step.cpp — hole: one naive data-parallel step.
// Contract: ch03::naive_data_parallel_step in chapters/03_naive_dp/ch03.h.
//
// Pointers: gather_batch (dpt/data.h) copies chosen samples to a device;
// replica.forward, softmax_cross_entropy (dpt/ops.h), Tensor::backward and
// Tensor::grad are chapter 01's; Optimizer::zero_grad and Optimizer::step
// (dpt/optim.h). Your other holes, shard_indices and host_average_gradients,
// are yours to call.
// Hints, in tiers: docs/ch03_naive_dp.md, "Hints".
#include "ch03.h"

#include "dpt/check.h"

namespace dpt::ch03 {

float naive_data_parallel_step(Context& ctx, MLP& replica, Optimizer& optimizer, const Dataset& data,
                               const std::vector<int64_t>& global_batch) {
  (void)ctx, (void)replica, (void)optimizer, (void)data, (void)global_batch;
  throw NotImplemented("ch03: naive_data_parallel_step — see exercises/03_naive_dp/step.cpp");
}

}  // namespace dpt::ch03
