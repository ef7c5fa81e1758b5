/// @file ch01.h
/// @brief Chapter 01's holes, each specified once: the SGD-with-momentum
/// update, the backward pass of a Linear layer, and the backward pass of the
/// loss.
///
/// Fill them in `exercises/01_sgd/`; tiered hints are in \ref ch01_hints.
/// `ctest --preset student -L ch01` checks them against a serial oracle over
/// several steps and against finite differences, and `ch01_sgd` prints ✔/✘
/// verdicts for them.
#pragma once

#include <vector>

#include "dpt/tensor.h"

namespace dpt::ch01 {

/// One step of SGD with momentum μ on one parameter, in place, with the
/// semantics of PyTorch's `torch.optim.SGD(params, lr, momentum=μ)`
/// (dampening 0, no Nesterov, no weight decay).
///
/// Contract:
///  - `velocity` is this parameter's optimizer state between steps. The
///    caller passes an undefined tensor (`Tensor()`) before the first step
///    and then hands back, untouched, whatever the previous call left in it;
///    what it holds and when it is created is yours to decide.
///  - After k calls with gradients g₁ … g_k and learning rates lr₁ … lr_k,
///    param equals what torch's SGD gives after the same k steps, the first
///    step included (to float32 rounding). The learning rate may change
///    between calls (a schedule); μ does not.
///  - μ = 0 is plain SGD: the parameter moves against its gradient by lr.
///  - param and grad have the same shape; grad is only read. The update
///    writes into param's storage, so every handle aliasing param sees it.
/// (Hole: exercises/01_sgd/sgd.cpp.)
void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, float lr, float momentum);

/// The three gradients of a Linear layer y = x · weightᵀ + bias.
struct LinearGrads {
  Tensor dx;       ///< (B, in):   ∂ loss / ∂ x
  Tensor dweight;  ///< (out, in): ∂ loss / ∂ weight
  Tensor dbias;    ///< (out):     ∂ loss / ∂ bias
};

/// Backward of y = x · weightᵀ + bias, given dy = ∂ loss / ∂ y for a scalar
/// loss that depends on x, weight and bias only through y.
///
/// x (B, in), weight (out, in), dy (B, out). Returns new tensors on x's
/// device with the shapes of LinearGrads: each the exact gradient of the loss
/// with respect to that input, for every batch size B ≥ 1 (the tests compare
/// them with finite differences). The bias itself is not needed. Inputs are
/// only read; autograd is not used.
/// (Hole: exercises/01_sgd/linear_backward.cpp.)
LinearGrads linear_backward(const Tensor& x, const Tensor& weight, const Tensor& dy);

/// Backward of the training loss: dlogits = ∂ loss / ∂ logits for
///
///     loss = (1/B) Σ_b −log softmax(logits_b)[labels[b]],
///     softmax(z)[c] = exp(z_c) / Σ_k exp(z_k),
///
/// the mean over the batch of each sample's cross-entropy, softmax taken
/// over that sample's own C logits (what dpt::softmax_cross_entropy computes).
///
/// logits (B, C) with B ≥ 1 and C ≥ 1, in host memory; labels holds B class
/// indices in [0, C) (anything else is a dpt::Error). Returns a new (B, C)
/// tensor on logits' device: the exact gradient, to float rounding, for
/// every finite logits — logits of ±1000 included, where exp() of a logit
/// overflows a float. Inputs are only read; autograd is not used.
/// (Hole: exercises/01_sgd/loss_backward.cpp.)
Tensor softmax_cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& labels);

}  // namespace dpt::ch01
