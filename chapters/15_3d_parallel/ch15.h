/// @file ch15.h
/// @brief Chapter 15's holes, specified once: a transformer block's
/// attention split over a tensor-parallel group by heads — which of its
/// entries a rank owns, and the forward that joins the ranks' shares —
/// sequence parallelism's conjugate pair, and a rank's place on the
/// tp × dp × pp grid.
///
/// Fill it in `exercises/15_3d_parallel/`; tiered hints are in
/// \ref ch15_hints. `ctest --preset student -L ch15` checks it against one
/// device's attention (chapter 14's gpt_attention) written without a split;
/// `ch15_3d_parallel` prints ✔/✘ verdicts for it.
///
/// Words used below, as chapter 12's: a *group* is the `tp` ranks that share
/// one model (group.rank() is t); a tensor is *replicated* when every rank of
/// the group holds the same values. GPT's words as chapter 14's (gpt.h): C
/// the width, H the heads, D = C / H each head's size; head h reads and
/// writes features [h·D, (h+1)·D) of q, k, v and of the attention's output
/// y (before c_proj). Rank t *owns* the heads [t·H/tp, (t+1)·H/tp).
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/comm.h"
#include "dpt/tensor.h"
#include "gpt.h"

namespace dpt::ch15 {

/// Rank t's share of one block's attention parameters (nanoGPT's
/// attn.c_attn and attn.c_proj), each a leaf of the graph that requires
/// grad (the optimizer steps it), on one device.
struct AttentionSlices {
  /// The rows of c_attn.weight (3C, C) that compute the queries, keys and
  /// values of the heads rank t owns: its queries' rows, then its keys',
  /// then its values', each in the full tensor's row order.
  Tensor qkv_weight;
  /// The same entries of c_attn.bias (3C), in the same order.
  Tensor qkv_bias;
  /// The entries of c_proj.weight (C, C) that the outputs y of the heads
  /// rank t owns are multiplied by, and only those, in the full tensor's
  /// order, shaped as a weight (out, in) that `linear` applies to those
  /// outputs.
  Tensor proj_weight;
  /// c_proj.bias (C), whole on every rank.
  Tensor proj_bias;
};

/// Rank `t`'s share of `block`'s attention.
///
/// On entry: `block` is the full block on the host (gpt.h's shapes);
/// 0 ≤ t < tp; tp divides shape.heads (else dpt::Error saying so).
///
/// Postconditions: AttentionSlices as documented above, on `device`,
/// copies (the block is left alone). Over the tp ranks every entry of
/// c_attn's weight and bias and of c_proj's weight is owned by exactly one
/// rank; a head's q, k and v rows and the c_proj entries its output meets
/// are owned by the same rank.
/// (Hole: exercises/15_3d_parallel/tp_attention.cpp.)
AttentionSlices attention_slices(const GptBlock& block, const GptShape& shape, int t, int tp, Device& device);

/// One block's causal self-attention (chapter 14's gpt_attention: c_attn,
/// causal attention per head, c_proj), computed by the group together,
/// each rank on the heads it owns.
///
/// On entry: x (B·T, C) is replicated over `group` (ln_1 already applied;
/// `batch` = B sequences of T tokens); `mine` is attention_slices() for
/// group.rank() of group.size(), leaves that require grad.
///
/// Postconditions:
///  - returns (B·T, C), the block's attention output before the residual
///    add, the same on every rank and equal to what one device holding the
///    whole block computes (gpt_attention);
///  - after backward of the model's loss, each of `mine`'s tensors holds
///    rank t's share of the full parameter's gradient (c_proj.bias: the
///    whole gradient, on every rank), and x's gradient is the whole model's,
///    the same on every rank — as one device would compute them;
///  - the ranks talk only through chapter 12's two operators
///    (ch12::copy_to_tp_region, ch12::reduce_from_tp_region; its parallel
///    layers use them too): one all-reduce of B·T·C floats in forward and
///    one in backward, no more.
/// (Hole: exercises/15_3d_parallel/tp_attention.cpp.)
Tensor tp_attention(Communicator& group, const Tensor& x, const AttentionSlices& mine, const GptShape& shape,
                    int64_t batch);

// ----------------------------------------------------------------------------
// sequence parallelism's conjugate pair (--sp; sequence_parallel.h)
//
// More words: with --sp, rank t's *positions* are positions
// [t·T/tp, (t+1)·T/tp) of each of the B sequences, and a tensor *held by
// positions* is (B·T/tp, C) on rank t: its rows, sequence by sequence, in the
// whole (B·T, C) tensor's row order (sequence_rows() lists them). The whole
// tensor's row b·T + τ is position τ of sequence b.

/// From the positions each rank holds to the whole sequence, on every rank:
/// what a split layer (c_attn, c_fc) needs in front of it.
///
/// On entry: `mine` is rank t's positions (B·T/tp, C) of a tensor held by
/// positions over `group`; `batch` = B.
///
/// Postconditions:
///  - after forward: returns the whole (B·T, C) tensor, the same on every
///    rank, each rank's positions in their rows;
///  - after backward of a loss to which every rank's copy of the result
///    contributes (each rank's split layer read all of it), mine's gradient
///    is the sum over the group of the gradients of the ranks' copies, at
///    rank t's positions;
///  - cost: one all-gather of rank t's B·T/tp·C floats in forward, one
///    reduce-scatter of B·T·C floats in backward, nothing else.
/// (Hole: exercises/15_3d_parallel/sequence_pair.cpp.)
Tensor gather_sequence(Communicator& group, const Tensor& mine, int64_t batch);

/// From each rank's partial sum of a whole tensor to rank t's positions of
/// the sum: what follows a split layer (c_proj) whose outputs the ranks'
/// shares add up to.
///
/// On entry: `partial` (B·T, C) is rank t's term of a tensor defined as the
/// sum of the group's terms; `batch` = B; tp divides T.
///
/// Postconditions:
///  - after forward: returns rank t's positions (B·T/tp, C) of the sum;
///  - after backward: partial's gradient (B·T, C) is, at every rank's
///    positions, that rank's result's gradient — the same on every rank;
///  - cost: one reduce-scatter of B·T·C floats in forward, one all-gather of
///    B·T/tp·C floats in backward, nothing else.
/// (Hole: exercises/15_3d_parallel/sequence_pair.cpp.)
Tensor scatter_sequence(Communicator& group, const Tensor& partial, int64_t batch);

// ----------------------------------------------------------------------------
// the grid (--tp, --dp, --pp; pipeline_grid.h)
//
// More words: the world's tp·dp·pp ranks form a grid. A rank's *coordinates*
// are t (its TP rank: which heads and MLP features it holds), d (its DP rank:
// which windows of the global batch its pipeline trains on) and p (its
// pipeline stage). Its *TP group* is the ranks that differ from it in t only,
// its *DP group* in d only, its *pipeline* (PP group) in p only.

/// One rank's place on the grid.
struct GridPlace {
  int t = 0;                  ///< TP coordinate, 0 <= t < tp
  int d = 0;                  ///< DP coordinate, 0 <= d < dp
  int p = 0;                  ///< pipeline stage, 0 <= p < pp
  std::vector<int> tp_group;  ///< the world ranks of its TP group, ordered by their t
  std::vector<int> dp_group;  ///< the world ranks of its DP group, ordered by their d
  std::vector<int> pp_group;  ///< the world ranks of its pipeline, ordered by their p (stage 0 first)
};

/// World rank `rank`'s place on a grid of tp × dp × pp ranks.
///
/// On entry: tp, dp, pp >= 1; 0 <= rank < tp·dp·pp (else dpt::Error saying so).
///
/// Postconditions:
///  - each (t, d, p) in range is the place of exactly one world rank;
///  - rank is in each of its groups, at index t of tp_group, d of dp_group,
///    p of pp_group; every member of a group has rank's other two coordinates;
///  - the ranks of a TP group are consecutive world ranks (they exchange
///    activations in every block: on a cluster, the GPUs of one node);
///  - the ranks of one stage (the same p) are consecutive world ranks,
///    stage 0's first (a pipeline's neighbours exchange the least: its
///    stages may sit farthest apart);
///  - inside a group, a lower world rank has a lower coordinate.
/// dpt::Grid builds the communicators; this says where a rank sits.
/// (Hole: exercises/15_3d_parallel/grid_place.cpp.)
GridPlace grid_place(int rank, int tp, int dp, int pp);

}  // namespace dpt::ch15
