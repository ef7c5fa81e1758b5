/// @file ch04.h
/// @brief Chapter 04's exercises, specified here once: cutting the vector into
/// the ring's chunks, the two phases of ring all-reduce, and the all-reduce
/// they make. Fill them in `exercises/04_ring_allreduce/ring.cpp`; the hints
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
/// scratch beside them with `dpt::Floats`, add with `dpt::add_floats` and
/// divide with `dpt::divide_floats` (dpt/floats.h) rather than touching them
/// with a loop.
#pragma once

#include <cstdint>

#include "dpt/comm.h"
#include "dpt/range.h"

namespace dpt::ch04 {

/// Chunk `i` of `count` elements cut into `n` chunks, the ring's unit of work.
///
/// Preconditions: count ≥ 0, n ≥ 1 and 0 ≤ i < n; anything else is a
/// dpt::Error that says which.
///
/// Postconditions, for every count and n:
///  - the chunks tile [0, count) in order: chunk 0 begins at 0, chunk i+1
///    begins where chunk i ends, chunk n−1 ends at count (no element is lost,
///    none is in two chunks);
///  - their sizes differ by at most one and never grow with i (the larger
///    chunks come first; some are empty when count < n);
///  - it costs O(1): chunk i comes from count, n and i alone, without walking
///    the chunks before it (the ring asks for 2(n−1) chunks per call, and n
///    may be in the thousands).
/// (Hole: exercises/04_ring_allreduce/ring.cpp.)
Range ring_chunk(int64_t count, int n, int i);

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

/// All-reduce on the ring, built from the two phases above. Every rank calls
/// it at once with the same `count` and `op` (ReduceOp::Sum or ReduceOp::Avg),
/// `data` holding its own vector.
///
/// Postconditions: every rank's `data` holds the same bits. Sum: element i is
/// the sum over ranks of element i (added in whatever order the ring adds).
/// Avg: element i is that sum divided by n, rounded once — the bits of
/// `sum / float(n)` in float arithmetic, as the library's
/// `comm.all_reduce(…, ReduceOp::Avg)` gives whenever the sum is exact.
///
/// Communication: the two phases' messages and nothing else. Work: Avg's
/// divisions are shared out — every element is divided exactly once, on one
/// rank, and each rank divides about count/n of them, never the whole vector
/// (the tests and the chapter program watch the floats each rank sends, as
/// it sends them).
/// (Hole: exercises/04_ring_allreduce/ring.cpp.)
void ring_all_reduce(Communicator& comm, float* data, int64_t count, ReduceOp op);

}  // namespace dpt::ch04
