// optim.cpp — SGD and Adam update rules (PyTorch semantics).
#include "dpt/optim.h"

#include <cmath>

#include "dpt/check.h"

namespace dpt {

// ----------------------------------------------------------------------------
// Optimizer

void Optimizer::step() {
  ++steps_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor grad = params_[i].grad();
    if (!grad.defined()) continue;
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
  float* p = param.data();
  const float* g = grad.data();
  int64_t n = param.numel();
  if (momentum_ == 0.0f) {
    for (int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + weight_decay_ * p[i]);
    return;
  }
  bool first = index >= velocity_.size() || !velocity_[index].defined();
  float* v = state(velocity_, index).data();
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i] + weight_decay_ * p[i];
    v[i] = first ? d : momentum_ * v[i] + d;
    p[i] -= lr * v[i];
  }
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
  float* p = param.data();
  const float* g = grad.data();
  float* m = state(m_, index).data();
  float* v = state(v_, index).data();
  // steps_ was incremented before this step's updates: t = 1 on the first step.
  float correction1 = 1.0f - std::pow(beta1_, float(steps_));
  float correction2 = 1.0f - std::pow(beta2_, float(steps_));
  for (int64_t i = 0, n = param.numel(); i < n; ++i) {
    float d = g[i];
    if (decoupled_) p[i] *= 1.0f - lr * weight_decay_;
    else d += weight_decay_ * p[i];
    m[i] = beta1_ * m[i] + (1.0f - beta1_) * d;
    v[i] = beta2_ * v[i] + (1.0f - beta2_) * d * d;
    float m_hat = m[i] / correction1;
    float v_hat = v[i] / correction2;
    p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps_);
  }
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Tensor> params, float lr) {
  if (name == "sgd") return std::make_unique<SGD>(std::move(params), lr);
  if (name == "momentum") return std::make_unique<SGD>(std::move(params), lr, 0.9f);
  if (name == "adam") return std::make_unique<Adam>(std::move(params), lr);
  if (name == "adamw") return std::make_unique<Adam>(std::move(params), lr, 0.9f, 0.999f, 1e-8f, 0.01f, true);
  DPT_FAIL("unknown optimizer '" << name << "': expected sgd, momentum, adam or adamw");
}

}  // namespace dpt
