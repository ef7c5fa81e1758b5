// exercises/01_sgd/linear_backward.cpp — hole: backward of a Linear layer.
//
// Forward:  y = x · weightᵀ + bias,  x (B, in), weight (out, in), y (B, out).
// Given dy = d loss / d y (B, out), the chain rule gives
//
//     dx      = dy · weight      (B, out)·(out, in)  → (B, in)
//     dweight = dyᵀ · x          (out, B)·(B, in)    → (out, in)
//     dbias   = Σ_rows dy        sum over the batch  → (out)
//
// Hints: make the outputs with Tensor::empty(shape, x.device()); either loop
// over indices (y[b][o] is dy.data()[b * out + o]) or call
// dpt::gemm(a, transpose_a, b, transpose_b, c) from dpt/ops.h. Check the
// shapes first: a shape mistake here is the classic backward bug.
#include "ch01_holes.h"

#include "dpt/check.h"

namespace dpt::ch01 {

LinearGrads linear_backward(const Tensor& x, const Tensor& weight, const Tensor& dy) {
  (void)x, (void)weight, (void)dy;
  throw NotImplemented("ch01 linear_backward — see exercises/01_sgd/linear_backward.cpp");
}

}  // namespace dpt::ch01
