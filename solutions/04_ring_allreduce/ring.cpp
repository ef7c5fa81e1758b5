// solutions/04_ring_allreduce/ring.cpp — the ring's chunks, scatter-reduce
// and all-gather, and the all-reduce they make (spec: ch04.h).
//
// The plainest correct ring: each step one sendrecv of a whole chunk with the
// neighbours. Each rank sends 2(n−1) chunks of ≈ S/n bytes, 2(n−1)/n·S in
// all: the bandwidth-optimal all-reduce. A variant that moves chunks in
// cache-sized pieces lives in bench/ (beyond the exercise).
//
// `data` may be host memory or GPU memory: the only touches of its floats are
// dpt::add_floats and dpt::divide_floats, which run where they live (a CPU
// loop, or a kernel on this thread's stream that the next sendrecv waits for).
#include "ch04.h"

#include <algorithm>

#include "dpt/check.h"
#include "dpt/floats.h"

namespace dpt::ch04 {

// count = base·n + extra with 0 ≤ extra < n: the first `extra` chunks take
// base + 1 elements, the rest base. Chunk i starts after i chunks of base
// and min(i, extra) extra elements.
Range ring_chunk(int64_t count, int n, int i) {
  DPT_CHECK(count >= 0 && n >= 1 && i >= 0 && i < n,
            "ring_chunk: asked for chunk " << i << " of " << n << " over " << count
                                           << " elements; needs count >= 0, n >= 1 and 0 <= i < n");
  const int64_t base = count / n, extra = count % n;
  const int64_t begin = i * base + std::min<int64_t>(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

void ring_scatter_reduce(Communicator& comm, float* data, int64_t count) {
  const int n = comm.size(), r = comm.rank();
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  Floats scratch(data, ring_chunk(count, n, 0).size());  // in data's memory; chunk 0 is the largest
  for (int s = 0; s + 1 < n; ++s) {
    Range out = ring_chunk(count, n, mod(r - s, n));
    Range in = ring_chunk(count, n, mod(r - s - 1, n));
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
    Range out = ring_chunk(count, n, mod(r + 1 - s, n));
    Range in = ring_chunk(count, n, mod(r - s, n));
    // Finished chunks circulate: what arrives from the left is final, so it
    // lands in place, over our partial copy.
    comm.sendrecv(data + out.begin, out.size(), right, data + in.begin, in.size(), left);
  }
}

// Avg divides between the phases, and only the chunk this rank owns: S/n
// floats instead of S, and the all-gather then copies the divided bits to
// every rank. Dividing before the scatter-reduce would round every
// contribution and change the sum's bits; dividing the whole vector after the
// all-gather gives the same bits at n times the work.
void ring_all_reduce(Communicator& comm, float* data, int64_t count, ReduceOp op) {
  const int n = comm.size();
  ring_scatter_reduce(comm, data, count);
  if (op == ReduceOp::Avg) {
    const Range owned = ring_chunk(count, n, (comm.rank() + 1) % n);
    divide_floats(data + owned.begin, owned.size(), float(n));
  }
  ring_all_gather(comm, data, count);
}

}  // namespace dpt::ch04
