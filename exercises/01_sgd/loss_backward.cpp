// exercises/01_sgd/loss_backward.cpp — hole: backward of the loss.
// The contract (the loss, shapes, what must hold) is
// dpt::ch01::softmax_cross_entropy_backward in chapters/01_sgd/ch01.h; hints
// in tiers are in docs/ch01_sgd.md (§ Hints).
//
// Pointers:
//   - Derive ∂loss/∂z for one row on paper first, with the label as one of
//     the C classes; then remember which loss this is: the batch's mean.
//   - Tensor::zeros(shape, logits.device()), data(), size(0), size(1).
//   - The contract includes logits of 1000. Try std::exp(1000.0f).
#include "ch01.h"

#include "dpt/check.h"

namespace dpt::ch01 {

Tensor softmax_cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& labels) {
  (void)logits, (void)labels;
  throw NotImplemented("ch01: softmax_cross_entropy_backward — see exercises/01_sgd/loss_backward.cpp");
}

}  // namespace dpt::ch01
