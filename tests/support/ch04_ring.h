// ch04_ring.h — what chapter 04's ring tests share: the chunking found
// another way than ring_chunk (dealt out element by element), and a threads
// world that runs one ring phase on each rank's exact input
// (support/exact_sums.h) and returns every rank's vector and the traffic matrix.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "ch04.h"
#include "support/exact_sums.h"
#include "support/ranks.h"

namespace dpt_test {

// The chunking the contract pins down, found another way than ring_chunk's:
// deal the elements out one at a time to the chunks 0, 1, …, n−1, 0, 1, …
// (sizes differ by at most one, the larger first), then lay the chunks end
// to end.
inline dpt::Range dealt_chunk(int64_t count, int n, int i) {
  std::vector<int64_t> sizes(std::size_t(n), 0);
  for (int64_t e = 0; e < count; ++e) ++sizes[std::size_t(e % n)];
  dpt::Range chunk;
  for (int c = 0; c < i; ++c) chunk.begin += sizes[std::size_t(c)];
  chunk.end = chunk.begin + sizes[std::size_t(i)];
  return chunk;
}

// Runs `phase` on every rank of a `world`-rank threads world with each rank's
// input vector; returns each rank's vector afterwards and the traffic matrix.
struct RingRun {
  std::vector<std::vector<float>> data;
  std::vector<std::vector<int64_t>> traffic;
};
inline RingRun run_ring(int world, int64_t count, const std::function<void(dpt::Communicator&, std::vector<float>&)>& phase) {
  RingRun out;
  out.data.resize(world);
  std::mutex mutex;
  dpt_test::run_ranks(world, [&](dpt::Context& ctx) {
    std::vector<float> data(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) data[i] = input(ctx.rank, i);
    phase(ctx.comm, data);
    ctx.comm.barrier();  // every send is logged before rank 0 reads the table
    std::lock_guard<std::mutex> lock(mutex);
    out.data[ctx.rank] = data;
    if (ctx.is_root()) out.traffic = ctx.comm.traffic().matrix();
  });
  return out;
}

inline void all_reduce_sum(dpt::Communicator& comm, std::vector<float>& d) {
  dpt::ch04::ring_all_reduce(comm, d.data(), int64_t(d.size()), dpt::ReduceOp::Sum);
}

}  // namespace dpt_test
