// solutions/07_zero/partition.cpp — chapter 07's flat partition: equal shards
// of ⌈Ψ/N⌉ floats, and who owns which part of a range. The plainest correct code.
#include <algorithm>

#include "ch07.h"
#include "dpt/check.h"

namespace dpt::ch07 {

Partition partition_parameters(int64_t psi, int world) {
  DPT_CHECK(psi >= 1, "partition: the model must have at least one parameter, got " << psi);
  DPT_CHECK(world >= 1, "partition: need at least one rank, got a world of " << world);
  Partition p;
  p.psi = psi, p.world = world;
  p.shard = (psi + world - 1) / world;  // ⌈Ψ/N⌉: the last shard ends in < N zeros of padding
  p.padded = p.shard * world;
  return p;
}

std::vector<int64_t> shard_bounds(const Partition& part, Range range) {
  DPT_CHECK(0 <= range.begin && range.begin <= range.end && range.end <= part.padded,
            "range [" << range.begin << ", " << range.end << ") is not inside the flat buffer [0, " << part.padded
                      << ")");
  std::vector<int64_t> bounds;
  for (int r = 0; r <= part.world; ++r)  // rank r's shard starts at r·S; clamp it into the range
    bounds.push_back(std::clamp(r * part.shard - range.begin, int64_t(0), range.size()));
  return bounds;
}

}  // namespace dpt::ch07
