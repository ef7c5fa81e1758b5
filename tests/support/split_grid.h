// split_grid.h — Communicator::split on a TP x DP grid, shared by the threads
// tests (tests/core/test_comm_split.cpp) and the MPI ones (tests/mpi/).
//
// World rank w = d * tp + t sits in row d (its tensor-parallel group, color
// d) and column t (its data-parallel group, color t). Rows are split with key
// tp - t, so a row's ranks come out in reverse; columns with key d, in order.
//
// Each rank only records what it saw (run_grid); check_grid compares that, on
// the test's thread, with an oracle that shares no code with the library:
// the group's members worked out here from the (color, key) rule, and every
// collective's answer by a serial loop over the members' contributions
// (small integers, so sums are exact in any order).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/launch.h"
#include "support/catch.h"
#include "support/comm_contract.h"  // first_difference

namespace dpt_test {
namespace split {

/// Rank w's contribution, `count` small integers (exact sums).
inline std::vector<float> values(int w, int64_t count) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = float((w * 7 + i * 3) % 11) - 5;
  return v;
}

/// The world ranks passing `color` (colors[w] is w's), in the new rank order:
/// by keys[w], ties by w.
inline std::vector<int> members(const std::vector<int>& colors, const std::vector<int>& keys, int color) {
  std::vector<int> m;
  for (int w = 0; w < int(colors.size()); ++w)
    if (colors[w] == color) m.push_back(w);
  std::sort(m.begin(), m.end(), [&](int a, int b) { return keys[a] != keys[b] ? keys[a] < keys[b] : a < b; });
  return m;
}

/// What one rank saw in one group.
struct GroupSeen {
  int rank = -1, size = 0;
  std::vector<int> parents;  // parent_rank(r) for each r
  std::vector<float> sum, avg, max, scattered, gathered, broadcast, ring;
  int64_t ring_bytes = -1, gathered_ring_bytes = -1;  // own log; gather_traffic's
};

constexpr int64_t kCount = 6;  // floats per rank (a multiple of every group size here)

/// Every call this test checks, on one group.
inline GroupSeen exercise(dpt::Communicator& g, int w) {
  GroupSeen s;
  s.rank = g.rank();
  s.size = g.size();
  for (int r = 0; r < g.size(); ++r) s.parents.push_back(g.parent_rank(r));
  const std::vector<float> mine = values(w, kCount);
  s.sum = s.avg = s.max = mine;
  g.all_reduce(s.sum.data(), kCount, dpt::ReduceOp::Sum);
  g.all_reduce(s.avg.data(), kCount, dpt::ReduceOp::Avg);
  g.all_reduce(s.max.data(), kCount, dpt::ReduceOp::Max);
  s.scattered.resize(kCount / g.size());
  g.reduce_scatter(mine.data(), s.scattered.data(), kCount / g.size(), dpt::ReduceOp::Sum);
  s.gathered.resize(kCount * g.size());
  g.all_gather(mine.data(), s.gathered.data(), kCount);
  s.broadcast = mine;
  g.broadcast(s.broadcast.data(), kCount, g.size() - 1);
  g.barrier();
  // a ring in group numbering: send to rank+1, receive from rank-1
  const int n = g.size(), right = (g.rank() + 1) % n, left = (g.rank() + n - 1) % n;
  s.ring.resize(kCount);
  g.sendrecv(mine.data(), kCount, right, s.ring.data(), kCount, left);
  s.ring_bytes = g.traffic().bytes(g.rank(), right);
  dpt::TrafficLog all = g.gather_traffic();
  s.gathered_ring_bytes = all.world() == n ? all.bytes(left, g.rank()) : -2;
  return s;
}

/// One rank's record of the grid test.
struct GridSeen {
  GroupSeen row, col;
  int64_t world_bytes = -1;  // the world log after both groups' traffic
};

/// Splits ctx.comm into rows and columns of a tp x (world / tp) grid and
/// exercises both, one after the other.
inline GridSeen run_grid(dpt::Context& ctx, int tp) {
  const int w = ctx.rank, t = w % tp, d = w / tp;
  std::unique_ptr<dpt::Communicator> row = ctx.comm.split(d, tp - t);
  std::unique_ptr<dpt::Communicator> col = ctx.comm.split(t, d);
  GridSeen seen;
  seen.row = exercise(*row, w);
  seen.col = exercise(*col, w);
  seen.world_bytes = ctx.comm.traffic().total_bytes();
  return seen;
}

/// Checks world rank w's record of one group against the oracle; `which`
/// names the group for the message.
inline void check_group(const GroupSeen& s, const std::vector<int>& m, int w, const std::string& which) {
  INFO("world rank " << w << ", its " << which << " (world ranks in new order: " << ::Catch::Detail::stringify(m)
                     << ")");
  const int n = int(m.size());
  const int me = int(std::find(m.begin(), m.end(), w) - m.begin());
  {
    INFO("the sub-communicator's ranks follow (key, parent rank), and parent_rank maps them back");
    CHECK(s.size == n);
    CHECK(s.rank == me);
    CHECK(s.parents == m);  // a world parent: parent ranks are world ranks
  }
  std::vector<float> sum(kCount, 0), max(kCount, -1e9f), avg(kCount), gathered, broadcast = values(m[n - 1], kCount);
  for (int member : m) {
    std::vector<float> v = values(member, kCount);
    gathered.insert(gathered.end(), v.begin(), v.end());
    for (int64_t i = 0; i < kCount; ++i) {
      sum[i] += v[i];
      max[i] = std::max(max[i], v[i]);
    }
  }
  for (int64_t i = 0; i < kCount; ++i) avg[i] = sum[i] / float(n);
  const int64_t chunk = kCount / n;
  std::vector<float> scattered(sum.begin() + me * chunk, sum.begin() + (me + 1) * chunk);
  INFO("each collective on the group combines exactly the group's members");
  CHECK(first_difference(s.sum, sum) == "");
  CHECK(first_difference(s.avg, avg) == "");
  CHECK(first_difference(s.max, max) == "");
  CHECK(first_difference(s.scattered, scattered) == "");
  CHECK(first_difference(s.gathered, gathered) == "");
  CHECK(first_difference(s.broadcast, broadcast) == "");
  INFO("sendrecv in group numbering reaches the group's neighbours, logged in the group's log");
  CHECK(first_difference(s.ring, values(m[(me + n - 1) % n], kCount)) == "");
  CHECK(s.ring_bytes == 4 * kCount);
  CHECK(s.gathered_ring_bytes == 4 * kCount);
}

/// Checks world rank w's grid record (tp columns; world ranks in all).
inline void check_grid(const GridSeen& seen, int w, int tp, int world) {
  std::vector<int> row_color(world), row_key(world), col_color(world), col_key(world);
  for (int r = 0; r < world; ++r) {
    row_color[r] = r / tp;
    row_key[r] = tp - r % tp;
    col_color[r] = r % tp;
    col_key[r] = r / tp;
  }
  check_group(seen.row, members(row_color, row_key, w / tp), w, "row (tensor-parallel group)");
  check_group(seen.col, members(col_color, col_key, w % tp), w, "column (data-parallel group)");
  INFO("world rank " << w << ": a group's sends are logged in the group's log, not the world's");
  CHECK(seen.world_bytes == 0);
}

}  // namespace split
}  // namespace dpt_test
