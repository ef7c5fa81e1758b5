// exercises/04_ring_allreduce/ring.cpp — holes: the two phases of ring all-reduce.
//
// The spec of both phases (which chunk to send and receive at step s) is in
// chapters/04_ring_allreduce/ch04.h: read it first. In short, n ranks stand in
// a ring and each talks only to its neighbours:
//     right = (r + 1) % n        left = (r - 1 + n) % n
// and the vector is cut into n chunks: ring_chunk(count, n, i) gives [begin, end).
//
// Hints:
//  * comm.sendrecv(send_ptr, send_count, right, recv_ptr, recv_count, left)
//    does both at once. Calling send then recv on every rank deadlocks once a
//    message is above the eager limit (MPI, and the threads backend in the
//    tests): every rank waits in send for a receive nobody has posted. The
//    tests use 2 MB messages, and the timeout names who waited for whom.
//  * `data` may live on a GPU (--device cuda): a host loop over it
//    (data[i] += ...) reads GPU memory from the CPU (a segmentation fault), a
//    std::vector scratch is host memory the GPU cannot add from. So
//    scatter-reduce receives into scratch made next to data (the largest
//    chunk is chunk 0):
//        dpt::Floats scratch(data, ring_chunk(count, n, 0).size());
//    and adds it where the floats live (a CPU loop or a GPU kernel):
//        dpt::add_floats(data + in.begin, scratch.data(), in.size());
//    (dpt/floats.h, included below). All-gather receives straight into data.
//  * (a - b) mod n in C++: ((a - b) % n + n) % n — % of a negative is negative.
//  * Chunks may be empty (count < n): sending 0 floats is fine.
//  * After each step call `if (after_step) after_step("scatter-reduce", s);`
//    (or "all-gather"): --explain draws the ring's state there.
#include "ch04.h"

#include "dpt/check.h"
#include "dpt/floats.h"

namespace dpt::ch04 {

void ring_scatter_reduce(Communicator& comm, float* data, int64_t count, const StepHook& after_step) {
  (void)comm, (void)data, (void)count, (void)after_step;
  throw NotImplemented("ch04: ring_scatter_reduce — see exercises/04_ring_allreduce/ring.cpp");
}

void ring_all_gather(Communicator& comm, float* data, int64_t count, const StepHook& after_step) {
  (void)comm, (void)data, (void)count, (void)after_step;
  throw NotImplemented("ch04: ring_all_gather — see exercises/04_ring_allreduce/ring.cpp");
}

}  // namespace dpt::ch04
