// exercises/07_zero/partition.cpp — holes: cut Ψ parameters into N equal
// shards, and say who owns which part of a flat range.
//
// Contracts: chapters/07_zero/ch07.h (partition_parameters, shard_bounds).
// Hints, one tier at a time: docs/ch07_zero.md, "Hints".
//  * Refuse bad input with DPT_CHECK(cond, "a sentence " << value) (dpt/check.h).
//  * No floating point: Ψ can be larger than a float counts exactly.
#include "ch07.h"

#include "dpt/check.h"

namespace dpt::ch07 {

Partition partition_parameters(int64_t psi, int world) {
  (void)psi, (void)world;
  throw NotImplemented("ch07: partition_parameters — see exercises/07_zero/partition.cpp");
}

std::vector<int64_t> shard_bounds(const Partition& part, Range range) {
  (void)part, (void)range;
  throw NotImplemented("ch07: shard_bounds — see exercises/07_zero/partition.cpp");
}

}  // namespace dpt::ch07
