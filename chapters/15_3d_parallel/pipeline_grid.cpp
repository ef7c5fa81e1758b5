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

void add_grid_verdict(Verdicts& v, const GridFindings& found, int world) {
  const std::string what = str("grid_place: all ", world, " ranks' coordinates and groups = the communicators dpt::Grid built");
  v.at_most(what + " (ranks off)", found.ranks_off, 0,
            found.disagreement.empty() ? "every rank's place, against its groups' members gathered in each group"
                                       : found.disagreement);
}

}  // namespace dpt::ch15
