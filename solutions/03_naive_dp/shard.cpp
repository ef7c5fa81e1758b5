// solutions/03_naive_dp/shard.cpp — rank r's contiguous slice of the global batch.
#include "ch03.h"

#include "dpt/check.h"

namespace dpt::ch03 {

std::vector<int64_t> shard_indices(const std::vector<int64_t>& global, int rank, int world) {
  DPT_CHECK(world >= 1 && rank >= 0 && rank < world, "shard_indices: rank " << rank << " of " << world);
  int64_t total = int64_t(global.size());
  DPT_CHECK(total % world == 0, "a global batch of " << total << " samples does not divide among " << world
                                                     << " ranks; pick --batch per rank so that it does");
  int64_t per_rank = total / world;
  return {global.begin() + rank * per_rank, global.begin() + (rank + 1) * per_rank};
}

}  // namespace dpt::ch03
