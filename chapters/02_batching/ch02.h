/// @file ch02.h
/// @brief Chapter 02's holes, each specified once: per-sample gradients,
/// averaging them into the mini-batch gradient, and the batch's gradient by
/// accumulation over micro-batches.
///
/// Fill them in `exercises/02_batching/`; tiered hints are in \ref ch02_hints.
/// `ctest --preset student -L ch02` checks them against autograd on batches
/// of one and on the whole batch, and against a serial mean, and watches the
/// backward passes of accumulation; `ch02_batching` prints ✔/✘ verdicts for
/// them. The math is in \ref ch02.
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

/// The element-wise mean over samples: result[p] = (1/N) Σ_i per_sample[i][p].
///
/// per_sample holds N ≥ 1 lists of identical length and shapes, on any one
/// device; it is only read. The result is new tensors on the same device.
/// (Hole: exercises/02_batching/average.cpp.)
Gradients average_gradients(const std::vector<Gradients>& per_sample);

/// Gradient accumulation: the gradient of the whole batch's mean loss,
/// softmax_cross_entropy(model(batch.x), batch.y), from `micro_batches` = K
/// forward and backward passes over pieces of the batch — consecutive
/// samples, none larger than ⌈B/K⌉ (how to cut them is yours) — so that no
/// pass holds more than one piece's activations.
///
/// batch.x is (B, D); 1 ≤ K ≤ B (anything else is a dpt::Error), and K need
/// not divide B. The model's grad() fields may hold anything on entry.
/// Postconditions: one tensor per parameter, in model.parameters() order and
/// shapes, equal (to float rounding) to the gradient of the whole batch's
/// mean loss for every B and K; the returned tensors are the caller's own;
/// the model's grad() fields hold that same gradient on return (what an
/// optimizer step after accumulation reads). Peak memory is that of one
/// piece's forward and backward, not the whole batch's.
/// (Hole: exercises/02_batching/accumulate.cpp.)
Gradients accumulated_gradient(const MLP& model, const Batch& batch, int micro_batches);

}  // namespace dpt::ch02
