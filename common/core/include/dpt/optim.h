/// @file optim.h
/// @brief Optimizers: `SGD` (momentum, weight decay) and `Adam`/`AdamW`, with
/// the same update rules as PyTorch's `torch.optim` (LARS, LAMB: optim_layerwise.h).
///
/// An optimizer holds the parameters it updates and its state *as tensors on
/// the parameters' devices*, so the state's bytes show up in the device's
/// accounting — the memory ZeRO stage 1 shards (Adam keeps 2 floats per
/// parameter, momentum 1, plain SGD 0).
///
/// Each `step()` reads every parameter's `grad()` (a parameter without one is
/// skipped, as in PyTorch; one on another device than its parameter is an
/// error) and updates the parameter in place, on the parameter's device: the
/// per-element update is kernel_math.h's, as a CPU loop or one CUDA kernel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dpt/tensor.h"

namespace dpt {

/// Base class: owns the parameter list and the per-parameter update loop.
class Optimizer {
 public:
  /// An optimizer updating `params` (handles: the caller's tensors change).
  explicit Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;
  /// Updates every parameter that has a gradient.
  void step();
  /// Clears every parameter's gradient.
  void zero_grad();
  /// Bytes of optimizer state (momentum / Adam moments) held now.
  std::size_t state_bytes() const;
  /// Every state tensor held now (momentum buffers, Adam's m then v), in a
  /// fixed order: state list by list, parameter by parameter; empty before the
  /// first step. Handles: changing them changes the optimizer's state.
  std::vector<Tensor> state_tensors() const;
  /// Learning rate, changeable between steps.
  float lr = 0.01f;
  /// The parameters this optimizer updates.
  const std::vector<Tensor>& params() const { return params_; }
  /// "sgd", "momentum", "adam", "adamw", "lars", "lamb".
  virtual std::string name() const = 0;

 protected:
  /// Updates parameter `index` (`param`) given its gradient `grad`.
  virtual void update(std::size_t index, Tensor& param, const Tensor& grad) = 0;
  /// Creates (on first use) a zero state tensor shaped like parameter `index`.
  Tensor& state(std::vector<Tensor>& slots, std::size_t index);
  std::vector<Tensor> params_;                     ///< what step() updates
  std::vector<std::vector<Tensor>*> state_lists_;  ///< every state list, for state_bytes()
  /// Number of completed step() calls.
  int64_t steps_ = 0;
};

/// p ← p − lr · v, v ← μ v + (g + λ p) (v = g + λ p on the first step, as PyTorch).
/// With μ = 0 this is plain SGD and keeps no state.
class SGD : public Optimizer {
 public:
  /// SGD on `params` with learning rate `lr`, momentum μ and weight decay λ.
  SGD(std::vector<Tensor> params, float lr, float momentum = 0.0f, float weight_decay = 0.0f);
  std::string name() const override { return momentum_ > 0 ? "momentum" : "sgd"; }

 protected:
  void update(std::size_t index, Tensor& param, const Tensor& grad) override;

 private:
  float momentum_, weight_decay_;
  std::vector<Tensor> velocity_;
};

/// Adam (Kingma & Ba) with bias correction. `decoupled` = AdamW: weight decay
/// multiplies p by (1 − lr·λ) instead of adding λ p to the gradient.
class Adam : public Optimizer {
 public:
  /// Adam (or AdamW when `decoupled`) on `params`; defaults are PyTorch's.
  Adam(std::vector<Tensor> params, float lr, float beta1 = 0.9f, float beta2 = 0.999f,
       float eps = 1e-8f, float weight_decay = 0.0f, bool decoupled = false);
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }

 protected:
  void update(std::size_t index, Tensor& param, const Tensor& grad) override;

 private:
  float beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;
  std::vector<Tensor> m_, v_;
};

/// "sgd", "momentum" (μ = 0.9), "adam", "adamw" (λ = 0.01), "lars", "lamb" → an optimizer.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Tensor> params, float lr);

}  // namespace dpt
