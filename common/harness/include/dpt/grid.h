/// @file grid.h
/// @brief The world's ranks laid out on a grid of named axes (tensor,
/// pipeline, data parallel, …), split once into one group per axis.
///
/// The first axis varies fastest: on axes {"tp", 2}, {"dp", 3} world rank r
/// sits at tp = r mod 2, dp = ⌊r/2⌋ (TP groups are consecutive ranks, as a
/// node's GPUs are). In general, with sizes n₀, n₁, …:
///
///     coordinate on axis a  =  ⌊r / (n₀ · … · n_{a−1})⌋ mod n_a
///     group of axis a       =  the ranks whose every other coordinate is r's,
///                              ranked by their coordinate on a
///
///     Grid grid(ctx.comm, {{"pp", P, "--stages"}, {"dp", D, "--dp"}});
///     Communicator& pipe = grid.group("pp");   // grid.coord("pp") == pipe.rank()
///
/// The sizes must multiply to the world's; `grid_problem` says so in one
/// sentence naming the flags, for a chapter's flag check (exit 2) and for the
/// constructor. Left out: other orders of the axes (Megatron's order flags),
/// groups spanning two axes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dpt/comm/communicator.h"

namespace dpt {

/// One axis of a grid.
struct GridAxis {
  std::string name;  ///< "tp", "pp", "dp": what `Grid::group` and `Grid::coord` are asked by
  int size = 1;      ///< ranks along it (>= 1)
  std::string flag;  ///< the flag that sets its size ("--tp"), named when the sizes do not fit the world
};

/// "1 rank", "4 ranks".
std::string ranks_phrase(int n);

/// "" when every size is >= 1 and the sizes multiply to `world`, else one
/// sentence naming the flags: "--stages 4 x --dp 1 = 4 ranks, but the run has
/// 1 rank: start 4 ranks, or change --stages or --dp".
std::string grid_problem(const std::vector<GridAxis>& axes, int world);

/// Rank `world_rank`'s coordinate on each axis (the layout of the file comment).
std::vector<int> grid_coordinates(const std::vector<GridAxis>& axes, int world_rank);

/// One rank's place on the grid and its group along each axis.
class Grid {
 public:
  /// Collective over `world` (every rank calls it with the same axes): one
  /// split per axis, in the axes' order (an axis as large as the world is the
  /// world itself). A grid_problem is a dpt::Error with its sentence.
  Grid(Communicator& world, std::vector<GridAxis> axes);

  /// The ranks that differ from this one only on `axis`, ranked by their
  /// coordinate on it (`group(axis).rank() == coord(axis)`). Named after the
  /// axis (Communicator::name), the world too when the axis spans it, so a
  /// timeline tells a TP collective from a DP one.
  Communicator& group(const std::string& axis);
  /// This rank's coordinate on `axis`, 0 <= coord < size(axis).
  int coord(const std::string& axis) const;
  /// The ranks along `axis`.
  int size(const std::string& axis) const;
  /// The axes, as given.
  const std::vector<GridAxis>& axes() const { return axes_; }

 private:
  int index_of(const std::string& axis) const;  // a dpt::Error naming the axes when there is none

  std::vector<GridAxis> axes_;
  std::vector<int> coords_;
  std::vector<Communicator*> groups_;                  // one per axis
  std::vector<std::unique_ptr<Communicator>> owned_;  // the splits among them
};

}  // namespace dpt
