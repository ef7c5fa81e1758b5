/// @file ch01.h
/// @brief Chapter 01's holes, each specified once: the SGD update and the
/// backward pass of a Linear layer.
///
/// Fill them in `exercises/01_sgd/` (hints sit next to each stub);
/// `ctest --preset student -L ch01` checks them against hand arithmetic and
/// finite differences, and `ch01_sgd` prints ✔/✘ verdicts for them. The math
/// is derived in \ref ch01.
#pragma once

#include "dpt/tensor.h"

namespace dpt::ch01 {

/// One plain SGD step on one parameter, in place: param[i] ← param[i] − lr · grad[i]
/// for every element i.
///
/// param and grad have the same shape; grad is only read. The update writes
/// into param's storage, so every handle aliasing param sees it.
/// (Hole: exercises/01_sgd/sgd.cpp.)
void sgd_update(Tensor& param, const Tensor& grad, float lr);

/// The three gradients of a Linear layer y = x · weightᵀ + bias.
struct LinearGrads {
  Tensor dx;       ///< (B, in)   d loss / d x      = dy · weight
  Tensor dweight;  ///< (out, in) d loss / d weight = dyᵀ · x
  Tensor dbias;    ///< (out)     d loss / d bias   = Σ over the B rows of dy
};

/// Backward of y = x · weightᵀ + bias, given dy = d loss / d y.
///
/// x (B, in), weight (out, in), dy (B, out); returns new tensors on x's device
/// with the shapes of LinearGrads. The bias itself is not needed (y is affine
/// in it). Inputs are only read; autograd is not used.
/// (Hole: exercises/01_sgd/linear_backward.cpp.)
LinearGrads linear_backward(const Tensor& x, const Tensor& weight, const Tensor& dy);

}  // namespace dpt::ch01
