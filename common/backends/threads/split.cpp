// split.cpp — sub-worlds of the threads backend (Communicator::split).
//
// A group of ranks gets a World of its own: its own mailboxes, collective
// slots, mutex and wait report, numbered in the group's ranks. What it shares
// with the world above it:
//
//   the failure protocol  a parent keeps its sub-worlds (weak pointers) and
//                         tells them when one of its ranks fails or finishes
//                         (stop_from_parent, finished_in_parent), so a rank
//                         waiting in a group throws PeerFailed naming the
//                         world rank that failed, as it would in the world
//   the link ports        one Ports per world rank (link_clock.cpp)
//   the options           timeout, link model, eager limit
//
// Locks: a parent locks a child while holding its own mutex, never the
// reverse, so the tree of worlds cannot deadlock on its mutexes.
//
// Making one: the core has gathered every rank's (color, key) and passes this
// rank's members in their new order. The first member to arrive makes the
// World and leaves it in pending_splits_ under (split number, first member);
// the others take it; the last one removes the entry. Nobody waits here.
//
// Ending: a sub-world ends when its last member drops it (its World is
// destroyed), which is before the world's ranks finish. A message left
// unreceived in it, or in a sub-world of its own, is handed up (Leftovers);
// the world reports it when every rank has finished, as its own
// (lifecycle.cpp), naming both numberings.
#include <algorithm>
#include <sstream>

#include "threads/world.h"

namespace dpt {
namespace detail {
namespace threads {

SubWorld World::split(int me, const std::vector<int>& members) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_not_aborted();
  const std::pair<int64_t, int> id{splits_made_[me]++, members.front()};
  auto it = pending_splits_.find(id);
  if (it == pending_splits_.end()) {
    const int n = int(members.size());
    auto child = std::make_shared<World>(n, options_);
    child->ports_ = ports_;
    child->parent_leftovers_ = leftovers_;
    child->parent_ranks_ = members;
    for (int r = 0; r < n; ++r) {
      child->world_ranks_.push_back(world_rank(members[r]));
      child->finished_[r] = finished_[members[r]];
    }
    children_.erase(std::remove_if(children_.begin(), children_.end(),
                                   [](const std::weak_ptr<World>& w) { return w.expired(); }),
                    children_.end());
    children_.push_back(child);
    it = pending_splits_.emplace(id, PendingSplit{child, TrafficLog(n), n}).first;
  }
  const int rank = int(std::find(members.begin(), members.end(), me) - members.begin());
  SubWorld made{it->second.world, it->second.traffic.view(rank), rank};
  if (--it->second.waiting == 0) pending_splits_.erase(it);
  return made;
}

World::~World() {
  if (!parent_leftovers_ || failure_.any()) return;  // a world, or a group that failed: said already
  std::string left = leftover_messages();
  if (left.empty()) left = leftovers_->get();
  if (!left.empty()) parent_leftovers_->record(left);
}

// ----------------------------------------------------------------------------
// what a parent tells its sub-worlds

void World::stop_children() {
  for (auto& weak : children_)
    if (auto child = weak.lock()) child->stop_from_parent(failed_world_rank_, failure_.message);
}

void World::stop_from_parent(int world_rank, const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_) {  // a failure of our own (a timeout here) came first: keep it
    auto at = std::find(world_ranks_.begin(), world_ranks_.end(), world_rank);
    failure_ = {at == world_ranks_.end() ? 0 : int(at - world_ranks_.begin()), message};
    failed_world_rank_ = world_rank;
    failure_primary_ = true;
    aborted_ = true;
    wake_all();
  }
  stop_children();
}

void World::finished_in_parent(int parent_rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto at = std::find(parent_ranks_.begin(), parent_ranks_.end(), parent_rank);
  if (at == parent_ranks_.end()) return;
  const int r = int(at - parent_ranks_.begin());
  finished_[r] = true;
  wake_all();
  for (auto& weak : children_)
    if (auto child = weak.lock()) child->finished_in_parent(r);
}

// ----------------------------------------------------------------------------
// naming ranks in reports

std::string World::name(int r) const {
  if (world_ranks_.empty()) return "rank " + std::to_string(r);
  return "rank " + std::to_string(r) + " (world rank " + std::to_string(world_ranks_[r]) + ")";
}

std::string World::world_name(int world_rank) const {
  auto at = std::find(world_ranks_.begin(), world_ranks_.end(), world_rank);
  if (at != world_ranks_.end()) return name(int(at - world_ranks_.begin()));
  return world_ranks_.empty() ? "rank " + std::to_string(world_rank)
                              : "world rank " + std::to_string(world_rank) + " (not in this sub-communicator)";
}

std::string World::numbering() const {
  if (world_ranks_.empty()) return "";
  std::ostringstream out;
  out << "; in this sub-communicator ranks 0.." << size_ - 1 << " are world ranks ";
  for (int r = 0; r < size_; ++r) out << (r ? ", " : "") << world_ranks_[r];
  return out.str();
}

}  // namespace threads
}  // namespace detail
}  // namespace dpt
