// exercises/04_ring_allreduce/ring.cpp — holes: the ring's chunks, the two
// phases of ring all-reduce, and the all-reduce they make.
//
// The contracts are in chapters/04_ring_allreduce/ch04.h. Hints, one tier at
// a time: the chapter page, "Hints". Do them in file order.
#include "ch04.h"

#include "dpt/check.h"
#include "dpt/floats.h"

namespace dpt::ch04 {

// ring_chunk: the postconditions (tiling, sizes, order, cost) pin every chunk
// down. Try count = 10 with n = 4, and count = 2 with n = 3, on paper first.
Range ring_chunk(int64_t count, int n, int i) {
  (void)count, (void)n, (void)i;
  throw NotImplemented("ch04: ring_chunk — see exercises/04_ring_allreduce/ring.cpp");
}

// The two phases. Which chunk a rank sends and receives at each step is yours
// to work out: draw 3 or 4 ranks on paper first. What you have: comm.send /
// recv / sendrecv (dpt/comm/communicator.h); dpt::Floats, dpt::add_floats
// (dpt/floats.h) for scratch beside `data` and adding into it; dpt::mod
// (dpt/range.h).
// `build/.../ch04_ring_allreduce --ranks 4` draws your ring's state step by
// step before anything else.
void ring_scatter_reduce(Communicator& comm, float* data, int64_t count) {
  (void)comm, (void)data, (void)count;
  throw NotImplemented("ch04: ring_scatter_reduce — see exercises/04_ring_allreduce/ring.cpp");
}

void ring_all_gather(Communicator& comm, float* data, int64_t count) {
  (void)comm, (void)data, (void)count;
  throw NotImplemented("ch04: ring_all_gather — see exercises/04_ring_allreduce/ring.cpp");
}

// ring_all_reduce: Avg's postcondition and its share of the work are in
// ch04.h; where to divide is yours to decide. dpt::divide_floats
// (dpt/floats.h) divides. Run the chapter with `--ranks 3` as well as 4: at 4
// ranks dividing by 4 is exact in binary.
void ring_all_reduce(Communicator& comm, float* data, int64_t count, ReduceOp op) {
  (void)comm, (void)data, (void)count, (void)op;
  throw NotImplemented("ch04: ring_all_reduce — see exercises/04_ring_allreduce/ring.cpp");
}

}  // namespace dpt::ch04
