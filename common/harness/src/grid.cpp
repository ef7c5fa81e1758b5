// grid.cpp — named axes over the world: the flag check, the coordinates, one split per axis.
#include "dpt/grid.h"

#include <utility>

#include "dpt/check.h"

namespace dpt {

std::string ranks_phrase(int n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

std::string grid_problem(const std::vector<GridAxis>& axes, int world) {
  for (const GridAxis& a : axes)
    if (a.size < 1) return a.flag + " " + std::to_string(a.size) + " is not a number of ranks: give 1 or more";
  long long product = 1;
  std::string sizes, flags;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    product *= axes[i].size;
    sizes += (i ? " x " : "") + axes[i].flag + " " + std::to_string(axes[i].size);
    flags += (i == 0 ? "" : i + 1 == axes.size() ? " or " : ", ") + axes[i].flag;
  }
  if (product == world) return "";
  return sizes + " = " + ranks_phrase(int(product)) + ", but the run has " + ranks_phrase(world) + ": start " +
         ranks_phrase(int(product)) + ", or change " + flags;
}

std::vector<int> grid_coordinates(const std::vector<GridAxis>& axes, int world_rank) {
  std::vector<int> coords;
  int stride = 1;
  for (const GridAxis& a : axes) {
    coords.push_back(world_rank / stride % a.size);
    stride *= a.size;
  }
  return coords;
}

Grid::Grid(Communicator& world, std::vector<GridAxis> axes) : axes_(std::move(axes)) {
  const std::string problem = grid_problem(axes_, world.size());
  DPT_CHECK(problem.empty(), problem);
  coords_ = grid_coordinates(axes_, world.rank());
  int stride = 1;
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    if (axes_[a].size == world.size()) {
      groups_.push_back(&world);
    } else {  // color: this rank with its coordinate on a set to 0, shared by exactly a's line through it
      owned_.push_back(world.split(world.rank() - coords_[a] * stride, coords_[a]));
      groups_.push_back(owned_.back().get());
    }
    groups_.back()->set_name(axes_[a].name);  // its calls show on a timeline as "tp all_reduce"
    stride *= axes_[a].size;
  }
}

int Grid::index_of(const std::string& axis) const {
  std::string names;
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == axis) return int(i);
    names += (i ? ", " : "") + axes_[i].name;
  }
  DPT_CHECK(false, "the grid has no axis \"" << axis << "\"; its axes are " << names);
  return -1;
}

Communicator& Grid::group(const std::string& axis) { return *groups_[std::size_t(index_of(axis))]; }
int Grid::coord(const std::string& axis) const { return coords_[std::size_t(index_of(axis))]; }
int Grid::size(const std::string& axis) const { return axes_[std::size_t(index_of(axis))].size; }

}  // namespace dpt
