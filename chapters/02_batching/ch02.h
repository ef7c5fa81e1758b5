/// @file ch02.h
/// @brief Chapter 02's holes, each specified once: per-sample gradients and
/// the mini-batch gradient rebuilt from them, and the batch's gradient by
/// accumulation over micro-batches.
///
/// Fill them in `exercises/02_batching/`; tiered hints are in \ref ch02_hints.
/// `ctest --preset student -L ch02` checks them against autograd on batches
/// of one and on the whole batch, and watches the backward passes of
/// accumulation; `ch02_batching` prints ✔/✘ verdicts for
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

/// What per_sample_gradients returns: B gradients, one per sample, and the
/// batch's gradient formed from them.
struct PerSampleGradients {
  std::vector<Gradients> samples;  ///< samples[i]: sample i's gradient; B lists, sample order
  Gradients mean;                  ///< the whole batch's gradient, formed from `samples`
};

/// The per-sample view of a batch, and the batch's gradient rebuilt from it.
///
/// samples[i] is, for sample i of `batch` taken alone (a batch of one), the
/// gradient of its loss softmax_cross_entropy(model(x_i), {y_i}) with respect
/// to every parameter. `mean` is the gradient of the whole batch's loss,
/// softmax_cross_entropy(model(batch.x), batch.y), computed from `samples`
/// alone: one forward and backward per sample, none over the whole batch.
///
/// batch.x is (B, D) with B ≥ 1; the model's grad() fields may hold anything
/// on entry; the model may live on any device. Postconditions, on return:
///  - samples[i][p] depends on sample i alone (not on the samples before it,
///    nor on what the model's gradients held on entry), and still holds that
///    sample's gradient when the function returns;
///  - mean[p] equals, to float rounding, the whole batch's gradient of
///    parameter p, for every B;
///  - every returned tensor is on the model's device and shares storage
///    with no other returned tensor and with nothing the model keeps:
///    writing into one changes no other, and the model's grad() fields are
///    left cleared (undefined).
/// (Hole: exercises/02_batching/per_sample.cpp.)
PerSampleGradients per_sample_gradients(const MLP& model, const Batch& batch);

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
