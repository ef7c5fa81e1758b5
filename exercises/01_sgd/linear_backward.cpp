// exercises/01_sgd/linear_backward.cpp — hole: backward of a Linear layer.
// The spec (what it returns, shapes) is dpt::ch01::linear_backward in
// chapters/01_sgd/ch01.h; the derivation is in docs/ch01_sgd.md.
//
// Hints:
//   - Check the shapes first: a shape mistake is the classic backward bug.
//     The only product of dy (B, out) and x (B, in) shaped like weight
//     (out, in) is dyᵀ · x.
//   - Make the outputs with Tensor::zeros(shape, x.device()) and add into them.
//   - Element (b, o) of dy is dy.data()[b * out + o]; plain loops are fine
//     (dpt::gemm from dpt/ops.h does the same products faster).
//   - dbias sums dy over the batch: each sample contributes, and dy already
//     carries the 1/B of the mean loss.
#include "ch01.h"

#include "dpt/check.h"

namespace dpt::ch01 {

LinearGrads linear_backward(const Tensor& x, const Tensor& weight, const Tensor& dy) {
  (void)x, (void)weight, (void)dy;
  throw NotImplemented("ch01: linear_backward — see exercises/01_sgd/linear_backward.cpp");
}

}  // namespace dpt::ch01
