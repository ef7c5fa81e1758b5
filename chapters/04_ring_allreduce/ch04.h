/// @file ch04.h
/// @brief Chapter 04's exercises, specified here once: the two phases of ring
/// all-reduce. Fill them in `exercises/04_ring_allreduce/ring.cpp`; the hints
/// are in the chapter page (\ref ch04_hints), one tier at a time.
/// `ctest --preset student -L ch04` checks them against a serial sum, their
/// messages against the ring's pattern, and training with your ring against
/// one device. They need only this chapter's holes.
///
/// The ring: n = comm.size() ranks; rank r talks only to its neighbours,
/// right = (r+1) mod n and left = (r−1) mod n. The vector of `count` floats is
/// cut into n chunks, chunk i = ring_chunk(count, n, i) (sizes differ by at
/// most one; some are empty when count < n).
///
/// The floats live in the rank's memory, which need not be the host's: make
/// scratch beside them with `dpt::Floats` and add with `dpt::add_floats`
/// (dpt/floats.h) rather than touching them with a loop.
#pragma once

#include <cstdint>

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

/// Scatter-reduce. On entry `data` holds this rank's own vector; every rank
/// calls with the same `count`.
///
/// Postcondition: on rank r, chunk (r+1) mod n holds the elementwise sum of
/// that chunk over all n ranks' vectors, each rank's contribution counted
/// exactly once. The other chunks hold whatever the algorithm left there.
///
/// Communication: n−1 steps; in each, this rank sends one whole chunk to its
/// right neighbour and receives one whole chunk from its left, and nothing
/// else. So every rank sends (n−1)/n of the vector, whatever n is. Every rank
/// runs this at once, and messages may be far larger than the communicator
/// buffers (communicator.h, "rendezvous"): the steps must not deadlock.
/// (Hole: exercises/04_ring_allreduce/ring.cpp.)
void ring_scatter_reduce(Communicator& comm, float* data, int64_t count);

/// All-gather. On entry rank r's chunk (r+1) mod n is *finished* (what
/// scatter-reduce left there); its other chunks may hold anything.
///
/// Postcondition: on every rank, every chunk i is a copy of the finished chunk
/// i of its owner (the rank r with (r+1) mod n = i), bit for bit.
///
/// Communication: as scatter-reduce: n−1 steps, each one whole chunk to the
/// right and one from the left.
/// (Hole: exercises/04_ring_allreduce/ring.cpp.)
void ring_all_gather(Communicator& comm, float* data, int64_t count);

/// Scatter-reduce then all-gather (for Avg, between the two, each rank scales
/// the chunk it owns by 1/n with scale_floats): every rank's `data` becomes
/// the sum (or mean) over ranks. (Provided: built from your two phases.)
void ring_all_reduce(Communicator& comm, float* data, int64_t count, ReduceOp op);

}  // namespace dpt::ch04
