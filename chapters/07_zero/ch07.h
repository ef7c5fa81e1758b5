/// @file ch07.h
/// @brief Chapter 07's exercises, specified here once: how ZeRO cuts the
/// parameters across ranks, and what makes a stage that stage — what a rank
/// does when a bucket of gradients is ready, what it does at the update, and
/// the life of a stage-3 layer's parameters around each use. Fill them in
/// `exercises/07_zero/` (`partition.cpp`, `stages.cpp`, `layers.cpp`); hints
/// in tiers in docs/ch07_zero.md (\ref ch07_hints). `ctest --preset student -L ch07`
/// checks each against serial computations, the library's collectives, the
/// traffic log and the device's memory ledger, then trains every stage
/// against stage 0 and one device.
///
/// The layout every stage shares: ONE flat float32 buffer of all Ψ parameters
/// in parameters() order (fc0.weight, fc0.bias, fc1.weight, …), padded with
/// zeros to N·S floats. Rank r owns [r·S, (r+1)·S) of the parameters, of the
/// gradients and of Adam's m and v. A layer, or a bucket of consecutive
/// layers, is a flat range [begin, end) of that buffer; rank r's part of it is
/// the range's intersection with its shard (often empty).
///
/// What a rank keeps is the ZeRO paper's definition of the stages (the
/// trainer allocates it; ZeroState below): stage 0 everything in full;
/// stage 1 shards m and v; stage 2 the gradients too; stage 3 the parameters
/// too. What a rank *does* with what it keeps is yours to write.
///
/// Every buffer lives on the rank's device. Reach it only through the seam
/// dpt/floats.h (`copy_floats`, `add_floats`, `divide_floats`) and Tensor
/// views (`slice`); communicate only through ch07's ring (sharded_ring.h),
/// whose sum order makes every stage compute the same bits.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dpt/comm.h"
#include "dpt/range.h"
#include "dpt/tensor.h"

