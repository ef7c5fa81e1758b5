/// @file ch02.h
/// @brief Chapter 02's holes, each specified once: per-sample gradients, and
/// averaging them into the mini-batch gradient.
///
/// Fill them in `exercises/02_batching/`; tiered hints are in \ref ch02_hints.
/// `ctest --preset student -L ch02` checks them against autograd on batches
/// of one and on the whole batch, and against a serial mean; `ch02_batching`
/// prints ✔/✘ verdicts for them. The math is in \ref ch02.
#pragma once

#include <vector>

#include "dpt/data.h"
#include "dpt/nn.h"
#include "dpt/tensor.h"

namespace dpt::ch02 {

/// One gradient per model parameter, in the order and with the shapes of
/// model.parameters().
using Gradients = std::vector<Tensor>;

/// For each of the B samples of `batch` taken alone (a batch of one), the
/// gradient of its loss softmax_cross_entropy(model(x_i), {y_i}) with respect
/// to every parameter: B lists, sample order.
///
/// batch.x is (B, D) with B ≥ 1; the model's grad() fields may hold anything
/// on entry. Postconditions: result[i][p] depends on sample i alone (not on
/// the samples before it, nor on what the model's gradients held on entry);
/// the returned tensors are the caller's own, so nothing done to the model's
/// gradients afterwards changes them; the model's grad() fields are left
/// cleared (undefined). (Hole: exercises/02_batching/per_sample.cpp.)
std::vector<Gradients> per_sample_gradients(const MLP& model, const Batch& batch);

/// The element-wise mean over samples: result[p] = (1/K) Σ_k per_sample[k][p].
///
/// per_sample holds K ≥ 1 lists of identical length and shapes, on any one
/// device; it is only read. The result is new tensors on the same device.
/// (Hole: exercises/02_batching/average.cpp.)
Gradients average_gradients(const std::vector<Gradients>& per_sample);

}  // namespace dpt::ch02
