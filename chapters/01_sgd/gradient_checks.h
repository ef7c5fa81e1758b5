// gradient_checks.h — chapter 01's section 2: how to trust backward(), your
// linear_backward and your softmax_cross_entropy_backward before training on them.
#pragma once

#include "dpt/data.h"
#include "dpt/nn.h"
#include "dpt/report.h"

/// Central differences on the 5 largest-gradient entries of every parameter
/// of `model` at `batch` (the oracle that shares no code with autograd).
/// Returns the worst |numeric − autograd| / (1e-3 + 1e-2·|numeric|): 1 is the
/// limit. Leaves the model's gradients cleared.
double finite_difference_check(const dpt::MLP& model, const dpt::Batch& batch, const dpt::Narrator& say);

/// max |yours − autograd| / max |autograd| for each of linear_backward's
/// three gradients; NaN when one is missing or misshapen.
struct LinearErrors {
  double dx;       ///< of ∂loss/∂x
  double dweight;  ///< of ∂loss/∂weight
  double dbias;    ///< of ∂loss/∂bias
};

/// Your ch01::linear_backward on the model's first layer at `batch`, against
/// autograd through dpt's own `linear` op (which shares no code with yours).
LinearErrors check_linear_backward(const dpt::MLP& model, const dpt::Batch& batch);

/// max |yours − autograd| / max |autograd| of your
/// ch01::softmax_cross_entropy_backward at the model's logits for `batch`,
/// and at those logits moved to about ±1000 (the contract's range), against
/// autograd through dpt's own `softmax_cross_entropy` op; the worse of the
/// two, NaN when yours is missing, misshapen or not finite.
double check_loss_backward(const dpt::MLP& model, const dpt::Batch& batch);
