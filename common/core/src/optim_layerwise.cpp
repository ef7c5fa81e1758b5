// optim_layerwise.cpp — LARS and LAMB (optim_layerwise.h). A layer's squared
// norms go to 2 floats on its device (no copy to the host); the step kernels
// (kernel_math.h's lars_*, lamb_*) read them there.
#include "dpt/optim_layerwise.h"

#include "dpt/check.h"
#include "dpt/device.h"
#include "dpt/kernels.h"

namespace dpt {

bool is_layer_adapted(const Tensor& param) { return param.dim() >= 2; }

LARS::LARS(std::vector<Tensor> params, float learning_rate, float momentum, float weight_decay,
           float trust_coefficient, float eps)
    : Optimizer(std::move(params)),
      momentum_(momentum), weight_decay_(weight_decay), trust_coefficient_(trust_coefficient), eps_(eps) {
  DPT_CHECK(learning_rate > 0, "LARS: learning rate must be > 0, got " << learning_rate);
  DPT_CHECK(momentum >= 0 && momentum < 1, "LARS: momentum must be in [0, 1), got " << momentum);
  DPT_CHECK(weight_decay >= 0, "LARS: weight decay must be >= 0, got " << weight_decay);
  DPT_CHECK(trust_coefficient > 0, "LARS: trust coefficient must be > 0, got " << trust_coefficient);
  DPT_CHECK(eps >= 0, "LARS: eps must be >= 0, got " << eps);
  lr = learning_rate;
  state_lists_ = {&velocity_};
}

void LARS::update(std::size_t index, Tensor& param, const Tensor& grad) {
  Kernels& kernels = kernels_for(param.device());
  bool first = index >= velocity_.size() || !velocity_[index].defined();
  float* v = state(velocity_, index).data();
  const int64_t n = param.numel();
  if (!is_layer_adapted(param)) {  // a bias or a norm's scale: plain momentum, no decay
    kernels.momentum_step(param.data(), v, grad.data(), lr, momentum_, 0.0f, first, n);
    return;
  }
  Tensor squares = Tensor::empty({2}, param.device());  // Σ w², Σ g²
  kernels.sum_squares(squares.data(), param.data(), n);
  kernels.sum_squares(squares.data() + 1, grad.data(), n);
  kernels.lars_step(param.data(), v, grad.data(), squares.data(),
                    LarsStep{lr, momentum_, weight_decay_, trust_coefficient_, eps_}, first, n);
}

LAMB::LAMB(std::vector<Tensor> params, float learning_rate, float beta1, float beta2, float eps, float weight_decay)
    : Optimizer(std::move(params)), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {
  DPT_CHECK(learning_rate > 0, "LAMB: learning rate must be > 0, got " << learning_rate);
  DPT_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1,
            "LAMB: betas must be in [0, 1), got " << beta1 << ", " << beta2);
  DPT_CHECK(eps > 0, "LAMB: eps must be > 0, got " << eps);
  DPT_CHECK(weight_decay >= 0, "LAMB: weight decay must be >= 0, got " << weight_decay);
  lr = learning_rate;
  state_lists_ = {&m_, &v_};
}

void LAMB::update(std::size_t index, Tensor& param, const Tensor& grad) {
  Kernels& kernels = kernels_for(param.device());
  float* m = state(m_, index).data();
  float* v = state(v_, index).data();
  const int64_t n = param.numel();
  // steps_ was incremented before this step's updates: t = 1 on the first step.
  AdamStep step = AdamStep{lr, beta1_, beta2_, eps_, 0.0f, false}.at_step(steps_);
  if (!is_layer_adapted(param)) {  // a bias or a norm's scale: plain Adam, no decay
    kernels.adam_step(param.data(), m, v, grad.data(), step, n);
    return;
  }
  step.weight_decay = weight_decay_;
  Tensor u = Tensor::empty(param.shape(), param.device());  // the direction, before the layer's ratio
  kernels.lamb_direction(u.data(), m, v, param.data(), grad.data(), step, n);
  Tensor squares = Tensor::empty({2}, param.device());  // Σ w², Σ u²
  kernels.sum_squares(squares.data(), param.data(), n);
  kernels.sum_squares(squares.data() + 1, u.data(), n);
  kernels.lamb_apply(param.data(), u.data(), squares.data(), lr, n);
}

}  // namespace dpt
