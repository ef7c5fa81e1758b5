// solutions/15_3d_parallel/grid_place.cpp — a rank's place on the grid. The
// contract fixes the order of the axes: TP groups consecutive puts t in the
// fastest digit, stages consecutive puts p in the slowest, so d is the
// middle one: rank = t + tp·(d + dp·p), a number in mixed radix.
#include "ch15.h"
#include "dpt/check.h"

namespace dpt::ch15 {

GridPlace grid_place(int rank, int tp, int dp, int pp) {
  DPT_CHECK(tp >= 1 && dp >= 1 && pp >= 1 && rank >= 0 && rank < tp * dp * pp,
            "grid_place: rank " << rank << " on a grid of tp " << tp << " x dp " << dp << " x pp " << pp);
  GridPlace g;
  g.t = rank % tp, g.d = rank / tp % dp, g.p = rank / (tp * dp);
  auto at = [&](int t, int d, int p) { return t + tp * (d + dp * p); };
  for (int i = 0; i < tp; ++i) g.tp_group.push_back(at(i, g.d, g.p));
  for (int i = 0; i < dp; ++i) g.dp_group.push_back(at(g.t, i, g.p));
  for (int i = 0; i < pp; ++i) g.pp_group.push_back(at(g.t, g.d, i));
  return g;
}

}  // namespace dpt::ch15
