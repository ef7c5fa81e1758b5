// exercises/02_batching/average.cpp — hole: average K gradient lists.
// The spec is dpt::ch02::average_gradients in chapters/02_batching/ch02.h;
// why the mean (and not the sum) is in docs/ch02_batching.md.
//
// Hints:
//   - Start each result[p] with Tensor::zeros(shape, device) and add into it
//     with dpt::axpy_(y, alpha, x) from dpt/ops.h. Not a loop over data():
//     under --device cuda the gradients live on the GPU, where the host
//     cannot read them (axpy_ runs where the tensors are).
//   - Divide once at the end, by K = per_sample.size().
//   - Do not add into per_sample's tensors: they are the caller's.
// Chapter 03 does exactly this across devices.
#include "ch02.h"

#include "dpt/check.h"

namespace dpt::ch02 {

Gradients average_gradients(const std::vector<Gradients>& per_sample) {
  (void)per_sample;
  throw NotImplemented("ch02: average_gradients — see exercises/02_batching/average.cpp");
}

}  // namespace dpt::ch02
