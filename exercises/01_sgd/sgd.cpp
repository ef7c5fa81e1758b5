// exercises/01_sgd/sgd.cpp — hole: the SGD update.
// The spec is dpt::ch01::sgd_update in chapters/01_sgd/ch01.h.
//
// Hints:
//   - param.data() and grad.data() are plain float pointers; param.numel()
//     counts the elements.
//   - Write into param's data: assigning a new tensor to the local handle
//     `param` would leave the model's weights unchanged.
#include "ch01.h"

#include "dpt/check.h"

namespace dpt::ch01 {

void sgd_update(Tensor& param, const Tensor& grad, float lr) {
  (void)param, (void)grad, (void)lr;
  throw NotImplemented("ch01: sgd_update — see exercises/01_sgd/sgd.cpp");
}

}  // namespace dpt::ch01
