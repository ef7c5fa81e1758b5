// grid_oracle.h — what dpt::Grid gave one rank, and the check of it against
// coordinates worked out here, shared by the threads test
// (tests/core/test_grid.cpp) and the MPI one (tests/mpi/test_grid_mpi.cpp).
//
// The oracle numbers the world by nested loops, the last axis outermost (as
// one counts hours, minutes, seconds), with no division: rank r's
// coordinates are the loop indices at the r-th step. A group along axis a
// is then every rank whose coordinates match r's on every other axis, in
// increasing coordinate on a.
#pragma once

#include <string>
#include <vector>

#include "dpt/grid.h"
#include "dpt/launch.h"
#include "support/catch.h"

namespace dpt_test {
namespace grid {

/// table[r] = world rank r's coordinates, by counting (no code shared with dpt::Grid).
inline std::vector<std::vector<int>> coordinates_by_counting(const std::vector<int>& sizes) {
  std::vector<std::vector<int>> table;
  std::vector<int> c(sizes.size(), 0);
  int world = 1;
  for (int n : sizes) world *= n;
  for (int r = 0; r < world; ++r) {
    table.push_back(c);
    for (std::size_t a = 0; a < c.size(); ++a) {  // the first axis ticks fastest, carrying into the next
      if (++c[a] < sizes[a]) break;
      c[a] = 0;
    }
  }
  return table;
}

/// What one rank saw on each axis.
struct AxisSeen {
  int coord = -1, group_rank = -1, group_size = 0;
  std::vector<int> members;  // the group's members as world ranks, in group-rank order
  float sum_of_world_ranks = -1;  // an all-reduce in the group: the members' world ranks summed
};

inline std::vector<dpt::GridAxis> axes_of(const std::vector<int>& sizes) {
  std::vector<dpt::GridAxis> axes;
  for (std::size_t a = 0; a < sizes.size(); ++a) axes.push_back({"axis" + std::to_string(a), sizes[a], "--n" + std::to_string(a)});
  return axes;
}

/// On every rank: builds the grid and records what each axis' group holds.
inline std::vector<AxisSeen> run_grid(dpt::Context& ctx, const std::vector<int>& sizes) {
  dpt::Grid grid(ctx.comm, axes_of(sizes));
  std::vector<AxisSeen> seen;
  for (const dpt::GridAxis& axis : grid.axes()) {
    dpt::Communicator& g = grid.group(axis.name);
    AxisSeen s;
    s.coord = grid.coord(axis.name);
    s.group_rank = g.rank();
    s.group_size = g.size();
    for (int r = 0; r < g.size(); ++r) s.members.push_back(g.parent_rank(r));
    s.sum_of_world_ranks = float(ctx.rank);
    g.all_reduce(&s.sum_of_world_ranks, 1, dpt::ReduceOp::Sum);
    seen.push_back(s);
  }
  return seen;
}

/// Checks rank `rank`'s record against the counted coordinates.
inline void check_rank(const std::vector<AxisSeen>& seen, int rank, const std::vector<int>& sizes) {
  const std::vector<std::vector<int>> table = coordinates_by_counting(sizes);
  REQUIRE(seen.size() == sizes.size());
  for (std::size_t a = 0; a < sizes.size(); ++a) {
    std::vector<int> expected(std::size_t(sizes[a]), -1);  // expected[k]: the member at coordinate k on axis a
    for (int w = 0; w < int(table.size()); ++w) {
      bool same_elsewhere = true;
      for (std::size_t b = 0; b < sizes.size(); ++b) same_elsewhere &= b == a || table[w][b] == table[rank][b];
      if (same_elsewhere) expected[std::size_t(table[w][a])] = w;
    }
    float sum = 0;
    for (int w : expected) sum += float(w);
    INFO("world rank " << rank << ", axis " << a << " of size " << sizes[a]);
    CHECK(seen[a].coord == table[rank][a]);
    CHECK(seen[a].group_rank == table[rank][a]);
    CHECK(seen[a].group_size == sizes[a]);
    CHECK(seen[a].members == expected);
    CHECK(seen[a].sum_of_world_ranks == sum);
  }
}

}  // namespace grid
}  // namespace dpt_test
