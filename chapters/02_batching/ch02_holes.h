/// @file ch02_holes.h
/// @brief Chapter 02's exercises: per-sample gradients, and averaging them into
/// the mini-batch gradient. Fill them in `exercises/02_batching/`;
/// `ctest --preset student -L ch02` checks them against autograd on the whole
/// batch and against a serial mean.
#pragma once

#include <vector>

#include "dpt/data.h"
#include "dpt/nn.h"
#include "dpt/tensor.h"

namespace dpt::ch02 {

/// Gradients of one sample's loss: one tensor per model parameter, same order
/// and shapes as model.parameters().
using Gradients = std::vector<Tensor>;

/// For each of the B samples of `batch` alone (a batch of one), the gradient of
/// its loss softmax_cross_entropy(model(x_i), y_i) with respect to every
/// parameter. Leaves the model's grad() fields cleared.
/// (Hole: exercises/02_batching/per_sample.cpp.)
std::vector<Gradients> per_sample_gradients(const MLP& model, const Batch& batch);

/// The element-wise mean over samples: result[p] = (1/K) Σ_k per_sample[k][p].
/// per_sample holds K ≥ 1 gradient lists of identical shapes.
/// (Hole: exercises/02_batching/average.cpp.)
Gradients average_gradients(const std::vector<Gradients>& per_sample);

}  // namespace dpt::ch02
