// exercises/04_ring_allreduce/ring.cpp — holes: the two phases of ring all-reduce.
//
// n ranks stand in a ring; each talks only to its neighbours:
//     right = (r + 1) % n        left = (r - 1 + n) % n
// The vector is cut into n chunks: ring_chunk(count, n, i) gives [begin, end).
//
// Scatter-reduce, n-1 steps. At step s, rank r
//     sends     chunk (r - s) mod n      to the right,
//     receives  chunk (r - s - 1) mod n  from the left into a scratch buffer,
//     adds the scratch into its own copy of that chunk.
// Each chunk travels around the ring collecting one contribution per hop; after
// n-1 hops chunk (r+1) mod n on rank r holds everybody's sum.
//
// All-gather, n-1 steps. At step s, rank r
//     sends     chunk (r + 1 - s) mod n  to the right (a finished one),
//     receives  chunk (r - s) mod n      from the left straight into data.
//
// Hints:
//  * comm.sendrecv(send_ptr, send_count, right, recv_ptr, recv_count, left)
//    does both at once; calling send then recv on every rank can deadlock under
//    MPI (and the timeout will tell you which rank waited for whom).
//  * (a - b) mod n in C++: ((a - b) % n + n) % n — % of a negative is negative.
//  * Chunks may be empty (count < n): sending 0 floats is fine.
//  * After each step call `if (after_step) after_step("scatter-reduce", s);`
//    (or "all-gather"): --explain draws the ring's state there.
#include "ch04.h"

#include "dpt/check.h"

namespace dpt::ch04 {

void ring_scatter_reduce(Communicator& comm, float* data, int64_t count, const StepHook& after_step) {
  (void)comm, (void)data, (void)count, (void)after_step;
  throw NotImplemented("ch04 ring_scatter_reduce — see exercises/04_ring_allreduce/ring.cpp");
}

void ring_all_gather(Communicator& comm, float* data, int64_t count, const StepHook& after_step) {
  (void)comm, (void)data, (void)count, (void)after_step;
  throw NotImplemented("ch04 ring_all_gather — see exercises/04_ring_allreduce/ring.cpp");
}

}  // namespace dpt::ch04
