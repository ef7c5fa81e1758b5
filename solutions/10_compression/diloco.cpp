// solutions/10_compression/diloco.cpp — DiLoCo's outer step (spec in ch10.h):
// average where the ranks went, take the way back as a gradient, and step
// from where they all started with Nesterov momentum.
#include "ch10.h"

#include "dpt/check.h"

namespace dpt::ch10 {

void diloco_outer_step(Communicator& comm, std::vector<float>& params, const std::vector<float>& before,
                       std::vector<float>& momentum, float outer_lr, float outer_momentum) {
  DPT_CHECK(params.size() == before.size() && params.size() == momentum.size(),
            "diloco_outer_step: params, before and momentum must have the same size; got " << params.size() << ", "
                                                                                          << before.size() << ", " << momentum.size());
  comm.all_reduce(params.data(), int64_t(params.size()), ReduceOp::Avg);  // mean θ_r, the same everywhere
  for (std::size_t i = 0; i < params.size(); ++i) {
    const float delta = before[i] - params[i];                        // Δ = θ₀ − mean θ_r: a descent direction's gradient
    momentum[i] = outer_momentum * momentum[i] + delta;               // m' = μ m + Δ
    params[i] = before[i] - outer_lr * (delta + outer_momentum * momentum[i]);  // Nesterov: from θ₀, not from the mean
  }
}

}  // namespace dpt::ch10
