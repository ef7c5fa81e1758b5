/// @file ch07.h
/// @brief Chapter 07's exercises, specified here once: how ZeRO cuts the
/// parameters across ranks, stage 2's reduce-scatter of one gradient bucket,
/// and stage 3's gather and free around one layer. Fill them in
/// `exercises/07_zero/zero.cpp` (hints there); `ctest --preset student -L ch07`
/// checks them against serial computations and the library's collectives, and
/// trains every stage against stage 0 and one device.
///
/// The layout every stage shares: ONE flat float32 buffer of all Ψ parameters
/// in parameters() order (fc0.weight, fc0.bias, fc1.weight, …), padded with
/// zeros to N·S floats, S = ⌈Ψ/N⌉. Rank r owns [r·S, (r+1)·S): its slice of
/// the parameters (stage 3), of the gradients (stages 2, 3) and of Adam's m
/// and v (stages 1–3). A layer, or a bucket of consecutive layers, is a flat
/// range [begin, end) of that buffer; rank r's part of it is the range's
/// intersection with its shard (empty for most ranks when the range is small).
///
/// Every buffer a hole gets (`bucket`, `grad_shard`, a tensor's data()) lives
/// on the rank's device: host memory on cpu:k, GPU memory under --device cuda,
/// where the host cannot read or write it. So the holes never touch a float
/// themselves: they copy with `copy_floats` and divide with `divide_floats`
/// (dpt/floats.h — the plain loops on host memory, copies and kernels on a
/// GPU), and leave the rest to ch07's ring (sharded_ring.h), which does the same.
///
///     Partition part = partition_parameters(psi, world);          // S, N·S
///     std::vector<int64_t> b = shard_bounds(part, layer_range);   // rank r: [b[r], b[r+1])
///     reduce_scatter_bucket(comm, part, bucket_range, bucket, grad_shard);  // stage 2
///     Tensor w = gather_layer(comm, part, layer_range, param_shard, device);  // stage 3
///     … forward or backward of the layer with w …
///     release_layer(w);
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/comm.h"
#include "dpt/tensor.h"

namespace dpt::ch07 {

/// Elements [begin, end) of the flat parameter buffer.
struct Range {
  int64_t begin = 0;  ///< first element
  int64_t end = 0;    ///< one past the last
  /// Number of elements.
  int64_t size() const { return end - begin; }
};

/// How Ψ parameters are cut into N equal shards.
struct Partition {
  int64_t psi = 0;     ///< Ψ, the number of parameters (unpadded)
  int world = 1;       ///< N, the number of ranks
  int64_t shard = 0;   ///< S = ⌈Ψ/N⌉, floats per rank
  int64_t padded = 0;  ///< N·S >= Ψ: the flat buffer's length (padding < N)
  /// Rank r's shard [r·S, (r+1)·S).
  Range shard_of(int rank) const { return {rank * shard, (rank + 1) * shard}; }
};

/// The partition of `psi` >= 1 parameters over `world` >= 1 ranks: S = ⌈Ψ/N⌉
/// (integer arithmetic), padded = N·S. Anything else is a dpt::Error naming
/// the bad value. (Hole.)
Partition partition_parameters(int64_t psi, int world);

/// Who owns which part of flat range `range` (0 <= begin <= end <= padded):
/// N+1 offsets *relative to range.begin*, b[0] = 0 <= b[1] <= … <= b[N] =
/// range.size(), such that rank r owns [b[r], b[r+1]) — the part of the range
/// inside its shard, possibly empty. A range outside [0, padded) is a
/// dpt::Error. (Hole.)
std::vector<int64_t> shard_bounds(const Partition& part, Range range);

/// Stage 2: one bucket's gradients leave the rank. `bucket` holds this rank's
/// gradients of flat range `range` (range.size() floats, overwritten). After
/// the call this rank's part of the range (shard_bounds) holds the MEAN over
/// ranks — summed by ch07's ring_reduce_scatter (sharded_ring.h, provided),
/// then divided by float(N) with divide_floats (a division, as stages 0 and
/// 1 do, so every stage computes the same bits) — copied (copy_floats) into
/// `grad_shard` (S floats: this rank's shard of the gradient) at the part's
/// offset from r·S. The rest of grad_shard is untouched. Collective: every
/// rank calls it with the same range. Each rank sends range.size() minus its
/// own part's floats. (Hole.)
void reduce_scatter_bucket(Communicator& comm, const Partition& part, Range range, float* bucket, float* grad_shard);

/// Stage 3: the full parameters of flat range `range` (one layer), gathered
/// from every rank's `param_shard` (S floats) into a new tensor (range.size(),)
/// on `device`, charged to MemoryCategory::Comm (a dpt::MemoryScope around
/// the allocation). Copy this rank's part in from its shard (copy_floats),
/// then ring all-gather the parts (ch07's ring_all_gather with shard_bounds).
/// Collective. (Hole.)
Tensor gather_layer(Communicator& comm, const Partition& part, Range range, const Tensor& param_shard, Device& device);

/// Stage 3: frees a gathered layer as soon as its forward (or backward) is
/// done: drops `gathered` (it becomes undefined), so its bytes go back to the
/// device unless another handle still holds them. (Hole.)
void release_layer(Tensor& gathered);

}  // namespace dpt::ch07
