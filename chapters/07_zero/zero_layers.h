/// @file zero_layers.h
/// @brief Chapter 07's layers (provided, not a hole): the MLP's forward and
/// backward as one autograd op per layer, `zero_linear`, that computes inside
/// the stage's use of the layer's parameters (use_layer, ch07.h), in forward
/// and again in backward, and whose backward writes dW
/// and db straight into the gradient destination the trainer names — the
/// flat gradient buffer, or a bucket — so no per-parameter gradient tensor
/// ever exists. With --prefetch at stage 3 it also gathers the next layer on
/// the progress thread while this one computes.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ch07.h"
#include "dpt/launch.h"

namespace dpt::ch07 {

/// The MLP's layers over one rank's ZeroState.
class ZeroLayers {
 public:
  /// Where layer l's gradient (weight then bias, range.size() floats) goes.
  using GradDestination = std::function<Tensor(int l)>;
  /// Called once layer l's gradient is complete.
  using GradReady = std::function<void(int l)>;

  /// `widths`: the MLP's; `prefetch`: gather ahead at stage 3.
  ZeroLayers(Context& ctx, ZeroState& state, const std::vector<int64_t>& widths, bool prefetch,
             GradDestination destination, GradReady ready);
  /// Waits for any gather still in flight (it writes into the state).
  ~ZeroLayers();
  ZeroLayers(const ZeroLayers&) = delete;
  ZeroLayers& operator=(const ZeroLayers&) = delete;

  /// The logits of batch x (B, widths[0]): linear, relu, …, linear; each
  /// layer recorded for backward.
  Tensor forward(const Tensor& x);
  /// After backward: no gather runs any more, every block may go back.
  void finish_step();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dpt::ch07
