// solutions/02_batching/per_sample.cpp — one forward/backward per sample,
// then the batch's gradient as their mean.
//
// backward() adds into a gradient that is already there, so every sample
// starts from cleared gradients (the caller's included) and keeps a copy of
// its own. The batch's loss is the mean of the samples' losses, so its
// gradient is the mean of theirs: summed into new tensors (never into a kept
// sample), divided once, through Tensor ops that run on any device.
#include "ch02.h"

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch02 {

PerSampleGradients per_sample_gradients(const MLP& model, const Batch& batch) {
  const int64_t count = batch.x.size(0);
  DPT_CHECK(count >= 1, "per_sample_gradients: the batch has no samples");
  std::vector<Tensor> params = model.parameters();
  PerSampleGradients result;
  for (int64_t i = 0; i < count; ++i) {
    for (auto& p : params) p.zero_grad();
    softmax_cross_entropy(model.forward(batch.x.rows(i, i + 1)), {batch.y[i]}).backward();
    Gradients grads;
    for (auto& p : params) grads.push_back(p.grad().clone());  // our own copy, independent of p.grad()
    result.samples.push_back(std::move(grads));
  }
  for (auto& p : params) p.zero_grad();
  for (const Tensor& p : params) result.mean.push_back(Tensor::zeros(p.shape(), p.device()));
  for (const Gradients& sample : result.samples)
    for (std::size_t p = 0; p < params.size(); ++p) axpy_(result.mean[p], 1.0f, sample[p]);
  for (Tensor& m : result.mean) scale_(m, 1.0f / float(count));
  return result;
}

}  // namespace dpt::ch02
