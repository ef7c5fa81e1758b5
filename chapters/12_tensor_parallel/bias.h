/// @file bias.h
/// @brief `add_bias(y, bias)`: y (B, out) + bias (out,) on every row, as an
/// op of its own — the bias path of linear(), callable apart from it.
#pragma once

#include "dpt/tensor.h"

namespace dpt::ch12 {

/// y (B, out), bias (out,) on y's device → y + bias on every row, (B, out).
/// Differentiable in both: d/dy is the identity, d/dbias the sum over rows.
Tensor add_bias(const Tensor& y, const Tensor& bias);

}  // namespace dpt::ch12