namespace dpt::ch07 {

// ----------------------------------------------------------------------------
// the partition (partition.cpp)

/// How Ψ parameters are cut into N equal shards of S floats.
struct Partition {
  int64_t psi = 0;     ///< Ψ, the number of parameters (unpadded)
  int world = 1;       ///< N, the number of ranks
  int64_t shard = 0;   ///< S, floats per rank
  int64_t padded = 0;  ///< N·S: the flat buffer's length
  /// Rank r's shard [r·S, (r+1)·S).
  Range shard_of(int rank) const { return {rank * shard, (rank + 1) * shard}; }
};

/// The partition of `psi` >= 1 parameters over `world` >= 1 ranks.
/// Postconditions: every parameter belongs to exactly one shard (N·S >= Ψ);
/// all shards are equal; no other equal-shard partition of Ψ over N pads
/// less (the padding N·S − Ψ is what costs memory and bytes on every rank).
/// Any other input is a dpt::Error naming the bad value. (Hole.)
Partition partition_parameters(int64_t psi, int world);

/// Who owns which part of flat range `range` (0 <= begin <= end <= padded):
/// N+1 offsets *relative to range.begin*, b[0] = 0 <= b[1] <= … <= b[N] =
/// range.size(), such that rank r owns [b[r], b[r+1]) of the range — exactly
/// the elements of the range that lie in its shard, possibly none. A range
/// outside [0, padded) is a dpt::Error. (Hole.)
std::vector<int64_t> shard_bounds(const Partition& part, Range range);

// ----------------------------------------------------------------------------
// what a rank holds (the trainer builds it; the stage holes read and write it)

/// Adam's hyper-parameters (PyTorch's defaults); decoupled = AdamW.
struct AdamConfig {
  float lr = 1e-3f;           ///< learning rate
  float beta1 = 0.9f;         ///< first-moment decay
  float beta2 = 0.999f;       ///< second-moment decay
  float eps = 1e-8f;          ///< added to √v̂
  float weight_decay = 0.0f;  ///< λ
  bool decoupled = false;     ///< AdamW: p ← p·(1 − lr·λ) instead of g += λ p
};

/// Step `t` (1-based) of Adam on equally long flat tensors: p[i] moves by
/// its own gradient g[i] and moments m[i], v[i] — dpt::Adam's arithmetic.
/// Tensors of different lengths are a dpt::Error naming the four lengths.
/// (Provided.)
void adam_update(const AdamConfig& config, int64_t t, Tensor p, const Tensor& g, Tensor m, Tensor v);

/// One rank's model states under its stage, as the trainer allocated them.
/// "Full" is the padded buffer (N·S floats), "shard" this rank's S floats:
///
///   stage | params | grads | m, v
///   ------|--------|-------|------
///   0     | full   | full  | full
///   1     | full   | full  | shard
///   2     | full   | shard | shard
///   3     | shard  | shard | shard
struct ZeroState {
  /// Empty states on `comm`'s rank and `device`; the trainer fills the rest.
  ZeroState(Communicator& c, Device& d) : comm(c), device(d) {}
  Communicator& comm;            ///< this rank's communicator (rank(), size())
  Device& device;                ///< where every tensor here lives
  Partition part;                ///< the flat layout
  int stage = 0;                 ///< 0 … 3
  std::vector<Range> layers;     ///< layer l's flat range (its weight, then its bias)
  AdamConfig adam;               ///< the optimizer
  Tensor params;                 ///< parameters (see the table: whole or this rank's shard)
  Tensor grads;                  ///< gradients (see the table)
  Tensor m;                      ///< Adam's first moments (see the table)
  Tensor v;                      ///< Adam's second moments (see the table)
  /// Stage 3, --prefetch: layer l's full parameters, gathered ahead of their
  /// next use by the trainer (through use_layer), else undefined.
  std::vector<Tensor> gathered;
};

// ----------------------------------------------------------------------------
// the stages (stages.cpp)

/// Backward has finished every gradient of flat range `range` (a bucket of
/// whole layers, the same on every rank, buckets in the same order on every
/// rank). `bucket` holds this rank's gradients of the range (range.size()
/// floats): at stages 0–1 a view of s.grads, at stages 2–3 a buffer of its
/// own (charged to comm buffers), which the call may overwrite. Collective.
/// Postconditions, with "the mean" the sum over ranks divided by float(N):
///  - stage 0: every rank's s.grads holds the mean over the whole range;
///  - stages 1–3: this rank's part of the range (shard_bounds) holds the
///    mean in its gradient — s.grads at the same flat place at stage 1, its
///    place in the S-float shard s.grads at stages 2–3, whose other floats
///    are untouched; no more bytes leave the rank than that needs;
///  - stages 2–3: nothing of the bucket is kept (`bucket` is undefined).
/// (Hole.)
void on_bucket_ready(ZeroState& s, Range range, Tensor& bucket);

/// Every bucket is done: Adam's step `t` (1-based). Collective.
/// Postconditions: every one of the Ψ parameters has taken step t exactly
/// once, with its mean gradient and its own moments; every rank holds what
/// its stage keeps up to date — at stages 0–2 all N·S parameters (the same
/// on every rank), at stage 3 its shard; each rank's m and v have advanced
/// only for the parameters it keeps them for. (Hole.)
void update_parameters(ZeroState& s, int64_t t);

// ----------------------------------------------------------------------------
// the life of a layer's parameters around one use (layers.cpp)

/// One use of layer l's parameters: the layer's forward, or its backward
/// (the trainer calls it for both, in the same order on every rank). Calls
/// `use` exactly once, with the layer's full parameters: s.layers[l].size()
/// floats on s.device, flat elements [begin, end) of the parameters as they
/// are now (weight then bias). `use` keeps no handle to them, except the
/// trainer's gather ahead (--prefetch): a use that keeps them, which the
/// trainer stores in s.gathered[l] for the next use after this call returns.
/// Postconditions:
///  - a rank whose stage keeps the layer's parameters (table above) sends
///    nothing and allocates nothing for them;
///  - a rank that does not keep them (every rank at stage 3, 1 rank
///    included: its stage keeps a shard, even when that shard spans all Ψ
///    parameters): while `use` runs, the layer's full parameters are held in
///    memory charged to MemoryCategory::Comm (its s.layers[l].size() · 4
///    bytes at least), as is whatever else it allocates for them; it sends
///    only to its right neighbour, and its part of the layer reaches each
///    other rank exactly once, during this call (collective);
///  - s.gathered[l], when defined on entry, already holds the parameters for
///    this use (gathered ahead, --prefetch): no byte of them is sent again;
///  - on return s.gathered[l] is undefined (a gather ahead is stored after),
///    every other layer's slot is as it was, and the layer's parameters take
///    no memory beyond what the stage keeps anyway.
/// (Hole.)
void use_layer(ZeroState& s, int l, const std::function<void(const Tensor& params)>& use);

}  // namespace dpt::ch07
