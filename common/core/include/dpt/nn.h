/// @file nn.h
/// @brief Layers: `Linear` (PyTorch layout and initialisation), ReLU,
/// `BatchNorm1d`, and an `MLP` built from a width list such as 784-256-10,
/// optionally with a BatchNorm after each hidden Linear (before its ReLU).
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
#include "dpt/ops.h"
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

/// Batch normalization over C features (ops.h's batch_norm): weight (C) = 1,
/// bias (C) = 0, running mean 0 and variance 1 to start, as PyTorch's.
class BatchNorm1d {
 public:
  /// A layer for `features` columns on `device` (draws no random numbers).
  BatchNorm1d(int64_t features, Device& device);
  /// Training mode: x (B, C) normalized by the batch's statistics (`across`'s,
  /// or x's rows when null); updates the running statistics.
  Tensor forward(const Tensor& x, BatchStatistics* across = nullptr) const;
  /// Evaluation mode: x (B, C) normalized by the running statistics.
  Tensor infer(const Tensor& x) const;
  Tensor weight;             ///< (C), requires grad
  Tensor bias;               ///< (C), requires grad
  BatchNormRunning running;  ///< (C) each; handles, so forward updates them through a const layer
};

/// Linear layers with ReLU between them (none after the last); with
/// `batch_norm`, a BatchNorm1d after every Linear but the last, before its ReLU.
class MLP {
 public:
  /// widths = {in, hidden…, out}; at least two entries, all positive. The
  /// Linear layers' initial weights do not depend on `batch_norm`.
  MLP(const std::vector<int64_t>& widths, Device& device, Rng& rng, bool batch_norm = false);
  /// Training mode: x (B, widths.front()) → logits (B, widths.back()); batch
  /// norm (if any) takes the batch's statistics and updates its running ones.
  Tensor forward(const Tensor& x) const;
  /// Evaluation mode: as forward, with batch norm by its running statistics
  /// (without batch norm, the same as forward).
  Tensor infer(const Tensor& x) const;
  /// fc0.weight, fc0.bias, [bn0.weight, bn0.bias,] fc1.weight, … in
  /// registration order.
  std::vector<NamedTensor> named_parameters() const;
  /// What a weights file holds: named_parameters(), then every batch norm's
  /// bn<l>.running_mean and bn<l>.running_var (nothing more without batch norm).
  std::vector<NamedTensor> named_state() const;
  /// Makes batch norm take its statistics through `across` (chapter 03's
  /// SyncBatchNorm; it must outlive every forward and backward), or from each
  /// batch's own rows when null (the default).
  void set_batch_statistics(BatchStatistics* across) { across_ = across; }
  /// The BatchNorm1d layers, one per hidden Linear (empty without batch norm).
  const std::vector<BatchNorm1d>& norms() const { return norms_; }
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
  std::vector<BatchNorm1d> norms_;
  BatchStatistics* across_ = nullptr;
};

/// Parses "784-256-10" into {784, 256, 10}. Throws dpt::Error on a bad spec.
std::vector<int64_t> parse_widths(const std::string& spec);

/// Copies every parameter's values, and batch norm's running statistics, from
/// `src` into `dst` (same architecture).
void copy_parameters(const MLP& src, MLP& dst);

}  // namespace dpt
