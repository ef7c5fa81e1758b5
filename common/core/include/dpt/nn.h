/// @file nn.h
/// @brief Layers: `Linear` (PyTorch layout and initialisation), ReLU, and an
/// `MLP` built from a width list such as 784-256-10.
///
///     dpt::Rng rng(42);
///     dpt::MLP model({784, 256, 10}, dpt::Device::cpu(0), rng);
///     dpt::Tensor logits = model.forward(x);            // x (B, 784) → (B, 10)
///     for (auto& p : model.named_parameters()) …        // fc0.weight, fc0.bias, fc1.weight, …
///
/// Parameters are listed in registration order (first layer first). Backward
/// produces their gradients in the *reverse* order — the order chapter 05
/// fills its gradient buckets in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/tensor.h"

namespace dpt {

/// Deterministic random numbers, identical on every platform (std::
/// distributions are not): xoshiro-style 64-bit generator, splitmix64-seeded.
class Rng {
 public:
  /// The same seed gives the same sequence on every machine.
  explicit Rng(uint64_t seed);
  /// Next raw 64 random bits.
  uint64_t next_u64();
  /// Uniform in [0, 1) with 24 random bits (exactly representable in float).
  float uniform();
  /// Uniform in [low, high).
  float uniform(float low, float high) { return low + (high - low) * uniform(); }
  /// Standard normal (Box–Muller).
  float normal();
  /// Uniform integer in [0, n).
  uint64_t below(uint64_t n);

 private:
  uint64_t state_[4];
};

/// y = x · weightᵀ + bias. weight (out, in), bias (out), both initialised
/// U(−1/√in, 1/√in) like PyTorch's nn.Linear.
class Linear {
 public:
  /// A layer from `in_features` to `out_features`, initialised from `rng` on `device`.
  Linear(int64_t in_features, int64_t out_features, Device& device, Rng& rng);
  /// x (B, in) → (B, out).
  Tensor forward(const Tensor& x) const;
  Tensor weight;  ///< (out, in), requires grad
  Tensor bias;    ///< (out), requires grad
};

/// Linear layers with ReLU between them (none after the last).
class MLP {
 public:
  /// widths = {in, hidden…, out}; at least two entries, all positive.
  MLP(const std::vector<int64_t>& widths, Device& device, Rng& rng);
  /// x (B, widths.front()) → logits (B, widths.back()).
  Tensor forward(const Tensor& x) const;
  /// fc0.weight, fc0.bias, fc1.weight, … in registration order.
  std::vector<NamedTensor> named_parameters() const;
  /// The tensors of named_parameters(), same order.
  std::vector<Tensor> parameters() const;
  /// Total number of parameter elements (Ψ in the ZeRO paper).
  int64_t num_parameters() const;
  /// Multiply-adds of one forward pass over a batch, ×2 → FLOPs.
  double forward_flops(int64_t batch) const;
  /// {in, hidden…, out}.
  const std::vector<int64_t>& widths() const { return widths_; }
  /// The Linear layers, first to last.
  const std::vector<Linear>& layers() const { return layers_; }

 private:
  std::vector<int64_t> widths_;
  std::vector<Linear> layers_;
};

/// Parses "784-256-10" into {784, 256, 10}. Throws dpt::Error on a bad spec.
std::vector<int64_t> parse_widths(const std::string& spec);

/// Copies every parameter's values from `src` into `dst` (same architecture).
void copy_parameters(const MLP& src, MLP& dst);

}  // namespace dpt
