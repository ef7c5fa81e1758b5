/// @file pipeline_grid.h
/// @brief Chapter 15's grid: tp × dp × pp ranks on dpt::Grid, TP innermost,
/// then DP, then PP —
///
///     world rank r = t + tp · (d + dp · p)
///
/// TP ranks exchange activations in every block (on a cluster: one node's
/// GPUs, neighbours); DP ranks average gradients once per step; PP ranks
/// hand one micro-batch's activations to a neighbour stage. The order puts
/// the chattiest axis on the nearest ranks (Megatron's and picotron's).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dpt/grid.h"
#include "dpt/launch.h"

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

/// Collective over the world: every rank learns the world ranks of its three
/// groups and checks them against the layout above (written out here, not
/// asked of dpt::Grid); a wrong member is a dpt::Error naming the rank.
/// Returns on world rank 0 one line per rank: "rank 5: TP group [4 5] as
/// t=1, DP group [5 7] as d=0, PP group [1 5] as p=1".
std::vector<std::string> check_grid_groups(Context& ctx, Ch15Grid& grid);

}  // namespace dpt::ch15
