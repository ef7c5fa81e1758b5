// exercises/03_naive_dp/shard.cpp — hole: cut a global batch into shards.
// Contract: ch03::shard_indices in chapters/03_naive_dp/ch03.h.
//
// Pointers: DPT_CHECK(condition, "a sentence with " << numbers) from
// dpt/check.h throws the dpt::Error the contract asks for. Any rule that
// meets the postconditions is right; the tests try many world sizes.
// Hints, in tiers: docs/ch03_naive_dp.md, "Hints".
#include "ch03.h"

#include "dpt/check.h"

namespace dpt::ch03 {

std::vector<int64_t> shard_indices(const std::vector<int64_t>& global, int rank, int world) {
  (void)global, (void)rank, (void)world;
  throw NotImplemented("ch03: shard_indices — see exercises/03_naive_dp/shard.cpp");
}

}  // namespace dpt::ch03
