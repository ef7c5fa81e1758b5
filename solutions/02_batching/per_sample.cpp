// solutions/02_batching/per_sample.cpp — one forward/backward per sample.
#include "ch02.h"

#include "dpt/ops.h"

namespace dpt::ch02 {

std::vector<Gradients> per_sample_gradients(const MLP& model, const Batch& batch) {
  std::vector<Tensor> params = model.parameters();
  std::vector<Gradients> result;
  for (int64_t i = 0; i < batch.x.size(0); ++i) {
    for (auto& p : params) p.zero_grad();
    softmax_cross_entropy(model.forward(batch.x.rows(i, i + 1)), {batch.y[i]}).backward();
    Gradients grads;
    for (auto& p : params) grads.push_back(p.grad().clone());  // our own copy, independent of p.grad()
    result.push_back(std::move(grads));
  }
  for (auto& p : params) p.zero_grad();
  return result;
}

}  // namespace dpt::ch02
