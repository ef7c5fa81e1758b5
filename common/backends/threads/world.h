// world.h — the state every rank of a threads world shares, and where each
// part of it is implemented:
//
//   mailbox.cpp      point-to-point: eager and rendezvous sends, receives,
//                    sendrecv's lent buffers — where a message is copied
//   buffer_pool.cpp  the reused buffers eager copies live in
//   collectives.cpp  all_reduce, reduce_scatter, ... through shared slots
//   gpu_collectives.cpp  the reductions when the buffers are GPU memory
//   link_clock.cpp   the simulated network (alpha-beta ports, sleeps)
//   wait_report.cpp  what a timeout says: every rank's wait (deadlock report)
//   lifecycle.cpp    a rank failing, a rank finishing its function
//   split.cpp        sub-worlds (Communicator::split): a World per group,
//                    told by its parent when a world rank fails or finishes
//   threads_backend.cpp  the Backend adapter and make_threads_world
//
// One mutex guards everything here; each rank sleeps on its own condition
// variable. Every wait has a deadline (the timeout) and watches the abort
// flag, except waits a peer is sure to end soon (a copy under way, phase B of
// a collective). Left out: any lock-free path — clarity first.
//
// A sub-world (split.cpp) is a World of its own (mailboxes, slots, mutex),
// numbered in its own ranks. Locks are taken parent before child, never the
// other way; the link ports are shared by the whole tree, under their own
// mutex, taken last (Ports).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backends.h"
#include "comm/call_check.h"

namespace dpt {
namespace detail {
namespace threads {

using Clock = std::chrono::steady_clock;

/// Seconds as a clock duration.
Clock::duration to_duration(double seconds);
/// Sleeps until `when`, finishing with short yields (a plain sleep overshoots
/// by ~50-100 us, more than an NVLink message's whole latency).
void sleep_until_precise(Clock::time_point when);

// ----------------------------------------------------------------------------
// what a rank is blocked on (wait_report.cpp prints it)

struct WaitState {
  const char* call;  // "recv", "send", "all_reduce", ...
  int peer;          // -1 for collectives
  int tag;
  int64_t count;     // floats (bytes for all_gather_bytes)
  bool to_peer;      // waiting for `peer` to take our message
  int64_t eager_limit = -1;  // >= 0: a rendezvous send above this many bytes
};
/// "in recv from rank 1 (tag 0, 3 floats)", "in send to rank 1 (... rendezvous ...)".
std::string describe(const WaitState& w);

// ----------------------------------------------------------------------------
// point-to-point (mailbox.cpp draws their state machines)

struct LentSend {  // a sender's own buffer, lent to the receiver
  enum State { Queued, Claimed, Taken, Failed };
  State state = Queued;
  std::string error;
  bool peer_stopped = false;  // Failed because the receiver stopped (a PeerFailed)
};

struct Message {
  std::unique_ptr<float[]> owned;  // an eager send's copy (capacity >= count), or
  int64_t capacity = 0;
  const float* lent = nullptr;     // a lent buffer, and its state
  LentSend* lender = nullptr;
  int64_t count = 0;
  Clock::time_point arrival;
  const float* data() const { return lent ? lent : owned.get(); }
};

struct PostedRecv {  // a receive waiting in a mailbox
  enum State { Posted, Claimed, Done, Failed };
  PostedRecv(float* buf, int64_t n) : buffer(buf), count(n) {}
  float* buffer;
  int64_t count;
  State state = Posted;
  Message message;  // when Done by taking a queued message (copied out later)
  bool has_message = false;
  Clock::time_point arrival;
  std::string error;
};

struct Mailbox {  // one per (src, dst, tag)
  std::deque<Message> messages;
  std::deque<PostedRecv*> posted;  // never both non-empty at rest
};

// ----------------------------------------------------------------------------
// collectives (collectives.cpp)

struct Slot {  // one rank's call, posted for the others to read
  CollectiveCall call;
  const void* send = nullptr;
  void* recv = nullptr;
};

// ----------------------------------------------------------------------------
// the simulated link's ports (link_clock.cpp): one per world rank, shared by a
// world and all its sub-worlds, since a rank has one network port whichever
// communicator it sends on. Its mutex is a leaf: nothing is locked under it.

struct Ports {
  explicit Ports(int size) : out_free(size), in_free(size) {}
  std::mutex mutex;
  std::vector<std::chrono::steady_clock::time_point> out_free, in_free;  // by world rank
};

class World;
/// What World::split hands a member: the group's World, its shared traffic log
/// and the member's rank in it.
struct SubWorld {
  std::shared_ptr<World> world;
  TrafficLog traffic;
  int rank = 0;
};

// ----------------------------------------------------------------------------
// the world

/// Where a sub-world leaves the first message it saw unreceived when it ended
/// (its World destroyed), for the world above it to report (split.cpp). Shared
/// by the parent and its children; its mutex is a leaf.
struct Leftovers {
  std::mutex mutex;
  std::string first;  ///< "" while none was seen
  void record(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (first.empty()) first = message;
  }
  std::string get() {
    std::lock_guard<std::mutex> lock(mutex);
    return first;
  }
};

class World {
 public:
  World(int size, const ThreadsWorldOptions& options);
  /// A sub-world hands what it left unreceived to its parent (split.cpp).
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // ---- mailbox.cpp ----
  void send(int me, const float* data, int64_t count, int dst, int tag);
  void recv(int me, float* data, int64_t count, int src, int tag);
  void sendrecv(int me, const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                int64_t recv_count, int src, int tag);
  // ---- collectives.cpp ----
  void all_reduce(int me, float* data, int64_t count, ReduceOp op);
  void reduce_scatter(int me, const float* send_buf, float* recv_buf, int64_t recv_count, ReduceOp op);
  void all_gather(int me, const float* send_buf, float* recv_buf, int64_t send_count);
  void broadcast(int me, float* data, int64_t count, int root);
  void barrier(int me);
  void all_gather_bytes(int me, const void* send, void* recv, int64_t bytes);
  // ---- lifecycle.cpp ----
  void fail(int me, const std::string& message, bool primary);
  RankFailure finish(int me);
  // ---- split.cpp ----
  /// Rank `me`'s sub-world of the ranks `members` (in their new order; the
  /// caller gathered them): the first member to ask makes it, the others take it.
  SubWorld split(int me, const std::vector<int>& members);

