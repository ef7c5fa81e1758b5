/// @file ch15.h
/// @brief Chapter 15's holes, specified once: a transformer block's
/// attention split over a tensor-parallel group by heads — which of its
/// entries a rank owns, and the forward that joins the ranks' shares —
/// sequence parallelism's conjugate pair, a rank's place on the
/// tp × dp × pp grid, and the planner's per-rank model state of a layout.
///
/// Fill it in `exercises/15_3d_parallel/`; tiered hints are in
/// \ref ch15_hints. `ctest --preset student -L ch15` checks it against one
/// device's attention (chapter 14's gpt_attention) written without a split;
/// `ch15_3d_parallel` prints ✔/✘ verdicts for it.
///
/// Words used below, as chapter 12's: a *group* is the `tp` ranks that share
/// one model (group.rank() is t); a tensor is *replicated* when every rank of
/// the group holds the same values. GPT's words as chapter 14's (gpt.h): C
/// the width, H the heads, D = C / H each head's size. Rank t *owns* the
/// heads [t·H/tp, (t+1)·H/tp). An entry of c_attn or c_proj *belongs to*
/// head h when it takes part in computing head h's queries, keys or values,
/// or meets head h's attention output inside c_proj.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dpt/comm.h"
#include "dpt/tensor.h"
#include "gpt.h"
#include "planner.h"

