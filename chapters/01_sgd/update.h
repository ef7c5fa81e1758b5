// update.h — chapter 01's update: the step the training loop runs (your
// sgd_update for sgd and momentum), and section 3's checks of it by hand.
#pragma once

#include <memory>
#include <vector>

#include "ch01.h"
#include "dpt/data.h"
#include "dpt/nn.h"
#include "dpt/optim.h"
#include "dpt/options.h"

/// μ of --optimizer momentum, as dpt's make_optimizer.
inline constexpr float kMomentum = 0.9f;

/// The update the training loop runs: your sgd_update for sgd (μ = 0) and
/// momentum (μ = kMomentum), dpt's Adam (torch.optim's rules) for the others.
/// It keeps one velocity per parameter for your code.
class Update {
 public:
  /// An update of `params` (their grad() fields) with the flags' optimizer and lr.
  Update(const dpt::Options& o, std::vector<dpt::Tensor> params)
      : params_(std::move(params)), velocity_(params_.size()), lr_(o.lr),
        momentum_(o.optimizer == "momentum" ? kMomentum : 0.0f) {
    if (o.optimizer != "sgd" && o.optimizer != "momentum") optimizer_ = dpt::make_optimizer(o.optimizer, params_, o.lr);
  }
  /// One step of every parameter from its grad().
  void step() {
    if (optimizer_) return optimizer_->step();
    for (std::size_t k = 0; k < params_.size(); ++k) {
      dpt::Tensor& p = params_[k];
      if (p.device().is_host_memory()) {
        dpt::ch01::sgd_update(p, p.grad(), velocity_[k], lr_, momentum_);
        continue;
      }
      // Your sgd_update loops in host memory: on a GPU it runs on host copies
      // of the weight and its gradient (two copies per tensor per step, the
      // price of keeping your code in the loop; --optimizer adam steps with
      // dpt's CUDA kernels instead). The velocity stays in host memory.
      dpt::Tensor weight = p.to(dpt::Device::host()), grad = p.grad().to(dpt::Device::host());
      dpt::ch01::sgd_update(weight, grad, velocity_[k], lr_, momentum_);
      p.copy_from(weight);
    }
  }

 private:
  std::vector<dpt::Tensor> params_, velocity_;
  float lr_, momentum_;
  std::unique_ptr<dpt::Optimizer> optimizer_;
};

/// Section 3: max |p_after − p_expected| over every weight after two steps
/// with the same gradient, and its bound.
struct UpdateCheck {
  double error;      ///< the largest |difference| from the formula
  double tolerance;  ///< 1e-3 of the largest step plus float32 rounding of the weights
};

/// Two steps of one Update on copies of `model`'s parameters carrying the
/// gradients at `batch` (the same both times), against the formula by hand.
UpdateCheck check_two_updates(const dpt::Options& o, const dpt::MLP& model, const dpt::Batch& batch);

/// Section 3's momentum check, run whatever --optimizer trains with (plain
/// SGD, the default, never exercises the velocity): two calls of your
/// sgd_update with μ = kMomentum on copies of the parameters, the same
/// gradient, lr then lr/2 (a schedule), against the rule by hand.
UpdateCheck check_momentum_by_hand(const dpt::MLP& model, const dpt::Batch& batch, float lr);
