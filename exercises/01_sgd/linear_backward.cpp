// exercises/01_sgd/linear_backward.cpp — hole: backward of a Linear layer.
// The contract (what it returns, shapes) is dpt::ch01::linear_backward in
// chapters/01_sgd/ch01.h; hints in tiers are in docs/ch01_sgd.md (§ Hints).
//
// Pointers:
//   - Make the outputs with Tensor::zeros(shape, x.device()).
//   - Element (b, o) of dy is dy.data()[b * out + o] (row-major); plain loops
//     are fine.
//   - Start from y's formula written element by element, not from a guess of
//     the matrix products.
#include "ch01.h"

#include "dpt/check.h"

namespace dpt::ch01 {

LinearGrads linear_backward(const Tensor& x, const Tensor& weight, const Tensor& dy) {
  (void)x, (void)weight, (void)dy;
  throw NotImplemented("ch01: linear_backward — see exercises/01_sgd/linear_backward.cpp");
}

}  // namespace dpt::ch01