namespace dpt::ch15 {

/// Rank t's share of one block's attention parameters (nanoGPT's
/// attn.c_attn and attn.c_proj), each a leaf of the graph that requires
/// grad (the optimizer steps it), on one device. Which entries go where,
/// and each tensor's shape, are yours: your tp_attention is what reads them.
struct AttentionSlices {
  Tensor qkv_weight;   ///< entries of c_attn.weight (3C, C)
  Tensor qkv_bias;     ///< entries of c_attn.bias (3C)
  Tensor proj_weight;  ///< entries of c_proj.weight (C, C)
  Tensor proj_bias;    ///< c_proj.bias (C), whole, a copy on every rank
};

/// Rank `t`'s share of `block`'s attention.
///
/// On entry: `block` is the full block on the host (gpt.h's shapes);
/// 0 ≤ t < tp; tp divides shape.heads (else dpt::Error saying so).
///
/// Postconditions (laws the tests and the bare run check, reading where
/// each entry went from what you return):
///  - copies on `device`: every entry of qkv_weight, qkv_bias and
///    proj_weight holds, unchanged, one entry of c_attn.weight, c_attn.bias
///    and c_proj.weight respectively; proj_bias is c_proj.bias, whole; the
///    block is left alone;
///  - over the tp ranks, every entry of c_attn.weight, c_attn.bias and
///    c_proj.weight is held by exactly one rank, once;
///  - every entry that belongs to head h is held by the rank that owns h.
///    Equivalently: keep only rank t's entries of the block (every other
///    entry of c_attn and c_proj 0, c_proj.bias 0) and run one device's
///    attention on it; summed over t, plus c_proj.bias, that is the whole
///    block's attention.
/// (Hole: exercises/15_3d_parallel/tp_attention.cpp.)
AttentionSlices attention_slices(const GptBlock& block, const GptShape& shape, int t, int tp, Device& device);

/// The two exchanges the ranks of a split block talk through, as chapter
/// 12 taught them: described by what each rank holds, not by where they go.
/// A rank *holds its part* of an activation (B·T, C): the whole of it
/// under tensor parallelism, its positions under sequence parallelism
/// (below). Both are differentiable ops of the graph.
struct ExchangePair {
  /// From this rank's part of an activation to the whole (B·T, C)
  /// activation, the same on every rank. Its backward: the sum over the
  /// group of the gradients of the ranks' whole copies, each rank keeping
  /// its part of the sum. Chapter 12's f (copy_to_tp_region) or
  /// gather_sequence.
  std::function<Tensor(const Tensor&)> f;
  /// From each rank's term (B·T, C) of a tensor defined as the sum of the
  /// group's terms, to this rank's part of the sum. Its backward: every
  /// rank's term gets the gradient of the whole sum. Chapter 12's g
  /// (reduce_from_tp_region) or scatter_sequence.
  std::function<Tensor(const Tensor&)> g;
};

/// One block's causal self-attention (chapter 14's gpt_attention: c_attn,
/// causal attention per head, c_proj), computed by the group together,
/// each rank on the heads it owns.
///
/// On entry: x is this rank's part of an activation (B·T, C) (ln_1
/// already applied; `batch` = B sequences of T tokens), in the sense of
/// `pair`; `mine` is your attention_slices() for group.rank() of
/// group.size(), leaves that require grad.
///
/// Postconditions:
///  - returns this rank's part of the block's attention output (before the
///    residual add), equal to what one device holding the whole block
///    computes (gpt_attention) at those rows;
///  - after backward of the model's loss, x's gradient and each of
///    `mine`'s tensors hold what one device would compute for them: x's
///    the whole model's at this rank's rows, a share's the full
///    parameter's gradient at the entries it holds, c_proj.bias's the
///    part of its gradient that comes from this rank's rows of the output
///    (with chapter 12's pair every row: the whole gradient, on every
///    rank);
///  - the ranks talk only through `pair`, and as little as one device's
///    answer allows: with chapter 12's pair, one all-reduce of B·T·C floats
///    in forward and one in backward, no more; with sequence
///    parallelism's, two collective calls in each pass.
/// (Hole: exercises/15_3d_parallel/tp_attention.cpp.)
Tensor tp_attention(Communicator& group, const ExchangePair& pair, const Tensor& x, const AttentionSlices& mine,
                    const GptShape& shape, int64_t batch);

// ----------------------------------------------------------------------------
// the planner (--plan; planner.h)

/// The planner's memory column (--plan; planner.h's words): the model
/// state one rank of stage `stage` of `layout` holds: parameters, gradients and optimizer
/// state, in bytes (fp32: 4 per value); `activations` left 0.
///
/// On entry: `layout` divides the model (layout_problem is ""); 0 ≤ stage <
/// layout.pp. The rank is any rank of that pipeline stage: ranks of one
/// stage hold equal amounts.
///
/// Postconditions:
///  - params is what the ranks' parameter tensors take on the memory ledger
///    when the rank holds its share as chapter 15 splits it (tp_gpt.h) and
///    its stage's blocks, with the embeddings (wte, wpe) on the first stage
///    and ln_f and lm_head on the last; grads the same tensors' gradients;
///    state the optimizer's per-parameter slots (model.adam: 2, else 0) —
///    so at tp = 1, pp = 1, dp = 1, params = 4 × chapter 14's parameter count;
///  - ZeRO stage z divides, among the dp ranks, the optimizer state (z ≥ 1),
///    the gradients too (z ≥ 2), the weights too (z = 3), as chapter 07
///    measured — nothing else divides by dp;
///  - sp and M change no model state.
/// (Hole: exercises/15_3d_parallel/plan_memory.cpp.)
RankMemory rank_state_bytes(const PlanModel& model, const PlanLayout& layout, int stage);

// ----------------------------------------------------------------------------
// sequence parallelism's conjugate pair (--sp; sequence_parallel.h)
//
// More words: with --sp, rank t's *positions* are positions
// [t·T/tp, (t+1)·T/tp) of each of the B sequences, and a tensor *held by
// positions* is (B·T/tp, C) on rank t: its rows, sequence by sequence, in the
// whole (B·T, C) tensor's row order (sequence_rows() lists them). The whole
// tensor's row b·T + τ is position τ of sequence b.

/// From the positions each rank holds to the whole sequence, on every rank:
/// what a layer that reads every position needs.
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
///  - cost: in each pass (forward, backward) one collective call of
///    `group` (dpt/comm.h) and no other exchange, moving (tp−1)/tp·B·T·C
///    floats per rank on a ring: half an all-reduce of the whole tensor.
/// (Hole: exercises/15_3d_parallel/sequence_pair.cpp.)
Tensor gather_sequence(Communicator& group, const Tensor& mine, int64_t batch);

/// From each rank's partial sum of a whole tensor to rank t's positions of
/// the sum: what a layer whose ranks' outputs add up to its result hands on.
///
/// On entry: `partial` (B·T, C) is rank t's term of a tensor defined as the
/// sum of the group's terms; `batch` = B; tp divides T.
///
/// Postconditions:
///  - after forward: returns rank t's positions (B·T/tp, C) of the sum;
///  - after backward: partial's gradient (B·T, C) is, at every rank's
///    positions, that rank's result's gradient — the same on every rank;
///  - cost: in each pass (forward, backward) one collective call of
///    `group` (dpt/comm.h) and no other exchange, moving (tp−1)/tp·B·T·C
///    floats per rank on a ring: half an all-reduce of the whole tensor.
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
