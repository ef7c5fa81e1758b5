// mpi_backend.h — the MPI backend: one rank per process (Open MPI, or any
// MPI-3). Private to libdpt; built only when CMake found MPI.
//
//   runtime.cpp         MPI start and end, the backend's construction
//   point_to_point.cpp  send, recv, sendrecv
//   collectives.cpp     the MPI all-reduce and friends, after a preflight
//   failure.cpp         the abort protocol: fail(), finish(), stop_reason()
//   split.cpp           sub-communicators: MPI_Comm_split, failures through the world's protocol
//   unreceived.cpp      messages sent that nobody received, found at the end
//
// Every wait is a polling loop over a non-blocking call (MPI_Isend,
// MPI_Improbe, MPI_Iallreduce, ...) instead of a blocking one, so that a rank
// can give up after the timeout with a dpt::Timeout naming itself and its
// peer, and can notice that a peer has failed.
//
// Two communicators, both duplicates of MPI_COMM_WORLD: data_ for everything
// the program sends, control_ for the failure protocol (failure.cpp).
//
// A sub-communicator (split.cpp) has data_ only: its failure protocol is its
// world's (world_), whose abort messages reach every process.
//
// Limits: counts above 2^31-1 floats are refused (MPI's int counts). After a
// timeout, an unmatched MPI_Isend is freed and a started collective is left
// behind (MPI cannot cancel either): the program is expected to end.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends.h"
#include "comm/call_check.h"

namespace dpt {
namespace detail {
namespace mpi {

using Clock = std::chrono::steady_clock;

/// MPI_THREAD_MULTIPLE or less, as MPI_Init_thread granted (runtime.cpp).
int thread_level();
/// Refuses counts MPI's int cannot hold.
int int_count(int64_t count, const char* call);
/// Busy-polls for ~100 us, then yields, then sleeps: fast for the common case,
/// kind to an oversubscribed machine (4 ranks on 2 cores) when waits are long.
void back_off(Clock::duration waited);
/// Starts MPI if nobody has (MPI_THREAD_MULTIPLE asked; finalised at exit).
void ensure_mpi_initialised();
/// What the peer of a wait that timed out had done, as a clause of the
/// timeout sentence: `pending` 1 when a message from `peer` to this rank was
/// waiting, unreceived (a send to it: both send first?), 0 when none was (it
/// sends nothing here: it waits elsewhere, or it stopped), 2 when the awaited
/// message began to arrive and never finished (it stopped mid-message), -1
/// when not known. "" when that says nothing.
std::string peer_evidence(const char* call, int peer, int pending);
/// The timeout sentence (without the file:line prefix); `evidence`, a clause
/// from peer_evidence (or "").
std::string timeout_message(int rank, double timeout_s, const char* call, int peer, int tag, int64_t count,
                            const std::string& evidence);

class MpiBackend final : public Backend {
 public:
  MpiBackend(MPI_Comm data, MPI_Comm control, double timeout_s);
  /// A sub-communicator on `data` (split.cpp): fail/stop go through `world`,
  /// which must outlive it; world_ranks[r] is the world rank of rank r.
  MpiBackend(MPI_Comm data, MpiBackend* world, std::vector<int> world_ranks, double timeout_s);
  ~MpiBackend() override;

  const char* name() const override { return "mpi"; }
  bool thread_safe() const override { return thread_level() >= MPI_THREAD_MULTIPLE; }
  // ---- point_to_point.cpp ----
  void send(const float* data, int64_t count, int dst, int tag) override;
  void recv(float* data, int64_t count, int src, int tag) override;
  void sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                int64_t recv_count, int src, int tag) override;
  // ---- collectives.cpp ----
  void all_reduce(float* data, int64_t count, ReduceOp op) override;
  void reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count, ReduceOp op) override;
  void all_gather(const float* send_buf, float* recv_buf, int64_t send_count) override;
  void broadcast(float* data, int64_t count, int root) override;
  void barrier() override;
  void all_gather_bytes(const void* send, void* recv, int64_t bytes) override;
  // ---- failure.cpp ----
  void fail(const std::string& message, bool primary) override;
  RankFailure finish() override;
  // ---- split.cpp ----
  SplitBackend split(int color, int key, const std::vector<int>& members) override;

  /// This process's rank and the number of processes.
  int rank() const { return rank_; }
  int size() const { return size_; }

  // ---- also the NCCL backend's control plane (nccl/) ----
  /// All-gathers every rank's call and throws the mismatch sentence if they
  /// differ (collectives.cpp); returns once every rank has made the call.
  void preflight(const CollectiveCall& call);
  /// split()'s group as an MpiBackend (split.cpp): the NCCL backend's
  /// sub-communicators take it as their control plane.
  std::unique_ptr<MpiBackend> split_group(int color, int key, const std::vector<int>& members);
  /// Non-empty when this rank must stop: it failed, or a peer did (failure.cpp).
  std::string stop_reason();

