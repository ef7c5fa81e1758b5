// test_ch15_grid.cpp — the grid_place hole: on every grid of up to 16 ranks,
// each place taken once, each rank in its groups at its coordinates, every
// member sharing the other two, TP groups and stages consecutive ranks with
// stage 0 first, coordinates growing with the rank; and the same place as
// the harness's dpt::grid_coordinates on the axes tp, dp, pp (an oracle that
// shares no code with the hole).
#include "support/catch.h"

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ch15.h"
#include "dpt/grid.h"

using dpt::ch15::GridPlace;

namespace {
struct GridShape { int tp, dp, pp; };

std::vector<GridShape> every_grid_up_to(int most) {
  std::vector<GridShape> out;
  for (int tp = 1; tp <= most; ++tp)
    for (int dp = 1; tp * dp <= most; ++dp)
      for (int pp = 1; tp * dp * pp <= most; ++pp) out.push_back({tp, dp, pp});
  return out;
}

std::string grid_name(const GridShape& g) {
  return "tp " + std::to_string(g.tp) + " x dp " + std::to_string(g.dp) + " x pp " + std::to_string(g.pp);
}

bool consecutive(const std::vector<int>& ranks) {
  for (std::size_t i = 1; i < ranks.size(); ++i)
    if (ranks[i] != ranks[i - 1] + 1) return false;
  return true;
}
}  // namespace

TEST_CASE("grid_place: every place taken once, each rank in its three groups at its coordinates", "[ch15]") {
  for (const GridShape& g : every_grid_up_to(16)) {
    const int world = g.tp * g.dp * g.pp;
    std::set<std::tuple<int, int, int>> taken;
    std::vector<GridPlace> places;
    for (int r = 0; r < world; ++r) places.push_back(dpt::ch15::grid_place(r, g.tp, g.dp, g.pp));
    for (int r = 0; r < world; ++r) {
      const GridPlace& m = places[std::size_t(r)];
      INFO(grid_name(g) << ", rank " << r << ": t=" << m.t << " d=" << m.d << " p=" << m.p);
      REQUIRE((m.t >= 0 && m.t < g.tp && m.d >= 0 && m.d < g.dp && m.p >= 0 && m.p < g.pp));
      CHECK(taken.insert({m.t, m.d, m.p}).second);
      REQUIRE((m.tp_group.size() == std::size_t(g.tp) && m.dp_group.size() == std::size_t(g.dp) &&
               m.pp_group.size() == std::size_t(g.pp)));
      CHECK(m.tp_group[std::size_t(m.t)] == r);
      CHECK(m.dp_group[std::size_t(m.d)] == r);
      CHECK(m.pp_group[std::size_t(m.p)] == r);
      for (int i = 0; i < g.tp; ++i) {  // member i of the TP group: coordinate t = i, the same d and p
        const GridPlace& o = places[std::size_t(m.tp_group[std::size_t(i)])];
        CHECK((o.t == i && o.d == m.d && o.p == m.p));
      }
      for (int i = 0; i < g.dp; ++i) {
        const GridPlace& o = places[std::size_t(m.dp_group[std::size_t(i)])];
        CHECK((o.d == i && o.t == m.t && o.p == m.p));
      }
      for (int i = 0; i < g.pp; ++i) {
        const GridPlace& o = places[std::size_t(m.pp_group[std::size_t(i)])];
        CHECK((o.p == i && o.t == m.t && o.d == m.d));
      }
    }
  }
}

TEST_CASE("grid_place: TP groups and stages are consecutive ranks, stage 0 first, coordinates grow with the rank",
          "[ch15]") {
  for (const GridShape& g : every_grid_up_to(16)) {
    const int world = g.tp * g.dp * g.pp;
    int previous_stage = 0;
    for (int r = 0; r < world; ++r) {
      const GridPlace m = dpt::ch15::grid_place(r, g.tp, g.dp, g.pp);
      INFO(grid_name(g) << ", rank " << r);
      CHECK(consecutive(m.tp_group));  // neighbours: they exchange in every block
      CHECK(m.p >= previous_stage);    // with each place once: every stage a run of ranks, stage 0's first
      previous_stage = m.p;
      for (const std::vector<int>* group : {&m.dp_group, &m.pp_group})
        for (std::size_t i = 1; i < group->size(); ++i) CHECK((*group)[i - 1] < (*group)[i]);
    }
  }
}

TEST_CASE("grid_place: the same place as dpt::Grid's layout of the axes tp, dp, pp", "[ch15]") {
  for (const GridShape& g : every_grid_up_to(16)) {
    const std::vector<dpt::GridAxis> axes = {{"tp", g.tp, "--tp"}, {"dp", g.dp, "--dp"}, {"pp", g.pp, "--pp"}};
    for (int r = 0; r < g.tp * g.dp * g.pp; ++r) {
      const GridPlace m = dpt::ch15::grid_place(r, g.tp, g.dp, g.pp);
      INFO(grid_name(g) << ", rank " << r);
      CHECK(std::vector<int>{m.t, m.d, m.p} == dpt::grid_coordinates(axes, r));
    }
  }
}
