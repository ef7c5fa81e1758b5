// failure.cpp — the MPI backend's abort protocol: how one failing process
// stops the others instead of leaving them to hang.
//
// Each rank keeps one receive posted on control_ for an "abort" message. A
// rank whose function throws sends its error to every peer (fail()); a peer
// polling anywhere (wait_for) sees it in stop_reason() and throws PeerFailed.
// At the end of launch every rank agrees on who failed (each tells every
// other), the root cause's message is broadcast from its rank, and every abort
// message is received, so MPI finalises cleanly (finish()).
//
// A rank that never answers (SIGSTOP, a lost node, an endless computation)
// would leave that agreement, and MPI_Finalize after it, waiting forever.
// So once any rank has failed, finish() waits a bounded grace period for the
// others; then the rank prints its error and the silent ranks on one line and
// ends the whole job with MPI_Abort, as NCCL's watchdog does. The job ends
// within --comm-timeout (the failing wait) + grace_s() + the launcher's kill.
#include <errno.h>  // program_invocation_short_name (glibc)

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "library_check.h"
#include "mpi/mpi_backend.h"

namespace dpt {
namespace detail {
namespace mpi {

// Non-empty when this rank must stop: it failed itself (its async work is
// still running), or a peer's abort message has arrived.
std::string MpiBackend::stop_reason() {
  if (world_) return world_->stop_reason();  // a sub-communicator: the world's protocol
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
  if (world_) return world_->fail(message, primary);
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

// After a failure, how long finish() waits for a rank that has not answered
// (frozen, killed, or computing without polling) before it ends the job: the
// timeout, at most 5 s. A rank that only learned of the failure waits 1 s
// more, so that the rank that failed first is the one that speaks.
double MpiBackend::grace_s() const {
  return std::min(timeout_s_, 5.0) + (self_failed_.load() && self_primary_ ? 0.0 : 1.0);
}

// No rank can finalise MPI while one is silent: say who, and end the whole job.
void MpiBackend::abandon(const std::vector<int>& silent) {
  std::string who, stop = stop_reason();
  for (int r : silent) who += (who.empty() ? "rank " : ", rank ") + std::to_string(r);
  std::string cause = self_failed_.load() ? own_message_.substr(1)
                      : !stop.empty()     ? format_error(__FILE__, __LINE__, stop)
                                          : format_error(__FILE__, __LINE__, "a peer failed");
  char grace[32];
  std::snprintf(grace, sizeof grace, "%.1f", grace_s());
  print_error_line(std::string(program_invocation_short_name) + ": error: " + cause + "; then " +
                   (who.empty() ? "a peer" : who) + " did not answer within " + grace +
                   " s (frozen, killed, or busy without communicating): ending the whole job with MPI_Abort");
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);  // MPI_Abort does not return; if it did, this process must still end
}

RankFailure MpiBackend::finish() {
  if (world_) return {};  // launch() finishes the world, never a sub-communicator
  // 1. Who failed: 0 ok, 1 primary failure, 2 PeerFailed. Every rank tells
  //    every other, point to point, so that a rank that never answers can be
  //    named. No deadline while nobody has failed: a peer may compute for
  //    long after we are done (as MPI_Finalize would wait). Once a failure is
  //    known, the silent ranks get grace_s(), then the job ends (abandon).
  //    With its state, each tells each how many point-to-point messages it
  //    sent it (unreceived.cpp compares).
  const int64_t mine = !self_failed_.load() ? 0 : self_primary_ ? 1 : 2;
  std::vector<int64_t> told(2 * std::size_t(size_), 0), telling(2 * std::size_t(size_), 0);  // (state, sent) per rank
  told[2 * rank_] = mine;
  std::vector<MPI_Request> receives(size_, MPI_REQUEST_NULL), sends;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    telling[2 * r] = mine, telling[2 * r + 1] = sent_to_[r].load();
    DPT_MPI_CHECK(MPI_Irecv(&told[2 * r], 2, MPI_INT64_T, r, kStateTag, control_, &receives[r]));
    sends.emplace_back();
    DPT_MPI_CHECK(MPI_Isend(&telling[2 * r], 2, MPI_INT64_T, r, kStateTag, control_, &sends.back()));
  }
  auto states = [&](int r) { return told[2 * std::size_t(r)]; };
  Clock::time_point start = Clock::now(), deadline = Clock::time_point::max();
  for (;;) {
    bool answered = true, failure_known = mine != 0 || !stop_reason().empty();
    for (int r = 0; r < size_; ++r) {
      if (receives[r] != MPI_REQUEST_NULL && !test(receives[r])) answered = false;
      failure_known = failure_known || (receives[r] == MPI_REQUEST_NULL && states(r) != 0);
    }
    int sent = 0;
    DPT_MPI_CHECK(MPI_Testall(int(sends.size()), sends.data(), &sent, MPI_STATUSES_IGNORE));
    if (answered && sent) break;
    Clock::time_point now = Clock::now();
    if (failure_known && deadline == Clock::time_point::max())
      deadline = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_s()));
    if (now >= deadline) {
      std::vector<int> silent;
      for (int r = 0; r < size_; ++r)
        if (receives[r] != MPI_REQUEST_NULL) silent.push_back(r);
      abandon(silent);  // silent empty: our state message to a peer is stuck; abandon names nobody
    }
    back_off(now - start);
  }

  RankFailure failure;  // the lowest primary rank, else the lowest PeerFailed one
  for (int want : {1, 2})
    for (int r = 0; r < size_ && !failure.any(); ++r)
      if (states(r) == want) failure.rank = r;
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
    if (r == rank_ || r == received_from || states(r) == 0) continue;
    std::vector<char> sink(kAbortBytes);
    DPT_MPI_CHECK(MPI_Recv(sink.data(), kAbortBytes, MPI_CHAR, r, kAbortTag, control_, MPI_STATUS_IGNORE));
  }
  if (!abort_sends_.empty())
    DPT_MPI_CHECK(MPI_Waitall(int(abort_sends_.size()), abort_sends_.data(), MPI_STATUSES_IGNORE));
  abort_sends_.clear();
  if (failure.any()) return failure;
  // 4. Nobody failed (every rank knows it): were all messages received?
  std::vector<int64_t> sent_to_me(size_, 0);
  for (int r = 0; r < size_; ++r) sent_to_me[r] = r == rank_ ? sent_to_[r].load() : told[2 * std::size_t(r) + 1];
  return agree_on_unreceived(unreceived_here(sent_to_me));
}

}  // namespace mpi
}  // namespace detail
}  // namespace dpt
