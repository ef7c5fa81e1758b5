/// @file tp_model.h
/// @brief An MLP of layer pairs split over a TP group: in each pair the first
/// layer is column-parallel (each rank owns a block of its outputs), the
/// second row-parallel (the matching block of its inputs) — Megatron's MLP.
///
///     widths 784-256-64-256-10: pair 0 = 784→256 (split 256) → 64,
///                               pair 1 =  64→256 (split 256) → 10
///     x (B,784) ─ col ─ (B,256/T) ─ relu ─ row ─ (B,64) ─ relu ─ col ─ (B,256/T) ─ relu ─ row ─ (B,10)
///
/// Between pairs the activations are whole on every rank (replicated); only
/// the hidden activation inside a pair is split. The parameters are listed as
/// MLP::parameters() lists the full model's (fc0.weight, fc0.bias, …), each
/// as this rank's slice (a row-parallel bias whole).
///
/// Left out: attention (Megatron splits heads the same way), sequence parallelism.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/model_pieces.h"
#include "dpt/nn.h"

namespace dpt::ch12 {

/// "" when `widths` can be split over `tp` ranks (an even number of layers,
/// every pair's hidden width divisible by tp), else the sentence why not.
std::string tp_model_problem(const std::vector<int64_t>& widths, int tp);

/// Parameters per rank of `widths` split over `tp` ranks, by the formula:
/// Σ over pairs (in·h + h + h·out)/T + out.
int64_t parameters_per_rank(const std::vector<int64_t>& widths, int tp);
/// Floats one rank passes to all-reduce in its TP group per step, per
/// sample, when f and g are right: the chapter's byte verdict checks the
/// traffic log against it (derived on the chapter page, after the holes).
int64_t all_reduced_per_sample(const std::vector<int64_t>& widths);

/// This rank's slices of an MLP, and the forward that joins them.
class TensorParallelMLP {
 public:
  /// group.rank()'s slices of `full` (host) on `device` (shard_weight).
  TensorParallelMLP(Communicator& group, const MLP& full, Device& device);
  /// x (B, in) replicated → logits (B, classes), replicated.
  Tensor forward(const Tensor& x);
  /// This rank's parameters in MLP::parameters() order.
  std::vector<Tensor> parameters() const;
  /// Elements of this rank's parameters.
  int64_t num_parameters() const;
  /// Elements of the split activations (each pair's hidden block, before and
  /// after its ReLU) the last forward produced on this rank.
  int64_t hidden_elements() const { return hidden_elements_; }
  /// Collective over the group: the full model's weights (or, `grads`, their
  /// gradients) flattened in MLP::parameters() order, on every rank (gather_weight).
  std::vector<float> gather(bool grads);
  /// This rank's slices as pieces of the full model (dpt/model_pieces.h), for
  /// the checks' gathers; a row-parallel bias listed by group rank 0 only.
  std::vector<ModelPiece> pieces() const;
  /// {in, hidden…, out} of the full model.
  const std::vector<int64_t>& widths() const { return widths_; }

 private:
  struct Pair {
    Tensor column_weight, column_bias;  // (h/T, in), (h/T,)
    Tensor row_weight, row_bias;        // (out, h/T), (out,) whole
  };
  Communicator& group_;
  std::vector<int64_t> widths_;
  std::vector<Pair> pairs_;
  int64_t hidden_elements_ = 0;
};

}  // namespace dpt::ch12
