// pipeline_grid.cpp — the tp × dp × pp grid and the check of its groups (pipeline_grid.h).
#include "pipeline_grid.h"

#include "dpt/check.h"
#include "dpt/report.h"
#include "groups.h"

namespace dpt::ch15 {

Ch15Grid::Ch15Grid(Context& ctx, int tp, int dp, int pp) {
  grid_ = std::make_unique<Grid>(ctx.comm, std::vector<GridAxis>{{"tp", tp, "--tp"}, {"dp", dp, "--dp"}, {"pp", pp, "--pp"}});
  if (dp > 1) dp_ = &grid_->group("dp");
}

namespace {
// The members of world rank r's group along one axis, from r = t + T·(d + D·p).
std::vector<int> grid_members(int r, int T, int D, int P, char axis) {
  const int t = r % T, d = r / T % D, p = r / (T * D);
  std::vector<int> out;
  const int n = axis == 't' ? T : axis == 'd' ? D : P;
  for (int i = 0; i < n; ++i)
    out.push_back(axis == 't' ? i + T * (d + D * p) : axis == 'd' ? t + T * (i + D * p) : t + T * (d + D * i));
  return out;
}

std::string bracketed(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return "[" + s + "]";
}
}  // namespace

std::vector<std::string> check_grid_groups(Context& ctx, Ch15Grid& grid) {
  const int T = grid.tp_size(), D = grid.dp_size(), P = grid.pp_size();
  const std::vector<int> tp = grid.tp().all_gather(ctx.rank), pp = grid.pp().all_gather(ctx.rank);
  const std::vector<int> dp = grid.dp() ? grid.dp()->all_gather(ctx.rank) : std::vector<int>{ctx.rank};
  DPT_CHECK(tp.size() == std::size_t(T) && dp.size() == std::size_t(D) && pp.size() == std::size_t(P),
            "rank " << ctx.rank << "'s groups have " << tp.size() << ", " << dp.size() << " and " << pp.size()
                    << " members, expected tp " << T << ", dp " << D << " and pp " << P << ": the split is wrong");
  // Every rank's record, gathered on the world: rank, t, d, p, then its members.
  std::vector<int> mine = {ctx.rank, grid.tp_rank(), grid.dp_rank(), grid.pp_rank()};
  for (const std::vector<int>* g : {&tp, &dp, &pp}) mine.insert(mine.end(), g->begin(), g->end());
  const std::size_t width = mine.size();
  std::vector<int> all(width * std::size_t(ctx.world));
  ctx.comm.all_gather(mine.data(), all.data(), int64_t(width));
  std::vector<std::string> lines;
  std::string problems;
  for (int r = 0; r < ctx.world; ++r) {
    const int* rec = all.data() + std::size_t(r) * width;
    const std::vector<int> tp_seen(rec + 4, rec + 4 + T), dp_seen(rec + 4 + T, rec + 4 + T + D),
        pp_seen(rec + 4 + T + D, rec + 4 + T + D + P);
    for (const std::string& p : {ch12::group_problem(r, "TP", grid_members(r, T, D, P, 't'), tp_seen),
                                 ch12::group_problem(r, "DP", grid_members(r, T, D, P, 'd'), dp_seen),
                                 ch12::group_problem(r, "PP", grid_members(r, T, D, P, 'p'), pp_seen)})
      if (!p.empty() && problems.empty()) problems = p;
    lines.push_back(str("rank ", r, ": TP group ", bracketed(tp_seen), " as t=", rec[1], ", DP group ", bracketed(dp_seen),
                        " as d=", rec[2], ", PP group ", bracketed(pp_seen), " as p=", rec[3]));
  }
  DPT_CHECK(problems.empty(), problems);  // every rank sees every record: all stop alike, with the same sentence
  return ctx.is_root() ? lines : std::vector<std::string>{};
}

}  // namespace dpt::ch15
