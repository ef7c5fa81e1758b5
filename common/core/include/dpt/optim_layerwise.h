/// @file optim_layerwise.h
/// @brief The layer-wise optimizers of large-batch training, `LARS` and
/// `LAMB`: each parameter tensor's step is scaled by a trust ratio computed
/// from norms over that tensor alone, so a layer moves by a set fraction of
/// its own norm whatever its gradient's scale. torch.optim has neither; the
/// conventions (exclusions, zero norms, defaults) are timm's and Apex's, and
/// each is stated below. Theory and formulas: docs/flags.md, "Layer-wise
/// optimizers".
///
/// A layer's squared norms are summed into 2 floats on its device
/// (kernels.h's sum_squares) and read there by the step kernel, so a step on a
/// GPU never waits for the host. Left out: clipping of the ratio (Apex's
/// LARC) and of the global gradient norm (Apex's FusedLAMB, timm's Lamb).
#pragma once

#include <vector>

#include "dpt/optim.h"

namespace dpt {

/// Whether a layer-wise optimizer gives `param` its own trust ratio and weight
/// decay: parameters of 2 or more dimensions do; 1-D ones (biases, a norm
/// layer's scale and shift) do not, as timm's weight-decay groups decide it.
bool is_layer_adapted(const Tensor& param);

/// LARS (You, Gitman & Ginsburg 2017): momentum SGD whose step on each layer
/// is scaled by the trust ratio ρ = η‖w‖ / (‖g‖ + λ‖w‖ + ε) (ρ = 1 where ‖w‖
/// or ‖g‖ is 0): d = ρ (g + λ w), v ← d on the first step, else μ v + d,
/// w ← w − lr · v. So a layer moves by about lr·η of its own norm per step,
/// whatever its gradient's scale; lr is the global rate (the paper's γ, of
/// order 1 and more with η = 0.001). 1-D parameters (is_layer_adapted) take
/// plain momentum SGD: ρ = 1, λ = 0. State: the velocity, 1 float per element.
class LARS : public Optimizer {
 public:
  /// LARS on `params`. Defaults (make_optimizer's "lars"): μ = 0.9 and η = 0.001
  /// (the paper's), ε = 1e-8 (timm's Lars, Apex's LARC), λ = 0 (torch.optim's).
  LARS(std::vector<Tensor> params, float lr, float momentum = 0.9f, float weight_decay = 0.0f,
       float trust_coefficient = 1e-3f, float eps = 1e-8f);
  std::string name() const override { return "lars"; }

 protected:
  void update(std::size_t index, Tensor& param, const Tensor& grad) override;

 private:
  float momentum_, weight_decay_, trust_coefficient_, eps_;
  std::vector<Tensor> velocity_;
};

/// LAMB (You et al. 2019, Algorithm 2): Adam's bias-corrected direction with
/// the decay inside it, u = m̂ / (√v̂ + ε) + λ w, scaled per layer by
/// ρ = ‖w‖ / ‖u‖ (ρ = 1 where either is 0): w ← w − lr · ρ · u. 1-D parameters
/// (is_layer_adapted) take plain Adam: ρ = 1, λ = 0. No gradient clipping
/// (Apex and timm clip the global norm to 1 first; torch's clip_grad_norm_
/// does that apart). State: m and v, 2 floats per element; each step also
/// holds one layer-sized scratch tensor (u) while it runs.
class LAMB : public Optimizer {
 public:
  /// LAMB on `params`. Defaults (make_optimizer's "lamb"): betas (0.9, 0.999),
  /// ε = 1e-6 and λ = 0.01, as Apex's FusedLAMB and timm's Lamb.
  LAMB(std::vector<Tensor> params, float lr, float beta1 = 0.9f, float beta2 = 0.999f, float eps = 1e-6f,
       float weight_decay = 0.01f);
  std::string name() const override { return "lamb"; }

 protected:
  void update(std::size_t index, Tensor& param, const Tensor& grad) override;

 private:
  float beta1_, beta2_, eps_, weight_decay_;
  std::vector<Tensor> m_, v_;
};

}  // namespace dpt
