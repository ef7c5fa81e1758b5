/// @file pipeline_grid.h
/// @brief Chapter 15's grid: tp × dp × pp ranks on dpt::Grid, TP innermost,
/// then DP, then PP. TP ranks exchange activations in every block (on a
/// cluster: one node's GPUs, neighbours); DP ranks average gradients once
/// per step; PP ranks hand one micro-batch's activations to a neighbour
/// stage. The order puts the chattiest axis on the nearest ranks
/// (Megatron's and picotron's). Where a rank sits is your hole
/// (ch15::grid_place); the communicators are dpt::Grid's, and the check
/// below compares the two.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dpt/grid.h"
#include "ch15.h"
#include "dpt/launch.h"
#include "dpt/verdict.h"

namespace dpt::ch15 {

/// One rank's place on the tp × dp × pp grid and its three groups.
class Ch15Grid {
 public:
  /// Collective over the world: tp · dp · pp must equal ctx.world (else
  /// dpt::Error naming --tp, --dp and --pp).
  Ch15Grid(Context& ctx, int tp, int dp, int pp);
  Communicator& tp() { return grid_->group("tp"); }  ///< the tp ranks that split this stage's blocks
  Communicator* dp() { return dp_; }                   ///< the dp replicas of this rank's share; null when dp = 1
  Communicator& pp() { return grid_->group("pp"); }  ///< the pp stages of this rank's pipeline (rank = stage)
  int tp_size() const { return grid_->size("tp"); }  ///< T
  int dp_size() const { return grid_->size("dp"); }  ///< D
  int pp_size() const { return grid_->size("pp"); }  ///< P
  int tp_rank() const { return grid_->coord("tp"); } ///< t: which heads and MLP features
  int dp_rank() const { return grid_->coord("dp"); } ///< d: which windows of the global batch
  int pp_rank() const { return grid_->coord("pp"); } ///< p: which stage of the pipeline

 private:
  std::unique_ptr<Grid> grid_;
  Communicator* dp_ = nullptr;
};

/// What the groups dpt::Grid built look like, and whether grid_place agrees.
struct GridFindings {
  std::vector<std::string> lines;  ///< world rank 0: "rank 5: TP group [4 5] as t=1, DP group … as d=0, PP group … as p=1"
  std::string disagreement;        ///< world rank 0: "" or the first rank where grid_place differs, in words
  int ranks_off = 0;               ///< world rank 0: how many ranks' places grid_place got wrong
};

/// Collective over the world: every rank learns the world ranks of its
/// three groups (an all-gather inside each) and its coordinates from
/// dpt::Grid, and compares them with `mine`, grid_place(ctx.rank, …) (null:
/// not written yet, nothing compared). A group of the wrong size is a
/// dpt::Error naming the rank, before any layer talks in it.
GridFindings check_grid_groups(Context& ctx, Ch15Grid& grid, const GridPlace* mine);

/// World rank 0: the verdict "grid_place = the groups dpt::Grid built" on
/// `world` ranks.
void add_grid_verdict(Verdicts& v, const GridFindings& found, int world);

}  // namespace dpt::ch15
