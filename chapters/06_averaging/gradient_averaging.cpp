// gradient_averaging.cpp — --average grads' baseline (provided, see local_sgd.h).
#include "local_sgd.h"

#include "dpt/flatten.h"

namespace dpt::ch06 {

void average_gradients(Context& ctx, std::vector<Tensor>& grads) {
  Tensor flat = flatten_on(grads, ctx.device);  // (Ψ,), on the rank's device
  ctx.comm.all_reduce(flat.data(), flat.numel(), ReduceOp::Avg);
  unflatten(flat, grads);
}

}  // namespace dpt::ch06
