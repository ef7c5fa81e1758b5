/// @file ch04.h
/// @brief Chapter 04's exercises, specified here once: the two phases of ring
/// all-reduce, built from `sendrecv` with the neighbours only. Fill them in
/// `exercises/04_ring_allreduce/ring.cpp` (hints there);
/// `ctest --preset student -L ch04` checks the result against a serial sum,
/// the traffic log against the ring's pattern and its 2(n−1)/n·S bytes per
/// rank, a message large enough to deadlock an unsafe send/recv order, and
/// training with your ring against one device. Those tests need only this
/// chapter's holes.
///
/// Chunks: the vector of `count` floats is cut into n = comm.size() chunks,
/// chunk i = ring_chunk(count, n, i) (sizes differ by at most one; some are
/// empty when count < n). Rank r's right neighbour is (r+1) mod n, its left
/// (r−1+n) mod n.
///
/// Memory: `data` may be host memory or a GPU's (chapter 04 trains on the
/// rank's device, `--device cuda` included). Never read or write its floats
/// with a host loop: receive into `dpt::Floats scratch(data, size)` (scratch
/// in the same memory) and add with `dpt::add_floats` (dpt/floats.h). Both run
/// where the floats live, and a sendrecv on GPU memory waits for the adds.
#pragma once

#include <cstdint>
#include <functional>

#include "dpt/comm.h"

namespace dpt::ch04 {

/// Elements [begin, end) of one chunk.
struct Chunk {
  int64_t begin = 0;  ///< first element of the chunk
  int64_t end = 0;    ///< one past its last element
  /// Number of elements (0 for an empty chunk).
  int64_t size() const { return end - begin; }
};

/// Chunk `i` of `count` elements cut into `n` near-equal chunks: the first
/// count mod n chunks have one extra element. (Provided, not a hole.)
Chunk ring_chunk(int64_t count, int n, int i);

/// Called by the ring after each of its steps ("scatter-reduce" or
/// "all-gather", step 0 … n−2); the chapter's --explain draws the state there.
using StepHook = std::function<void(const char* phase, int step)>;

/// Scatter-reduce: after n−1 steps, rank r's chunk (r+1) mod n of `data` holds
/// the sum over all ranks of that chunk (other chunks hold partial sums). At
/// step s rank r sends chunk (r−s) mod n to its right neighbour and adds the
/// chunk (r−s−1) mod n received from its left (received into scratch in
/// data's memory, added with add_floats). Only sendrecv to the neighbours.
/// (Hole: exercises/04_ring_allreduce/ring.cpp.)
void ring_scatter_reduce(Communicator& comm, float* data, int64_t count, const StepHook& after_step = {});

/// All-gather: on entry rank r's chunk (r+1) mod n is complete; after n−1
/// steps every chunk is complete on every rank. At step s rank r sends chunk
/// (r+1−s) mod n right and stores the chunk (r−s) mod n received from its left.
/// (Hole: exercises/04_ring_allreduce/ring.cpp.)
void ring_all_gather(Communicator& comm, float* data, int64_t count, const StepHook& after_step = {});

/// Scatter-reduce then all-gather (for Avg, between the two, each rank scales
/// the chunk it owns by 1/n with scale_floats): every rank's `data` becomes
/// the sum (or mean) over ranks. (Provided: built from your two phases.)
void ring_all_reduce(Communicator& comm, float* data, int64_t count, ReduceOp op,
                     const StepHook& after_step = {});

}  // namespace dpt::ch04
