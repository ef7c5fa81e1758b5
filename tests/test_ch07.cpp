// test_ch07.cpp — chapter 07's partition holes, partition_parameters and
// shard_bounds, each check naming the property it pins (covers every
// parameter, equal shards, least padding; N+1 bounds from 0 to the range's
// size, in rank order, each rank owning exactly its shard's elements).
// Oracles: partitions written by hand, and an element-by-element owner count
// (x / S). The stage holes: test_ch07_stages.cpp; use_layer:
// test_ch07_layers.cpp; the program: test_ch07_chapter.cpp and
// test_ch07_checkpoint.cpp.
#include "support/catch.h"
#include <algorithm>
#include <random>
#include <sstream>
#include <string>
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
    if (p.padded != p.shard * g.world)
      FAIL("the flat buffer's length N·S must be N equal shards of S: " << g.world << " x " << p.shard << " = "
                                                                         << p.shard * g.world << ", not " << p.padded);
    if (p.shard * g.world < g.psi)
      FAIL("covers every parameter: N·S < Ψ, so the last " << g.psi - p.shard * g.world
                                                           << " parameters belong to no shard");
    if ((p.shard - 1) * g.world >= g.psi)
      FAIL("padded least: the padding N·S - Ψ = " << p.padded - g.psi << " floats is more than the least "
           "among the partitions into N equal shards that cover all " << g.psi << " parameters (every extra float "
           "of S costs N floats)");
    CHECK(p.shard == g.shard);
  }
  // The spec: a bad value is an error naming it.
  CHECK_THROWS_WITH(partition_parameters(-5, 4), contains_text("-5"));
  CHECK_THROWS_WITH(partition_parameters(10, -3), contains_text("-3"));
  CHECK_THROWS(partition_parameters(0, 4));
  CHECK_THROWS(partition_parameters(10, 0));
}

namespace {
// The first property of shard_bounds's postcondition that `bounds` breaks, in
// words, or "" — against the owner count of every element (x / S), the oracle.
std::string broken_property(const Partition& part, Range range, const std::vector<int64_t>& bounds) {
  const int n = part.world;
  std::ostringstream why;
  if (int(bounds.size()) != n + 1) {
    why << "N+1 bounds: got " << bounds.size() << " for N = " << n << " ranks (rank r owns [b[r], b[r+1]))";
    return why.str();
  }
  if (bounds.front() != 0) {
    why << "starts at 0: b[0] = " << bounds.front() << "; the bounds are offsets relative to range.begin";
    return why.str();
  }
  for (int r = 0; r < n; ++r)
    if (bounds[std::size_t(r) + 1] < bounds[std::size_t(r)]) {
      why << "in rank order: b[" << r + 1 << "] = " << bounds[std::size_t(r) + 1] << " < b[" << r << "] = " << bounds[std::size_t(r)]
          << " (the bounds never decrease)";
      return why.str();
    }
  if (bounds.back() != range.size()) {
    why << "covers the range: b[N] = " << bounds.back() << ", the range has " << range.size()
        << " elements, each owned by exactly one rank";
    return why.str();
  }
  std::vector<int64_t> owned(std::size_t(n), 0);
  for (int64_t x = range.begin; x < range.end; ++x) ++owned[std::size_t(x / part.shard)];
  for (int r = 0; r < n; ++r)
    if (bounds[std::size_t(r) + 1] - bounds[std::size_t(r)] != owned[std::size_t(r)]) {
      why << "each rank owns its shard's elements: rank " << r << " gets " << bounds[std::size_t(r) + 1] - bounds[std::size_t(r)]
          << " elements of the range, but " << owned[std::size_t(r)] << " of them lie in its shard [" << r * part.shard
          << ", " << (r + 1) * part.shard << ")";
      return why.str();
    }
  return "";
}
std::string listed(const std::vector<int64_t>& v) {
  std::string text = "{";
  for (std::size_t i = 0; i < v.size(); ++i) text += (i ? ", " : "") + std::to_string(v[i]);
  return text + "}";
}
}  // namespace

TEST_CASE("shard_bounds: N+1 offsets from 0 to the range's size, in rank order, each rank its shard's elements",
          "[ch07]") {
  Partition p{10, 3, 4, 12};  // written by hand, not by partition_parameters
  std::vector<Range> ranges = {{0, 12}, {3, 9}, {5, 6}, {12, 12}, {0, 0}, {8, 12}};
  std::mt19937 rng(7);
  std::vector<Partition> parts(ranges.size(), p);
  for (int trial = 0; trial < 300; ++trial) {
    int world = 1 + int(rng() % 6);
    int64_t psi = 1 + int64_t(rng() % 200), shard = (psi + world - 1) / world;
    Partition part{psi, world, shard, shard * world};
    int64_t a = int64_t(rng() % std::size_t(part.padded + 1)), b = int64_t(rng() % std::size_t(part.padded + 1));
    parts.push_back(part);
    ranges.push_back({std::min(a, b), std::max(a, b)});
  }
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    std::vector<int64_t> bounds = shard_bounds(parts[i], ranges[i]);
    std::string why = broken_property(parts[i], ranges[i], bounds);
    if (!why.empty())
      FAIL("N = " << parts[i].world << ", S = " << parts[i].shard << ", range [" << ranges[i].begin << ", "
                  << ranges[i].end << "): shard_bounds returned " << listed(bounds) << "; broken: " << why);
  }
  // The spec: a range outside the flat buffer is an error.
  CHECK_THROWS(shard_bounds(p, {4, 13}));
  CHECK_THROWS(shard_bounds(p, {-1, 3}));
}
