// split.cpp — Communicator::split, the part every backend shares: who joins
// which group, and in what order. MPI_Comm_split's rule:
//
//   every rank passes (color, key); the ranks passing one color form a group,
//   ranked by key, ties broken by their rank here.
//
// So a 2x3 grid (TP x DP, rank = dp * 2 + tp) splits into rows with
// color = dp and into columns with color = tp; key = rank keeps the old order.
//
// Each rank learns every rank's (color, key) by one all_gather_bytes, so a
// rank that never calls split is a timeout naming it (in all_gather_bytes),
// before any backend-specific work starts. The backend then builds the group
// (threads: a World of its own; MPI: MPI_Comm_split; NCCL: ncclCommSplit,
// with an MPI group as its control plane).
#include <algorithm>

#include "comm/backend.h"

namespace dpt {

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  DPT_CHECK(color >= 0, "split: color must be >= 0 (the ranks passing the same color form one "
                        "communicator), got " << color << " on rank " << rank_);
  // ---- every rank's (color, key) ----
  int mine[2] = {color, key};
  std::vector<int> all(2 * std::size_t(size_));
  detail::CommAccess::all_gather_bytes(*this, mine, all.data(), sizeof mine);
  // ---- my group, in the new rank order: by key, then by rank here ----
  std::vector<int> members;
  for (int r = 0; r < size_; ++r)
    if (all[2 * r] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  const int new_rank = int(std::find(members.begin(), members.end(), rank_) - members.begin());
  const int new_size = int(members.size());
  // ---- the backend's group ----
  // all_gather_bytes ran behind any pending async work and waited for it, so
  // the progress thread is idle: the backend may be called from here.
  detail::SplitBackend made = backend_->split(color, key, members);
  std::unique_ptr<Communicator> sub(
      new Communicator(std::move(made.backend), new_rank, new_size, timeout_s_, std::move(made.traffic)));
  sub->tracer_ = tracer_;
  sub->parent_ranks_ = std::move(members);
  return sub;
}

int Communicator::parent_rank(int r) const {
  DPT_CHECK(r >= 0 && r < size_, "parent_rank: rank " << r << " does not exist (ranks are 0.." << size_ - 1 << ")");
  return parent_ranks_.empty() ? r : parent_ranks_[r];
}

}  // namespace dpt