  /// Calls try_complete() until it returns true. Between tries: stop if this
  /// rank or a peer has failed (PeerFailed), give up at the deadline
  /// (Timeout); give_up() first releases what the library still holds. Backs off.
  template <class Try, class GiveUp>
  void wait_for(const char* call, int peer, int tag, int64_t count, Try&& try_complete,
                GiveUp&& give_up) {
    wait_for(call, peer, tag, count, try_complete, give_up,
             [&] { return peer_evidence(call, peer, peer_pending(peer)); });
  }
  /// The same; `evidence()` gives, at the deadline, the clause that says what
  /// the peer had done (peer_evidence's, or one of the caller's).
  template <class Try, class GiveUp, class Evidence>
  void wait_for(const char* call, int peer, int tag, int64_t count, Try&& try_complete,
                GiveUp&& give_up, Evidence&& evidence) {
    Clock::time_point start = Clock::now();
    Clock::time_point deadline =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
    for (;;) {
      if (try_complete()) return;
      std::string stop = stop_reason();
      if (!stop.empty()) {
        give_up();
        throw PeerFailed(format_error(__FILE__, __LINE__, stop));
      }
      Clock::time_point now = Clock::now();
      if (now >= deadline) {
        const std::string seen = evidence();  // before give_up: what the peer had done by the deadline
        give_up();
        throw Timeout(format_error(__FILE__, __LINE__, timeout_message(rank_, timeout_s_, call, peer, tag, count,
                                                                       seen + numbering())));
      }
      back_off(now - start);
    }
  }

 private:
  // "" for a world; "; in this sub-communicator ranks 0..n-1 are world ranks a, b, ..." (split.cpp)
  std::string numbering() const;
  bool test(MPI_Request& request);
  bool probe(int src, int tag, MPI_Message* message, MPI_Status* status);
  // 1 when a message from `peer` (any tag) waits here unreceived, 0 when
  // none does, -1 for no peer (a collective) or when MPI cannot say.
  int peer_pending(int peer);
  MPI_Request receive_matched(MPI_Message* message, const MPI_Status& status, float* data,
                              int64_t count, int src, int tag);
  void wait_collective(const CollectiveCall& call, MPI_Request& request);
  // failure.cpp: how long finish() waits for a silent rank after a failure;
  // printing who stayed silent and MPI_Abort.
  double grace_s() const;
  [[noreturn]] void abandon(const std::vector<int>& silent);

  const double timeout_s_;  // how long a wait may last
  MPI_Comm data_, control_;  // control_ is MPI_COMM_NULL in a sub-communicator
  int rank_ = 0, size_ = 1;
  MpiBackend* world_ = nullptr;  // a sub-communicator's world: its failure protocol
  std::vector<int> world_ranks_;  // a sub-communicator's ranks in the world; empty in a world
  // failure protocol (failure.cpp)
  std::mutex abort_mutex_;
  MPI_Request abort_request_ = MPI_REQUEST_NULL;  // our posted receive for an abort message
  std::vector<char> abort_buffer_;
  int abort_source_ = -1;
  std::atomic<bool> peer_failed_{false}, self_failed_{false};
  bool self_primary_ = false;
  std::string own_message_;  // 'P'/'S' + our error, what we send to peers
  std::vector<MPI_Request> abort_sends_;
  // Point-to-point messages completed with each world rank, counted in the
  // world's backend for this communicator and every group of it
  // (count_message); finish() compares what each peer sent with what this
  // process received. Atomic: async work may send from another thread.
  std::unique_ptr<std::atomic<int64_t>[]> sent_to_, received_from_;
  void count_message(bool sent, int peer);  // peer in this communicator's numbering
  // finish(), when nobody failed: the first message some peer sent this
  // process that it never received, or ""; then the lowest rank with one
  // tells every rank (unreceived.cpp).
  std::string unreceived_here(const std::vector<int64_t>& sent_to_me) const;
  RankFailure agree_on_unreceived(const std::string& mine);
};

/// A backend on two fresh duplicates of MPI_COMM_WORLD (starts MPI first).
/// Collective over all processes.
std::unique_ptr<MpiBackend> make_backend(double timeout_s);

/// Tag and size of abort messages on control_; the tag of finish()'s states.
constexpr int kAbortTag = 1;
constexpr int kAbortBytes = 4096;
constexpr int kStateTag = 2;

}  // namespace mpi
}  // namespace detail
}  // namespace dpt
