// exercises/01_sgd/sgd.cpp — hole: one step of SGD with momentum.
// The contract is dpt::ch01::sgd_update in chapters/01_sgd/ch01.h; hints in
// tiers are in docs/ch01_sgd.md (§ Hints).
//
// Pointers:
//   - param.data(), grad.data() are float pointers; numel() counts elements.
//   - Tensor::zeros(shape, device), t.clone() and t.defined() exist.
//   - Write into param's storage: assigning a new tensor to the handle
//     `param` leaves the model's weights unchanged.
#include "ch01.h"

#include "dpt/check.h"

namespace dpt::ch01 {

void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, float lr, float momentum) {
  (void)param, (void)grad, (void)velocity, (void)lr, (void)momentum;
  throw NotImplemented("ch01: sgd_update — see exercises/01_sgd/sgd.cpp");
}

}  // namespace dpt::ch01
