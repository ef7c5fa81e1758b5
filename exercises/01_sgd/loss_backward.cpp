// exercises/01_sgd/loss_backward.cpp — hole: backward of the loss.
// The contract (the loss, shapes, what must hold) is
// dpt::ch01::softmax_cross_entropy_backward in chapters/01_sgd/ch01.h; hints
// in tiers are in docs/ch01_sgd.md (§ Hints).
//
// Pointers:
//   - Derive ∂loss/∂logits on paper first, from the loss exactly as ch01.h
//     writes it, before any code.
//   - Tensor::zeros(shape, logits.device()), data(), size(0), size(1).
//   - Every postcondition in ch01.h is tested, the range of logits included.
#include "ch01.h"

#include "dpt/check.h"

namespace dpt::ch01 {

Tensor softmax_cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& labels) {
  (void)logits, (void)labels;
  throw NotImplemented("ch01: softmax_cross_entropy_backward — see exercises/01_sgd/loss_backward.cpp");
}

}  // namespace dpt::ch01
