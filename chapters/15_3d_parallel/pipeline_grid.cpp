// pipeline_grid.cpp — the tp × dp × pp grid and the check of its groups (pipeline_grid.h).
#include "pipeline_grid.h"

#include "dpt/check.h"
#include "dpt/report.h"

namespace dpt::ch15 {

Ch15Grid::Ch15Grid(Context& ctx, int tp, int dp, int pp) {
  grid_ = std::make_unique<Grid>(ctx.comm, std::vector<GridAxis>{{"tp", tp, "--tp"}, {"dp", dp, "--dp"}, {"pp", pp, "--pp"}});
  if (dp > 1) dp_ = &grid_->group("dp");
}

namespace {
std::string bracketed(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return "[" + s + "]";
}

std::string place_text(int t, int d, int p, const std::vector<int>& tp, const std::vector<int>& dp,
                       const std::vector<int>& pp) {
  return str("TP group ", bracketed(tp), " as t=", t, ", DP group ", bracketed(dp), " as d=", d, ", PP group ",
             bracketed(pp), " as p=", p);
}
}  // namespace

GridFindings check_grid_groups(Context& ctx, Ch15Grid& grid, const GridPlace* mine) {
  const int T = grid.tp_size(), D = grid.dp_size(), P = grid.pp_size();
  const std::vector<int> tp = grid.tp().all_gather(ctx.rank), pp = grid.pp().all_gather(ctx.rank);
  const std::vector<int> dp = grid.dp() ? grid.dp()->all_gather(ctx.rank) : std::vector<int>{ctx.rank};
  DPT_CHECK(tp.size() == std::size_t(T) && dp.size() == std::size_t(D) && pp.size() == std::size_t(P),
            "rank " << ctx.rank << "'s groups have " << tp.size() << ", " << dp.size() << " and " << pp.size()
                    << " members, expected tp " << T << ", dp " << D << " and pp " << P << ": the split is wrong");
  const int t = grid.tp_rank(), d = grid.dp_rank(), p = grid.pp_rank();
  // Does this rank's grid_place say what the communicators hold? (-1: not asked)
  const int agrees = !mine ? -1 : mine->t == t && mine->d == d && mine->p == p && mine->tp_group == tp &&
                                      mine->dp_group == dp && mine->pp_group == pp;
  // Every rank's record, gathered on the world: rank, t, d, p, agrees, then its members.
  std::vector<int> record = {ctx.rank, t, d, p, agrees};
  for (const std::vector<int>* g : {&tp, &dp, &pp}) record.insert(record.end(), g->begin(), g->end());
  const std::size_t width = record.size();
  std::vector<int> all(width * std::size_t(ctx.world));
  ctx.comm.all_gather(record.data(), all.data(), int64_t(width));
  GridFindings found;
  if (!ctx.is_root()) return found;
  for (int r = 0; r < ctx.world; ++r) {
    const int* rec = all.data() + std::size_t(r) * width;
    const std::vector<int> tp_seen(rec + 5, rec + 5 + T), dp_seen(rec + 5 + T, rec + 5 + T + D),
        pp_seen(rec + 5 + T + D, rec + 5 + T + D + P);
    const std::string actual = place_text(rec[1], rec[2], rec[3], tp_seen, dp_seen, pp_seen);
    found.lines.push_back(str("rank ", r, ": ", actual));
    if (rec[4] != 0) continue;
    if (++found.ranks_off > 1) continue;
    const GridPlace said = grid_place(r, T, D, P);  // written: it ran on every rank
    found.disagreement = str("rank ", r, ": grid_place says ", place_text(said.t, said.d, said.p, said.tp_group,
                                                                         said.dp_group, said.pp_group),
                             "; dpt::Grid built ", actual);
  }
  return found;
}

namespace {
// Where dpt::grid_coordinates puts every rank of one grid: an oracle that shares no code with grid_place.
struct OracleGrid {
  std::vector<std::vector<int>> at;  // at[rank] = {t, d, p}
  OracleGrid(int tp, int dp, int pp) {
    const std::vector<GridAxis> axes = {{"tp", tp, "--tp"}, {"dp", dp, "--dp"}, {"pp", pp, "--pp"}};
    for (int r = 0; r < tp * dp * pp; ++r) at.push_back(grid_coordinates(axes, r));
  }
  // The ranks sharing `rank`'s coordinates but the one on `axis`, ordered by that coordinate.
  std::vector<int> group(int rank, int axis, int size) const {
    std::vector<int> members(std::size_t(size), -1);
    for (int r = 0; r < int(at.size()); ++r) {
      bool same = true;
      for (int a = 0; a < 3; ++a) same = same && (a == axis || at[r][a] == at[rank][a]);
      if (same) members[std::size_t(at[r][axis])] = r;
    }
    return members;
  }
};

// "" when grid_place agrees with the oracle on every rank of tp × dp × pp, else the first rank off, in words.
std::string grid_shape_disagreement(int tp, int dp, int pp) {
  const OracleGrid oracle(tp, dp, pp);
  for (int r = 0; r < tp * dp * pp; ++r) {
    const std::vector<int>& c = oracle.at[std::size_t(r)];
    const std::string expected =
        place_text(c[0], c[1], c[2], oracle.group(r, 0, tp), oracle.group(r, 1, dp), oracle.group(r, 2, pp));
    std::string said;
    try {
      const GridPlace g = grid_place(r, tp, dp, pp);
      said = place_text(g.t, g.d, g.p, g.tp_group, g.dp_group, g.pp_group);
    } catch (const std::exception& e) {
      said = str("an error: ", e.what());
    }
    if (said != expected)
      return str("tp ", tp, " x dp ", dp, " x pp ", pp, ", rank ", r, ": grid_place says ", said, "; dpt::Grid's layout puts it at ",
                 expected);
  }
  return "";
}
}  // namespace

void add_grid_verdict(Verdicts& v, const GridFindings& found, int world) {
  const std::string what = str("grid_place: all ", world, " ranks' coordinates and groups = the communicators dpt::Grid built");
  v.at_most(what + " (ranks off)", found.ranks_off, 0,
            found.disagreement.empty() ? "every rank's place, against its groups' members gathered in each group"
                                       : found.disagreement);
  // This run's grid is one shape: a mistake that shows only with another (dp > 1, pp > 1) is judged here.
  int shapes = 0, off = 0;
  std::string first;
  for (int n : world == 8 ? std::vector<int>{8} : std::vector<int>{world, 8})
    for (int tp = 1; tp <= n; ++tp)
      for (int dp = 1; tp * dp <= n; ++dp)
        if (n % (tp * dp) == 0) {
          ++shapes;
          const std::string why = grid_shape_disagreement(tp, dp, n / (tp * dp));
          if (!why.empty() && off++ == 0) first = why;
        }
  v.at_most(str("grid_place: every rank of every tp x dp x pp grid of ", world == 8 ? "8" : str(world, " and 8"),
                " ranks = dpt::Grid's layout (grids off)"),
            off, 0, first.empty() ? str(shapes, " grids, every rank's coordinates and groups") : first);
}

}  // namespace dpt::ch15
