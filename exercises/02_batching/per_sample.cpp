// exercises/02_batching/per_sample.cpp — hole: one gradient per sample, and
// the batch's gradient rebuilt from them.
// The contract is dpt::ch02::per_sample_gradients in chapters/02_batching/ch02.h;
// hints in tiers are in docs/ch02_batching.md (§ Hints).
//
// Pointers:
//   - Chapter 01's loop has every move you need: model.forward,
//     softmax_cross_entropy (dpt/ops.h), backward(), p.grad(), p.zero_grad().
//   - batch.x.rows(begin, end) is a view of some rows; batch.y holds the labels.
//   - The model may live in device memory the host cannot read: reach
//     gradients through the Tensor ops of dpt/ops.h (axpy_, scale_, …), not data().
// Chapter 03 builds the batch's gradient the same way, across devices.
#include "ch02.h"

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch02 {

PerSampleGradients per_sample_gradients(const MLP& model, const Batch& batch) {
  (void)model, (void)batch;
  throw NotImplemented("ch02: per_sample_gradients — see exercises/02_batching/per_sample.cpp");
}

}  // namespace dpt::ch02
