/// @file groups.h
/// @brief The communicator groups of a T × D run: T ranks share each model
/// (tensor parallel), D such models train on different samples (data
/// parallel). TP groups are consecutive world ranks (they talk every layer:
/// on a cluster, the GPUs of one node), DP groups the ranks with the same
/// index in their TP group.
///
///     world rank r:  TP group ⌊r/T⌋ (members ⌊r/T⌋·T + 0 … T−1), index t = r mod T
///                    DP group t     (members t, t + T, t + 2T, …),  index d = ⌊r/T⌋
///
/// The world is split by dpt::Grid (dpt/grid.h) on the axes {"tp", T}, {"dp", D}.
/// Left out: other layouts (Megatron's order flags), pipeline groups (chapter 13).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dpt/grid.h"
#include "dpt/launch.h"

namespace dpt::ch12 {

/// One rank's groups. With D = 1 the TP group is the world itself.
class Groups {
 public:
  /// Collective over the world: T·D must equal ctx.world (else dpt::Error naming --tp and --dp).
  Groups(Context& ctx, int tp, int dp);
  Communicator& tp() { return *tp_; }  ///< the T ranks that share this rank's model
  Communicator* dp() { return dp_; }   ///< the D replicas of this rank's slice; null when D = 1
  int tp_size() const { return tp_size_; }     ///< T
  int dp_size() const { return dp_size_; }     ///< D
  int tp_rank() const { return tp_->rank(); }   ///< t: which slices this rank owns
  int dp_rank() const { return dp_rank_; }      ///< d: which samples this rank's model trains on

 private:
  std::unique_ptr<Grid> grid_;
  Communicator* tp_ = nullptr;
  Communicator* dp_ = nullptr;
  int tp_size_, dp_size_, dp_rank_ = 0;
};

/// The world ranks rank `world_rank`'s TP group should hold, in group-rank
/// order (the layout of the file comment).
std::vector<int> expected_tp_members(int world_rank, int tp, int dp);
/// The same for its DP group.
std::vector<int> expected_dp_members(int world_rank, int tp, int dp);

/// "" when `seen` (a group's members as world ranks, in group-rank order)
/// is what `expected` says, else the sentence naming the rank, the group and
/// both lists.
std::string group_problem(int world_rank, const std::string& group, const std::vector<int>& expected,
                          const std::vector<int>& seen);

/// Collective over the world: every rank learns its groups' members (an
/// all-gather of world ranks inside each group) and checks them against the
/// layout; a wrong member is a dpt::Error naming the rank — before any
/// layer talks in a group that would wait forever. Returns, on world rank 0,
/// one line per rank ("rank 5: TP group [4 5 6 7] as t=1, DP group [1 5] as d=1").
std::vector<std::string> check_groups(Context& ctx, Groups& groups);

}  // namespace dpt::ch12
