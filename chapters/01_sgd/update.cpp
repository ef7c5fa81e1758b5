// update.cpp — section 3 of chapter 01: the update, twice by the code and
// once by hand (update.h).
#include "update.h"

#include <algorithm>
#include <cmath>

#include "dpt/ops.h"

using namespace dpt;

// What two steps with the same gradient g do to a weight p. Momentum's first
// velocity is g itself, its second μg + g; Adam's bias correction makes
// m̂ = g and v̂ = g² on both steps, so each moves by lr·g/(|g| + eps).
double two_steps_by_hand(const Options& o, double p, double g) {
  if (o.optimizer == "sgd") return p - 2 * o.lr * g;
  if (o.optimizer == "momentum") return p - o.lr * g - o.lr * (kMomentum * g + g);
  for (int step = 0; step < 2; ++step) {
    if (o.optimizer == "adamw") p *= 1.0 - o.lr * 0.01;  // decoupled weight decay, lambda = 0.01
    p -= o.lr * g / (std::fabs(g) + 1e-8);
  }
  return p;
}

// Runs two steps of one Update on copies of the parameters carrying the probe
// batch's gradients (the same both times), and compares every element with
// two_steps_by_hand: the second step sees what the first left in the state.
UpdateCheck check_two_updates(const Options& o, const MLP& model, const Batch& batch) {
  std::vector<Tensor> params = model.parameters(), copies;
  for (auto& p : params) p.zero_grad();
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
  for (auto& p : params) {
    Tensor copy = p.clone();
    copy.set_grad(p.grad().clone());
    copies.push_back(copy);
    p.zero_grad();
  }
  Update update(o, copies);
  update.step();
  update.step();
  double error = 0, largest_step = 0, largest_weight = 0;
  for (std::size_t k = 0; k < params.size(); ++k) {
    const float *p = params[k].data(), *g = copies[k].grad().data(), *after = copies[k].data();
    for (int64_t i = 0; i < params[k].numel(); ++i) {
      double expected = two_steps_by_hand(o, p[i], g[i]);
      double difference = std::fabs(after[i] - expected);
      if (!(difference <= error)) error = difference;  // a NaN is the largest difference
      largest_step = std::max(largest_step, std::fabs(expected - p[i]));
      largest_weight = std::max(largest_weight, double(std::fabs(p[i])));
    }
  }
  // float32 stores the new weight to ~6e-8 of its size: 1e-6·|p| is 16x that.
  return {error, 1e-3 * largest_step + 1e-6 * largest_weight};
}

// torch's SGD with momentum μ, worked by hand for two steps with the same
// gradient g at lr₁ then lr₂: v₁ = g, p₁ = p − lr₁·g; v₂ = μg + g,
// p₂ = p₁ − lr₂·v₂. Your sgd_update runs on host copies of the weights.
UpdateCheck check_momentum_by_hand(const MLP& model, const Batch& batch, float lr) {
  std::vector<Tensor> params = model.parameters();
  for (auto& p : params) p.zero_grad();
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
  const float lr2 = lr / 2;
  double error = 0, largest_step = 0, largest_weight = 0;
  for (auto& param : params) {
    Tensor start = param.to(Device::host()), grad = param.grad().to(Device::host());
    Tensor weight = start.clone(), velocity;
    ch01::sgd_update(weight, grad, velocity, lr, kMomentum);
    ch01::sgd_update(weight, grad, velocity, lr2, kMomentum);
    const float *p = start.data(), *g = grad.data(), *after = weight.data();
    for (int64_t i = 0; i < start.numel(); ++i) {
      double expected = double(p[i]) - lr * double(g[i]) - lr2 * (kMomentum * double(g[i]) + g[i]);
      double difference = std::fabs(after[i] - expected);
      if (!(difference <= error)) error = difference;  // a NaN is the largest difference
      largest_step = std::max(largest_step, std::fabs(expected - p[i]));
      largest_weight = std::max(largest_weight, double(std::fabs(p[i])));
    }
    param.zero_grad();
  }
  return {error, 1e-3 * largest_step + 1e-6 * largest_weight};
}
