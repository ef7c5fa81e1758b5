// optim.cpp — SGD and Adam update rules (PyTorch semantics), and every
// optimizer by name. The per-element arithmetic is kernel_math.h's, run on the
// parameters' device (kernels.h).
#include "dpt/optim.h"

#include <cmath>

#include "dpt/check.h"
#include "dpt/device.h"
#include "dpt/kernels.h"
#include "dpt/optim_layerwise.h"

namespace dpt {

// ----------------------------------------------------------------------------
// Optimizer

void Optimizer::step() {
  ++steps_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor grad = params_[i].grad();
    if (!grad.defined()) continue;
    DPT_CHECK(&grad.device() == &params_[i].device(),
              name() << ": parameter " << i << " is on " << params_[i].device().name() << " but its gradient on "
                     << grad.device().name());
    update(i, params_[i], grad);
  }
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.zero_grad();
}

std::size_t Optimizer::state_bytes() const {
  std::size_t bytes = 0;
  for (auto* list : state_lists_)
    for (auto& t : *list)
      if (t.defined()) bytes += t.nbytes();
  return bytes;
}

std::vector<Tensor> Optimizer::state_tensors() const {
  std::vector<Tensor> all;
  for (auto* list : state_lists_)
    for (auto& t : *list)
      if (t.defined()) all.push_back(t);
  return all;
}

Tensor& Optimizer::state(std::vector<Tensor>& slots, std::size_t index) {
  if (slots.size() < params_.size()) slots.resize(params_.size());
  if (!slots[index].defined()) slots[index] = Tensor::zeros(params_[index].shape(), params_[index].device());
  return slots[index];
}

// ----------------------------------------------------------------------------
// SGD

SGD::SGD(std::vector<Tensor> params, float learning_rate, float momentum, float weight_decay)
    : Optimizer(std::move(params)), momentum_(momentum), weight_decay_(weight_decay) {
  DPT_CHECK(learning_rate > 0, "SGD: learning rate must be > 0, got " << learning_rate);
  DPT_CHECK(momentum >= 0 && momentum < 1, "SGD: momentum must be in [0, 1), got " << momentum);
  lr = learning_rate;
  state_lists_ = {&velocity_};
}

void SGD::update(std::size_t index, Tensor& param, const Tensor& grad) {
  Kernels& kernels = kernels_for(param.device());
  if (momentum_ == 0.0f) {
    kernels.sgd_step(param.data(), grad.data(), lr, weight_decay_, param.numel());
    return;
  }
  bool first = index >= velocity_.size() || !velocity_[index].defined();
  float* v = state(velocity_, index).data();
  kernels.momentum_step(param.data(), v, grad.data(), lr, momentum_, weight_decay_, first, param.numel());
}

// ----------------------------------------------------------------------------
// Adam / AdamW

Adam::Adam(std::vector<Tensor> params, float learning_rate, float beta1, float beta2, float eps,
           float weight_decay, bool decoupled)
    : Optimizer(std::move(params)),
      beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay), decoupled_(decoupled) {
  DPT_CHECK(learning_rate > 0, "Adam: learning rate must be > 0, got " << learning_rate);
  DPT_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1,
            "Adam: betas must be in [0, 1), got " << beta1 << ", " << beta2);
  lr = learning_rate;
  state_lists_ = {&m_, &v_};
}

void Adam::update(std::size_t index, Tensor& param, const Tensor& grad) {
  float* m = state(m_, index).data();
  float* v = state(v_, index).data();
  // steps_ was incremented before this step's updates: t = 1 on the first step.
  AdamStep step = AdamStep{lr, beta1_, beta2_, eps_, weight_decay_, decoupled_}.at_step(steps_);
  kernels_for(param.device()).adam_step(param.data(), m, v, grad.data(), step, param.numel());
}

// ----------------------------------------------------------------------------
// by name

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Tensor> params, float lr) {
  if (name == "sgd") return std::make_unique<SGD>(std::move(params), lr);
  if (name == "momentum") return std::make_unique<SGD>(std::move(params), lr, 0.9f);
  if (name == "adam") return std::make_unique<Adam>(std::move(params), lr);
  if (name == "adamw") return std::make_unique<Adam>(std::move(params), lr, 0.9f, 0.999f, 1e-8f, 0.01f, true);
  if (name == "lars") return std::make_unique<LARS>(std::move(params), lr);
  if (name == "lamb") return std::make_unique<LAMB>(std::move(params), lr);
  DPT_FAIL("unknown optimizer '" << name << "': expected sgd, momentum, adam, adamw, lars or lamb");
}

}  // namespace dpt
