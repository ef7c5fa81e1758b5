/// @file ch01_holes.h
/// @brief Chapter 01's exercises: the SGD update and the backward pass of a
/// Linear layer. Fill them in `exercises/01_sgd/`; `ctest --preset student -L ch01`
/// checks them against finite differences and plain arithmetic.
#pragma once

#include "dpt/tensor.h"

namespace dpt::ch01 {

/// One plain SGD step on one parameter, in place: param ← param − lr · grad.
/// param and grad have the same shape. (Hole: exercises/01_sgd/sgd.cpp.)
void sgd_update(Tensor& param, const Tensor& grad, float lr);

/// Gradients of a Linear layer y = x · weightᵀ + bias.
struct LinearGrads {
  Tensor dx;       ///< (B, in)   d loss / d x
  Tensor dweight;  ///< (out, in) d loss / d weight
  Tensor dbias;    ///< (out)     d loss / d bias
};

/// Backward of y = x · weightᵀ + bias given dy = d loss / d y.
/// x (B, in), weight (out, in), dy (B, out). Write it with plain loops or
/// dpt::gemm; do not call autograd. (Hole: exercises/01_sgd/linear_backward.cpp.)
LinearGrads linear_backward(const Tensor& x, const Tensor& weight, const Tensor& dy);

}  // namespace dpt::ch01
