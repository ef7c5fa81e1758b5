/// @file ch12.h
/// @brief Chapter 12's holes, each specified once: the two operators that
/// join a rank's slice of a layer to the rest of the model, which slice of a
/// weight a rank owns (and putting the slices back together), and the two
/// parallel linear layers of a Megatron MLP pair.
///
/// Fill them in `exercises/12_tensor_parallel/`; tiered hints are in
/// \ref ch12_hints. `ctest --preset student -L ch12` checks them against one
/// device's forward and backward, written out in the tests;
/// `ch12_tensor_parallel` prints ✔/✘ verdicts for them.
///
/// Words used below. A *group* is the T ranks that share one model (here a
/// Communicator of size T; group.rank() is t). A tensor is *replicated* when
/// every rank of the group holds the same values. Weights follow nn.h:
/// weight (out, in), y = x · weightᵀ + bias.
#pragma once

#include "dpt/comm.h"
#include "dpt/tensor.h"

namespace dpt::ch12 {

// ----------------------------------------------------------------------------
// the two operators

/// Megatron's "f": from a tensor every rank holds whole into computation
/// each rank does on its own slice of the weights.
///
/// On entry: x (B, D) is replicated over `group`. After the call, each rank
/// feeds the result into computation that holds only its own slice of the
/// weights, so each rank's graph beyond this point sees only its slice's
/// share of the model — the loss depends on x through all T ranks' slices
/// together.
///
/// Postconditions, stated as what the caller needs:
///  - after forward, every rank holds x's values, unchanged;
///  - after backward of the model's loss, x's gradient on every rank is the
///    gradient of the whole model's loss with respect to x — what one device
///    holding all T slices would compute — and so the same on every rank.
/// (Hole: exercises/12_tensor_parallel/conjugate.cpp.)
Tensor copy_to_tp_region(Communicator& group, const Tensor& x);

/// Megatron's "g": from shares each rank holds of a tensor to that tensor,
/// whole, on every rank.
///
/// On entry: partial (B, D) on rank t is rank t's share of a layer output,
/// which is defined as the elementwise sum of the T ranks' partials. After
/// the call every rank runs the same (replicated) layers on the result.
///
/// Postconditions, stated as what the caller needs:
///  - after forward, every rank of the group holds that layer output, the
///    same on every rank;
///  - after backward of the model's loss L (the loss one device holding all
///    T slices computes on the same batch), each rank's partial holds
///    ∂L/∂partial_t.
/// (Hole: exercises/12_tensor_parallel/conjugate.cpp.)
Tensor reduce_from_tp_region(Communicator& group, const Tensor& partial);

// ----------------------------------------------------------------------------
// which slice a rank owns

/// Which features of a layer a rank owns.
enum class Split {
  /// By output features: the T ranks own equal blocks of consecutive output
  /// features, in rank order. Megatron's "column-parallel" layer (its A is our weightᵀ).
  Output,
  /// By input features: the T ranks own equal blocks of consecutive input
  /// features, in rank order. Megatron's "row-parallel" layer.
  Input,
};

/// Rank `rank`'s slice of a full weight or bias.
///
/// On entry: `full` is on the host, either a weight (out, in) or a bias
/// (out,) (a bias only with Split::Output); 0 <= rank < ranks; the split
/// dimension divides by `ranks` (else dpt::Error saying so).
///
/// Postconditions: the result lives on `device`, shaped (out/T, in) for
/// Output, (out, in/T) for Input, (out/T,) for a bias; its entry (i, j) is
/// the full entry of the i-th output feature and the j-th input feature that
/// rank `rank` owns (Split), so a layer computed from the slice gives, for
/// those features, the same numbers one device's full layer gives. Over the
/// T ranks, every entry of `full` is owned exactly once.
/// (Hole: exercises/12_tensor_parallel/shards.cpp.)
Tensor shard_weight(const Tensor& full, Split split, int rank, int ranks, Device& device);

/// The inverse, collective over `group`: every rank passes its slice
/// (shard_weight's shape for its rank, on any device; a gradient of a slice
/// works the same) and gets the full tensor back on the host, the same on
/// every rank: shard_weight(gather_weight(group, s, split), split, t, T, …)
/// = rank t's s.
/// (Hole: exercises/12_tensor_parallel/shards.cpp.)
Tensor gather_weight(Communicator& group, const Tensor& shard, Split split);

// ----------------------------------------------------------------------------
// the two layers of a pair
//
// Each layer talks to the other ranks only through the two operators above.
// Whether it needs one, which, on which side of its local product, and where
// its bias goes are the hole's decisions; the contracts say only what must
// hold after forward and after backward.

/// A linear layer split by output features (Split::Output).
///
/// On entry: x (B, in) replicated over `group`; weight_shard (out/T, in) and
/// bias_shard (out/T,) rank t's slices (shard_weight), leaves of the graph.
///
/// Postconditions: returns (B, out/T), this rank's block of output features
/// of x · weightᵀ + bias for the full layer; after backward of the model's
/// loss, weight_shard and bias_shard hold rank t's slices of the full layer's
/// gradients, and x gets the whole model's gradient, as one device would.
/// (Hole: exercises/12_tensor_parallel/parallel_linear.cpp.)
Tensor column_parallel_linear(Communicator& group, const Tensor& x, const Tensor& weight_shard,
                              const Tensor& bias_shard);

/// A linear layer split by input features (Split::Input).
///
/// On entry: x_shard (B, in/T) is rank t's block of the layer's input
/// features (what a column-parallel layer and an elementwise op produced);
/// weight_shard (out, in/T) rank t's slice; bias (out,) the whole bias,
/// replicated. All leaves of the graph but x_shard.
///
/// Postconditions: returns (B, out) = x · weightᵀ + bias for the full input x
/// and the full layer, on every rank; after backward, weight_shard holds rank
/// t's slice of the full layer's gradient, bias the full bias gradient (the
/// same on every rank), and x_shard its block of the gradient of the input.
/// (Hole: exercises/12_tensor_parallel/parallel_linear.cpp.)
Tensor row_parallel_linear(Communicator& group, const Tensor& x_shard, const Tensor& weight_shard, const Tensor& bias);

}  // namespace dpt::ch12
