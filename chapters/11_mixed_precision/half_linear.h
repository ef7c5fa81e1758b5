/// @file half_linear.h
/// @brief A Linear layer whose GEMMs multiply 16-bit values and sum in fp32 —
/// what tensor cores do, and what chapter 11's forward calls for every layer.
///
///     y  = x · Wᵀ + b     x (B, in), W (out, in), b (out) → y (B, out), fp32
///     dx = dy · W         (B, in)     dW = dyᵀ · x   (out, in)
///     db = Σ_rows dy      (out)
///
/// On a GPU (a 16-bit precision, tensors on cuda): x, W and dy are converted
/// to 16-bit copies and multiplied by cuBLAS on tensor cores (kernels.h's
/// gemm_half: fp32 sums and fp32 outputs); the bias is added in fp32. In chapter 11 the
/// conversion is exact: x and W are 16-bit values already (stored activations,
/// rounded weights) and dy is the gradient of a stored output (store() rounds
/// it). A value that is not representable — a gradient fed in from outside —
/// is rounded to the format, as a 16-bit run would store it.
///
/// On the CPU, and in fp32: the Linear's own op (ops.h's linear), fp32 GEMMs
/// of the same values. Products of two 16-bit values are exact in fp32, so
/// both sides compute the same sums, in another order.
///
/// The 16-bit copies are scratch for one GEMM, not tensors: the memory ledger
/// does not count them, and the graph keeps what ops.h's linear keeps (x, W, b).
#pragma once

#include "dpt/nn.h"
#include "dpt/tensor.h"
#include "precision.h"

namespace dpt::ch11 {

/// layer(x) = x · Wᵀ + b, differentiable, with 16-bit GEMMs on a GPU when
/// `p` is bf16 or fp16 (see the file comment); layer.forward(x) otherwise.
Tensor half_linear(const Linear& layer, const Tensor& x, Precision p);

}  // namespace dpt::ch11
