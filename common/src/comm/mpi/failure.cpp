// failure.cpp — the MPI backend's abort protocol: how one failing process
// stops the others instead of leaving them to hang.
//
// Each rank keeps one receive posted on control_ for an "abort" message. A
// rank whose function throws sends its error to every peer (fail()); a peer
// polling anywhere (wait_for) sees it in stop_reason() and throws PeerFailed.
// At the end of launch every rank agrees on who failed (an all-gather), the
// root cause's message is broadcast from its rank, and every abort message is
// received, so MPI finalises cleanly (finish()).
#include <cstring>

#include "comm/mpi/mpi_backend.h"

namespace dpt {
namespace detail {
namespace mpi {

// Non-empty when this rank must stop: it failed itself (its async work is
// still running), or a peer's abort message has arrived.
std::string MpiBackend::stop_reason() {
  if (self_failed_.load()) {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    return "stopped because rank " + std::to_string(rank_) + " failed: " + own_message_.substr(1);
  }
  if (!peer_failed_.load()) {
    std::unique_lock<std::mutex> lock(abort_mutex_, std::try_to_lock);
    if (!lock.owns_lock() || abort_request_ == MPI_REQUEST_NULL) return "";
    int arrived = 0;
    MPI_Status status;
    DPT_MPI_CHECK(MPI_Test(&abort_request_, &arrived, &status));
    if (!arrived) return "";
    abort_source_ = status.MPI_SOURCE;
    peer_failed_ = true;
  }
  std::lock_guard<std::mutex> lock(abort_mutex_);
  return "stopped because rank " + std::to_string(abort_source_) + " failed: " +
         std::string(abort_buffer_.data() + 1);  // byte 0 is 'P'rimary or 'S'econdary
}

void MpiBackend::fail(const std::string& message, bool primary) {
  std::lock_guard<std::mutex> lock(abort_mutex_);
  if (self_failed_.load()) return;
  own_message_ = std::string(primary ? "P" : "S") + message.substr(0, kAbortBytes - 2);
  self_primary_ = primary;
  self_failed_ = true;
  // Tell every peer; their polling loops (and finish()) pick it up.
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    abort_sends_.emplace_back();
    DPT_MPI_CHECK(MPI_Isend(own_message_.data(), int(own_message_.size()) + 1, MPI_CHAR, peer,
                            kAbortTag, control_, &abort_sends_.back()));
  }
}

RankFailure MpiBackend::finish() {
  // 1. Who failed: 0 ok, 1 primary failure, 2 PeerFailed. No timeout: a peer
  //    may compute for long after we are done (as MPI_Finalize would wait).
  int mine = !self_failed_.load() ? 0 : self_primary_ ? 1 : 2;
  std::vector<int> states(size_);
  MPI_Request request;
  DPT_MPI_CHECK(MPI_Iallgather(&mine, 1, MPI_INT, states.data(), 1, MPI_INT, control_, &request));
  for (Clock::time_point start = Clock::now(); !test(request);) back_off(Clock::now() - start);

  RankFailure failure;  // the lowest primary rank, else the lowest PeerFailed one
  for (int want : {1, 2})
    for (int r = 0; r < size_ && !failure.any(); ++r)
      if (states[r] == want) failure.rank = r;
  // 2. Its message, from itself.
  if (failure.any()) {
    std::vector<char> text(kAbortBytes, '\0');
    if (failure.rank == rank_) std::memcpy(text.data(), own_message_.c_str(), own_message_.size() + 1);
    DPT_MPI_CHECK(MPI_Bcast(text.data(), kAbortBytes, MPI_CHAR, failure.rank, control_));
    failure.message = std::string(text.data() + 1);
  }
  // 3. Receive every abort message sent to us, and complete ours.
  std::lock_guard<std::mutex> lock(abort_mutex_);
  int received_from = abort_source_;
  if (abort_request_ != MPI_REQUEST_NULL) {
    MPI_Status status;
    MPI_Cancel(&abort_request_);
    DPT_MPI_CHECK(MPI_Wait(&abort_request_, &status));
    int cancelled = 0;
    MPI_Test_cancelled(&status, &cancelled);
    if (!cancelled) received_from = status.MPI_SOURCE;
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || r == received_from || states[r] == 0) continue;
    std::vector<char> sink(kAbortBytes);
    DPT_MPI_CHECK(MPI_Recv(sink.data(), kAbortBytes, MPI_CHAR, r, kAbortTag, control_, MPI_STATUS_IGNORE));
  }
  if (!abort_sends_.empty())
    DPT_MPI_CHECK(MPI_Waitall(int(abort_sends_.size()), abort_sends_.data(), MPI_STATUSES_IGNORE));
  abort_sends_.clear();
  return failure;
}

}  // namespace mpi
}  // namespace detail
}  // namespace dpt
