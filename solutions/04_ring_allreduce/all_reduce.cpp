// solutions/04_ring_allreduce/all_reduce.cpp — the ring all-reduce from its
// two phases (spec: ch04.h).
//
// Avg divides between the phases, and only the chunk this rank owns: S/n
// floats instead of S, and the all-gather then copies the divided bits to
// every rank. Dividing before the scatter-reduce would round every
// contribution and change the sum's bits; dividing the whole vector after the
// all-gather gives the same bits at n times the work.
#include "ch04.h"

#include "dpt/floats.h"

namespace dpt::ch04 {

void ring_all_reduce(Communicator& comm, float* data, int64_t count, ReduceOp op) {
  const int n = comm.size();
  ring_scatter_reduce(comm, data, count);
  if (op == ReduceOp::Avg) {
    const Chunk owned = ring_chunk(count, n, (comm.rank() + 1) % n);
    divide_floats(data + owned.begin, owned.size(), float(n));
  }
  ring_all_gather(comm, data, count);
}

}  // namespace dpt::ch04
