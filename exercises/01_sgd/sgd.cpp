// exercises/01_sgd/sgd.cpp — hole: the SGD update.
//
// Gradient descent moves every weight a small step against its gradient:
//
//     param[i] ← param[i] − lr · grad[i]     for every element i
//
// Hints: param.data() and grad.data() are plain float pointers; param.numel()
// counts the elements. The update is in place: write into param.
#include "ch01_holes.h"

#include "dpt/check.h"

namespace dpt::ch01 {

void sgd_update(Tensor& param, const Tensor& grad, float lr) {
  (void)param, (void)grad, (void)lr;
  throw NotImplemented("ch01 sgd_update — see exercises/01_sgd/sgd.cpp");
}

}  // namespace dpt::ch01
