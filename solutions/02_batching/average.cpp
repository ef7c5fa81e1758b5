// solutions/02_batching/average.cpp — the element-wise mean of N gradient lists.
#include "ch02.h"

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch02 {

Gradients average_gradients(const std::vector<Gradients>& per_sample) {
  DPT_CHECK(!per_sample.empty(), "average_gradients: no gradients to average");
  Gradients mean;
  for (const Tensor& g : per_sample.front()) mean.push_back(Tensor::zeros(g.shape(), g.device()));
  for (const Gradients& sample : per_sample) {
    DPT_CHECK(sample.size() == mean.size(), "average_gradients: gradient lists differ in length");
    for (std::size_t p = 0; p < mean.size(); ++p) axpy_(mean[p], 1.0f, sample[p]);
  }
  for (Tensor& m : mean) scale_(m, 1.0f / float(per_sample.size()));
  return mean;
}

}  // namespace dpt::ch02
