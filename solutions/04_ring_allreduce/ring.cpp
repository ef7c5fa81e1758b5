// solutions/04_ring_allreduce/ring.cpp — scatter-reduce and all-gather on a ring.
//
// The plainest correct ring (spec: ch04.h): each step one sendrecv of a whole
// chunk with the neighbours. Each rank sends 2(n−1) chunks of ≈ S/n bytes,
// 2(n−1)/n·S in all: the bandwidth-optimal all-reduce. A variant that moves
// chunks in cache-sized pieces lives in bench/ (beyond the exercise).
//
// `data` may be host memory or GPU memory: the only touch of its floats is
// dpt::add_floats, which runs where they live (a CPU loop, or a kernel on
// this thread's stream that the next sendrecv waits for).
#include "ch04.h"
#include "dpt/floats.h"

namespace dpt::ch04 {

namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

void ring_scatter_reduce(Communicator& comm, float* data, int64_t count) {
  const int n = comm.size(), r = comm.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  Floats scratch(data, ring_chunk(count, n, 0).size());  // in data's memory; chunk 0 is the largest
  for (int s = 0; s + 1 < n; ++s) {
    Chunk out = ring_chunk(count, n, mod(r - s, n));
    Chunk in = ring_chunk(count, n, mod(r - s - 1, n));
    // Meanwhile the left neighbour sends us its partial sum of chunk `in`,
    // and the right neighbour receives ours of chunk `out`.
    comm.sendrecv(data + out.begin, out.size(), right, scratch.data(), in.size(), left);
    add_floats(data + in.begin, scratch.data(), in.size());  // data[in.begin + i] += scratch[i]
  }
}

void ring_all_gather(Communicator& comm, float* data, int64_t count) {
  const int n = comm.size(), r = comm.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  for (int s = 0; s + 1 < n; ++s) {
    Chunk out = ring_chunk(count, n, mod(r + 1 - s, n));
    Chunk in = ring_chunk(count, n, mod(r - s, n));
    // Finished chunks circulate: what arrives from the left is final, so it
    // lands in place, over our partial copy.
    comm.sendrecv(data + out.begin, out.size(), right, data + in.begin, in.size(), left);
  }
}

}  // namespace dpt::ch04
