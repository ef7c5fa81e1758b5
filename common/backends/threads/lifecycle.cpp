// lifecycle.cpp — a threads rank's life: the world's construction, a rank
// failing (which stops every peer), and a rank finishing its function.
//
// The root cause wins: fail() keeps the first *primary* failure (a rank's own
// error), replacing a PeerFailed echo that may have come first, so which
// error launch() reports does not depend on thread timing.
#include "threads/world.h"

namespace dpt {
namespace detail {
namespace threads {

World::World(int size, const ThreadsWorldOptions& o)
    : size_(size), options_(o), timeout_(to_duration(o.timeout_s)), timeout_s_(o.timeout_s), link_(o.link),
      eager_limit_(o.eager_limit_bytes), wake_(size), ports_(std::make_shared<Ports>(size)),
      splits_made_(size, 0), slots_(size), arrived_(size, false), waits_(size), finished_(size, false) {
  for (auto& cv : wake_) cv = std::make_unique<std::condition_variable>();
}

void World::check_not_aborted() {
  if (aborted_) {
    throw PeerFailed(format_error(
        __FILE__, __LINE__,
        "stopped because " + world_name(failed_world_rank_) + " failed: " + failure_.message));
  }
}

void World::fail(int me, const std::string& message, bool primary) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure_.any() || (primary && !failure_primary_)) {
    failure_ = {me, message};
    failed_world_rank_ = world_rank(me);
    failure_primary_ = primary;
  }
  aborted_ = true;
  wake_all();
  stop_children();
}

RankFailure World::finish(int me) {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_[me] = true;
  wake_all();  // peers waiting on this rank can stop now
  for (auto& weak : children_)  // and peers waiting on it in a sub-world
    if (auto child = weak.lock()) child->finished_in_parent(me);
  if (++finished_count_ == size_) {
    std::string leftover = failure_.any() ? "" : leftover_messages();
    if (leftover.empty() && !failure_.any()) leftover = leftovers_->get();  // a sub-world's (split.cpp)
    if (!leftover.empty()) {
      failure_ = {me, leftover, true};
      failed_world_rank_ = world_rank(me);
    }
  }
  // No timeout: a peer may legitimately compute for long after we are done.
  while (finished_count_ < size_) wake_[me]->wait(lock);
  return failure_;
}

}  // namespace threads
}  // namespace detail
}  // namespace dpt