 private:
  // ---- split.cpp: what a parent tells its sub-worlds (their mutex not held) ----
  void stop_from_parent(int world_rank, const std::string& message);
  void finished_in_parent(int parent_rank);
  void stop_children();  // mutex_ held: pass this world's failure down
  /// "rank 2" in a world; "rank 2 (world rank 5)" in a sub-world.
  std::string name(int r) const;
  /// A failed world rank as this world names it (it may not be a member).
  std::string world_name(int world_rank) const;
  int world_rank(int r) const { return world_ranks_.empty() ? r : world_ranks_[r]; }
  /// "" in a world; "; in this sub-communicator ranks 0, 1 are world ranks 4, 5".
  std::string numbering() const;
  using Share = std::function<void(const std::vector<Slot>&)>;
  // ---- gpu_collectives.cpp: reductions over buffers on GPU `device` ----
  void all_reduce_on_gpu(int me, float* data, int64_t count, ReduceOp op, int device);
  void reduce_scatter_on_gpu(int me, const float* send_buf, float* recv_buf, int64_t recv_count,
                             ReduceOp op, int device);
  // ---- collectives.cpp: `share` is this rank's part of the work, between
  // phases A and B; `after` runs once every rank's share is done ----
  void collective(int me, const Slot& slot, const Share& share, const std::function<void()>& after);
  // ---- mailbox.cpp (mutex_ held unless said) ----
  Mailbox& box(int src, int dst, int tag) { return boxes_[{src, dst, tag}]; }
  void post(int me, PostedRecv& r, int src, int tag);
  void copy_to_posted(std::unique_lock<std::mutex>& lock, Mailbox& mb, const float* data,
                      int64_t count, int me, int dst, int tag, Clock::time_point arrival);
  void queue_eager(std::unique_lock<std::mutex>& lock, Mailbox& mb, const float* data,
                   int64_t count, int dst, Clock::time_point arrival);
  void lend(Mailbox& mb, const float* data, int64_t count, LentSend* lent, int dst,
            Clock::time_point arrival);
  void wait_p2p(std::unique_lock<std::mutex>& lock, int me, PostedRecv* r, int src, LentSend* lent,
                int dst, int tag, const WaitState& sending);
  void withdraw(std::unique_lock<std::mutex>& lock, int me, PostedRecv* r, int src, LentSend* lent,
                int dst, int tag);
  void copy_out(int me, PostedRecv& r, int src, int tag);  // without mutex_
  Message take_buffer(int64_t count);
  void recycle(Message& m);
  // ---- link_clock.cpp ----
  std::pair<Clock::time_point, Clock::time_point> reserve_link(int src, int dst, int64_t bytes);
  double modelled_seconds(const CollectiveCall& call) const;
  void sleep_on_link(int me, Clock::time_point when, const char* call) const;
  // ---- wait_report.cpp ----
  [[noreturn]] void throw_timeout(int me, const WaitState& what, const std::string& waiting_for);
  std::string others_status(int me) const;
  // ": rank 1 is sending to this rank too, …" / ": rank 1 is in no
  // communication call, …": what the peer `what` waits on is doing, when it
  // names a cause; "" otherwise (wait_report.cpp).
  std::string peer_evidence(int me, const WaitState& what) const;
  std::string leftover_messages() const;
  // ---- lifecycle.cpp ----
  void check_not_aborted();
  void wake_all() { for (auto& cv : wake_) cv->notify_all(); }

