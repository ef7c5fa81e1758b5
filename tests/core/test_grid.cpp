// test_grid.cpp — dpt::Grid on rank threads: each axis' group holds exactly
// the ranks that differ from this one only on that axis, ranked by their
// coordinate there (support/grid_oracle.h counts the coordinates itself),
// and sizes that do not multiply to the world are one sentence naming the flags.
#include "support/catch.h"

#include <mutex>
#include <string>
#include <vector>

#include "dpt/check.h"
#include "dpt/grid.h"
#include "support/grid_oracle.h"
#include "support/ranks.h"

using namespace dpt;
namespace grid = dpt_test::grid;

TEST_CASE("grid: every axis' group holds the ranks that differ only on that axis, for 2 to 4 axes", "[grid]") {
  const std::vector<std::vector<int>> shapes = {{2, 2}, {2, 1, 2}, {4, 1}, {1, 4}, {3, 2}, {2, 3}, {2, 2, 2}, {2, 1, 3, 2}};
  for (const std::vector<int>& sizes : shapes) {
    int world = 1;
    for (int n : sizes) world *= n;
    auto seen = std::vector<std::vector<grid::AxisSeen>>(std::size_t(world));
    dpt_test::run_ranks(world, [&](Context& ctx) { seen[std::size_t(ctx.rank)] = grid::run_grid(ctx, sizes); });
    for (int r = 0; r < world; ++r) grid::check_rank(seen[std::size_t(r)], r, sizes);
  }
}

TEST_CASE("grid: sizes that do not multiply to the world are one sentence naming the flags", "[grid]") {
  const std::vector<GridAxis> pipeline = {{"pp", 4, "--stages"}, {"dp", 1, "--dp"}};
  CHECK(grid_problem(pipeline, 4).empty());
  CHECK(grid_problem(pipeline, 1) ==
        "--stages 4 x --dp 1 = 4 ranks, but the run has 1 rank: start 4 ranks, or change --stages or --dp");
  const std::string three = grid_problem({{"tp", 2, "--tp"}, {"pp", 2, "--pp"}, {"dp", 3, "--dp"}}, 8);
  CHECK(three == "--tp 2 x --pp 2 x --dp 3 = 12 ranks, but the run has 8 ranks: start 12 ranks, or change --tp, --pp or --dp");
  CHECK(grid_problem({{"tp", 0, "--tp"}, {"dp", 4, "--dp"}}, 4) == "--tp 0 is not a number of ranks: give 1 or more");
  bool threw = false;
  dpt_test::run_ranks(2, [&](Context& ctx) {
    try {
      Grid g(ctx.comm, pipeline);
    } catch (const Error& e) {
      if (std::string(e.what()).find("--stages 4 x --dp 1 = 4 ranks, but the run has 2 ranks") != std::string::npos && ctx.rank == 0)
        threw = true;
    }
  });
  CHECK(threw);
}

TEST_CASE("grid: asking for an axis it does not have names the axes it has", "[grid]") {
  dpt_test::run_ranks(1, [&](Context& ctx) {
    Grid g(ctx.comm, {{"tp", 1, "--tp"}, {"dp", 1, "--dp"}});
    CHECK(g.coord("tp") == 0);
    CHECK_THROWS_WITH(g.group("pp"), contains_text("its axes are tp, dp"));
  });
}
