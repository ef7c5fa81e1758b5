// ring.cpp — chapter 04's ring as one of chapter 08's all-reduces.
//
// 2(n−1) steps of one chunk of S/n bytes to the right neighbour:
//   T = 2(n−1)·α + 2(n−1)/n · S·β      (bandwidth-optimal, latency linear in n)
#include "ch04.h"
#include "ch08.h"
#include "dpt/check.h"

namespace dpt::ch08 {

void ring_all_reduce(const Team& team, float* data, int64_t count) {
  DPT_CHECK(team.size() == team.comm().size(), "ring_all_reduce runs on the whole world (chapter 04's ring), not on a "
                                                   "team of " << team.size() << " of " << team.comm().size() << " ranks");
  ch04::ring_all_reduce(team.comm(), data, count, ReduceOp::Sum);
}

}  // namespace dpt::ch08
