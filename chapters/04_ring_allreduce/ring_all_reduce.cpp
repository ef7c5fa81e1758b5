// ring_all_reduce.cpp — what chapter 04 provides around the student's two
// phases: chunking and the composition into an all-reduce.
#include "ch04.h"

#include <algorithm>

#include "dpt/check.h"
#include "dpt/floats.h"

namespace dpt::ch04 {

Chunk ring_chunk(int64_t count, int n, int i) {
  DPT_CHECK(n >= 1 && i >= 0 && i < n, "ring_chunk: chunk " << i << " of " << n);
  int64_t base = count / n, extra = count % n;
  int64_t begin = i * base + std::min<int64_t>(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

void ring_all_reduce(Communicator& comm, float* data, int64_t count, ReduceOp op) {
  ring_scatter_reduce(comm, data, count);
  if (op == ReduceOp::Avg) {
    // Between the phases each rank scales only the chunk it owns, (r+1) mod n:
    // S/n floats instead of S, and the all-gather spreads the scaled chunks.
    Chunk owned = ring_chunk(count, comm.size(), (comm.rank() + 1) % comm.size());
    // data may be GPU memory: scale where it lives (the bits of `*= 1/n`).
    scale_floats(data + owned.begin, owned.size(), 1.0f / float(comm.size()));
  }
  ring_all_gather(comm, data, count);
}

}  // namespace dpt::ch04
