// test_grid_mpi.cpp — dpt::Grid under a real mpirun with 4 processes: on
// 2 x 2 and 2 x 1 x 2, each axis' group holds exactly the ranks that differ
// only on that axis (support/grid_oracle.h counts the coordinates itself).
// Each process checks its own rank's record after launch() returns.
#include "support/catch.h"

#include <vector>

#include "dpt/launch.h"
#include "support/grid_oracle.h"
#include "support/mpi_world.h"

using dpt::Context;
using dpt_test::mpi;
using dpt_test::world_size;

TEST_CASE("mpi grid: on 4 processes, 2 x 2 and 2 x 1 x 2, each axis' group is the line through the rank") {
  if (world_size() != 4) return;  // every process skips alike: launches stay in step
  for (const std::vector<int>& sizes : {std::vector<int>{2, 2}, std::vector<int>{2, 1, 2}}) {
    std::vector<dpt_test::grid::AxisSeen> seen;
    int rank = -1;
    dpt::launch(mpi(), [&](Context& ctx) {
      rank = ctx.rank;
      seen = dpt_test::grid::run_grid(ctx, sizes);
    });
    dpt_test::grid::check_rank(seen, rank, sizes);
  }
}
