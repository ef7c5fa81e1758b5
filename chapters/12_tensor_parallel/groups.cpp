// groups.cpp — the TP × DP layout, and the check that each rank's groups hold it.
#include "groups.h"

#include "dpt/check.h"
#include "dpt/report.h"

namespace dpt::ch12 {

std::vector<int> expected_tp_members(int world_rank, int tp, int dp) {
  (void)dp;
  std::vector<int> members;
  for (int i = 0; i < tp; ++i) members.push_back(world_rank / tp * tp + i);
  return members;
}

std::vector<int> expected_dp_members(int world_rank, int tp, int dp) {
  std::vector<int> members;
  for (int j = 0; j < dp; ++j) members.push_back(world_rank % tp + j * tp);
  return members;
}

Groups::Groups(Context& ctx, int tp, int dp) : tp_size_(tp), dp_size_(dp) {
  // TP first, the axis that varies fastest: its groups are consecutive ranks.
  grid_ = std::make_unique<Grid>(ctx.comm, std::vector<GridAxis>{{"tp", tp, "--tp"}, {"dp", dp, "--dp"}});
  tp_ = &grid_->group("tp");  // with D = 1, the world itself
  if (dp > 1) dp_ = &grid_->group("dp");
  dp_rank_ = grid_->coord("dp");
}

std::string group_problem(int world_rank, const std::string& group, const std::vector<int>& expected,
                          const std::vector<int>& seen) {
  if (seen == expected) return "";
  auto list = [](const std::vector<int>& v) {
    std::string s;
    for (int r : v) s += (s.empty() ? "" : " ") + std::to_string(r);
    return "[" + s + "]";
  };
  return "rank " + std::to_string(world_rank) + "'s " + group + " group holds world ranks " + list(seen) +
         ", expected " + list(expected) + ": the split into groups is wrong";
}

namespace {
// The world ranks of `group`'s members in group-rank order: each member contributes its world rank.
std::vector<int> members_of(Communicator& group, int world_rank) {
  return group.all_gather(world_rank);
}
}  // namespace

std::vector<std::string> check_groups(Context& ctx, Groups& groups) {
  const int T = groups.tp_size(), D = groups.dp_size();
  const std::vector<int> tp = members_of(groups.tp(), ctx.rank);
  const std::vector<int> dp = groups.dp() ? members_of(*groups.dp(), ctx.rank) : std::vector<int>{ctx.rank};
  // Every rank's record, gathered on the world (fixed size: rank, t, d, T members, D members).
  std::vector<int> mine = {ctx.rank, groups.tp_rank(), groups.dp_rank()};
  mine.insert(mine.end(), tp.begin(), tp.end());
  mine.insert(mine.end(), dp.begin(), dp.end());
  const std::size_t width = mine.size();
  DPT_CHECK(tp.size() == std::size_t(T) && dp.size() == std::size_t(D),
            "rank " << ctx.rank << "'s TP group has " << tp.size() << " members and its DP group " << dp.size()
                    << ", expected T = " << T << " and D = " << D << ": the split into groups is wrong");
  std::vector<int> all(width * std::size_t(ctx.world));
  ctx.comm.all_gather(mine.data(), all.data(), int64_t(width));
  std::vector<std::string> lines;
  std::string problems;
  for (int r = 0; r < ctx.world; ++r) {
    const int* rec = all.data() + std::size_t(r) * width;
    std::vector<int> tp_seen(rec + 3, rec + 3 + T), dp_seen(rec + 3 + T, rec + 3 + T + D);
    for (const std::string& p : {group_problem(r, "TP", expected_tp_members(r, T, D), tp_seen),
                                 group_problem(r, "DP", expected_dp_members(r, T, D), dp_seen)})
      if (!p.empty() && problems.empty()) problems = p;
    auto list = [](const std::vector<int>& v) {
      std::string s;
      for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
      return "[" + s + "]";
    };
    lines.push_back(str("rank ", r, ": TP group ", list(tp_seen), " as t=", rec[1], ", DP group ", list(dp_seen),
                        " as d=", rec[2]));
  }
  DPT_CHECK(problems.empty(), problems);  // every rank sees every record: all stop alike, with the same sentence
  return ctx.is_root() ? lines : std::vector<std::string>{};
}

}  // namespace dpt::ch12
