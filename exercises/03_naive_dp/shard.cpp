// exercises/03_naive_dp/shard.cpp — hole: manual sharding of a global batch.
//
// The global batch of step s has N·M sample indices (the same list on every
// rank: same seed, same sampler). Rank r trains on the r-th contiguous slice:
//
//     global = [ g0 g1 … g(M-1) | gM … g(2M-1) | … ]
//                 rank 0            rank 1
//
// Hints: M = global.size() / world; check that it divides first with
// DPT_CHECK(condition, "a message with " << numbers) from dpt/check.h — a
// batch that does not divide must be a clear error, not a silently dropped
// sample.
#include "ch03.h"

#include "dpt/check.h"

namespace dpt::ch03 {

std::vector<int64_t> shard_indices(const std::vector<int64_t>& global, int rank, int world) {
  (void)global, (void)rank, (void)world;
  throw NotImplemented("ch03: shard_indices — see exercises/03_naive_dp/shard.cpp");
}

}  // namespace dpt::ch03
