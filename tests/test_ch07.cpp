// test_ch07.cpp — chapter 07's holes against oracles that share none of their
// code (hand-written golden partitions, an element-by-element owner count,
// serial sums, the library's reduce-scatter, the traffic log, the device's
// ledger), then the chapter: every stage gives stage 0's weights bit for bit
// (threads, mpirun -np 2 and 4) and stage 0 gives one device's; memory per
// rank follows the ZeRO formulas; bytes per step follow theory; a capped
// device fails at stage 0 and trains at stage 3.
//
// Here: partition_parameters and shard_bounds; the stages in
// test_ch07_stages.cpp, the layers in test_ch07_layers.cpp, the chapter's
// program in test_ch07_chapter.cpp and its sharded checkpoints in
// test_ch07_checkpoint.cpp.
#include "support/catch.h"
#include <algorithm>
#include <random>
#include <vector>

#include "ch07.h"

using namespace dpt;
using namespace dpt::ch07;

// ----------------------------------------------------------------------------
// partition_parameters, shard_bounds

TEST_CASE("partition_parameters: equal shards that own every parameter, padded least", "[ch07]") {
  struct Golden { int64_t psi; int world; int64_t shard, padded; };
  for (Golden g : {Golden{559, 4, 140, 560}, Golden{559, 3, 187, 561}, Golden{8, 4, 2, 8}, Golden{1, 3, 1, 3},
                   Golden{7, 1, 7, 7}, Golden{216586, 4, 54147, 216588}}) {
    Partition p = partition_parameters(g.psi, g.world);
    INFO("Ψ = " << g.psi << ", N = " << g.world << ": got S = " << p.shard << ", N·S = " << p.padded);
    CHECK(p.psi == g.psi);
    CHECK(p.world == g.world);
    if (p.shard * g.world < g.psi)
      FAIL("N·S < Ψ: the last " << g.psi - p.shard * g.world << " parameters belong to no shard (S must round up)");
    CHECK(p.shard == g.shard);  // the least S with N·S >= Ψ
    CHECK(p.padded == g.padded);
  }
  // The spec: a bad value is an error naming it.
  CHECK_THROWS_WITH(partition_parameters(-5, 4), contains_text("-5"));
  CHECK_THROWS_WITH(partition_parameters(10, -3), contains_text("-3"));
  CHECK_THROWS(partition_parameters(0, 4));
  CHECK_THROWS(partition_parameters(10, 0));
}

TEST_CASE("shard_bounds: golden ranges and an element-by-element owner count", "[ch07][needs:partition_parameters]") {
  Partition p{10, 3, 4, 12};  // written by hand, not by partition_parameters
  CHECK(shard_bounds(p, {0, 12}) == std::vector<int64_t>{0, 4, 8, 12});
  CHECK(shard_bounds(p, {3, 9}) == std::vector<int64_t>{0, 1, 5, 6});   // 3 ∈ rank 0, 4..7 rank 1, 8 rank 2
  CHECK(shard_bounds(p, {5, 6}) == std::vector<int64_t>{0, 0, 1, 1});   // a one-float range: rank 1 alone
  CHECK(shard_bounds(p, {12, 12}) == std::vector<int64_t>{0, 0, 0, 0});
  CHECK_THROWS(shard_bounds(p, {4, 13}));
  CHECK_THROWS(shard_bounds(p, {-1, 3}));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    int world = 1 + int(rng() % 6);
    Partition part = partition_parameters(1 + int64_t(rng() % 200), world);
    int64_t a = int64_t(rng() % std::size_t(part.padded + 1)), b = int64_t(rng() % std::size_t(part.padded + 1));
    Range range{std::min(a, b), std::max(a, b)};
    std::vector<int64_t> bounds = shard_bounds(part, range);
    REQUIRE(bounds.size() == std::size_t(world + 1));
    std::vector<int64_t> owned(std::size_t(world), 0);  // the oracle: who owns each element, by division
    for (int64_t x = range.begin; x < range.end; ++x) ++owned[std::size_t(x / part.shard)];
    INFO("trial " << trial << " N " << world << " S " << part.shard << " range " << range.begin << ".." << range.end
                  << ": rank r's count b[r+1] - b[r] must be the number of the range's elements in its shard");
    CHECK(bounds.front() == 0);
    for (int r = 0; r < world; ++r) CHECK(bounds[std::size_t(r) + 1] - bounds[std::size_t(r)] == owned[std::size_t(r)]);
  }
}