  const int size_;
  const ThreadsWorldOptions options_;  // what sub-worlds are made with
  const Clock::duration timeout_;
  const double timeout_s_;
  const LinkModel link_;
  const int64_t eager_limit_;  // bytes; larger sends wait for their receive
  std::mutex mutex_;
  std::vector<std::unique_ptr<std::condition_variable>> wake_;  // one per rank
  // mailboxes
  std::map<std::tuple<int, int, int>, Mailbox> boxes_;  // (src, dst, tag)
  std::vector<std::pair<std::unique_ptr<float[]>, int64_t>> pool_;  // (buffer, capacity)
  int64_t pooled_bytes_ = 0;
  // link model ports (by world rank)
  std::shared_ptr<Ports> ports_;
  // sub-worlds (split.cpp)
  std::vector<int> parent_ranks_, world_ranks_;  // per rank here; both empty in a world
  std::vector<std::weak_ptr<World>> children_;
  std::shared_ptr<Leftovers> leftovers_ = std::make_shared<Leftovers>();  // what children left unreceived
  std::shared_ptr<Leftovers> parent_leftovers_;                           // a sub-world's parent's; null in a world
  struct PendingSplit {
    std::shared_ptr<World> world;
    TrafficLog traffic;
    int waiting;  // members yet to take it
  };
  std::map<std::pair<int64_t, int>, PendingSplit> pending_splits_;  // (split number, first member)
  std::vector<int64_t> splits_made_;  // per rank
  // collectives
  std::vector<Slot> slots_;
  std::vector<bool> arrived_;
  int arrived_count_ = 0, done_count_ = 0;
  uint64_t phase_a_ = 0, phase_b_ = 0;  // generations
  std::string collective_error_;
  Clock::time_point collective_start_;
  std::vector<float> scratch_;  // all_reduce's result, sized at phase A
  // status
  std::vector<std::vector<const WaitState*>> waits_;  // per rank: what it is blocked on
  std::vector<bool> finished_;
  int finished_count_ = 0;
  bool aborted_ = false;
  RankFailure failure_;
  int failed_world_rank_ = -1;  // failure_'s rank, in world numbering
  bool failure_primary_ = false;
};

/// Registers a wait of one rank for the report while in scope (mutex held at
/// both ends).
class WaitScope {
 public:
  WaitScope(std::vector<const WaitState*>& list, const WaitState& state) : list_(list), state_(&state) {
    list_.push_back(state_);
  }
  ~WaitScope();

 private:
  std::vector<const WaitState*>& list_;
  const WaitState* state_;
};

}  // namespace threads
}  // namespace detail
}  // namespace dpt
