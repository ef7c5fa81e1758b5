// comm_mpi.cpp — the MPI backend: one rank per process (Open MPI, or any MPI-3).
//
// Every wait is a polling loop over a non-blocking call (MPI_Isend, MPI_Improbe,
// MPI_Iallreduce, ...) instead of a blocking one, so that a rank can give up
// after the timeout with a dpt::Timeout naming itself and its peer, and can
// notice that a peer has failed.
//
// Two communicators, both duplicates of MPI_COMM_WORLD:
//   data_     everything the program sends;
//   control_  the failure protocol. Each rank keeps one receive posted for an
//             "abort" message. A rank whose function throws sends its error to
//             every peer; a peer polling anywhere sees it and throws
//             PeerFailed. At the end of launch every rank agrees on who failed
//             (an allgather), the first failure's message is broadcast, and
//             every abort message is received, so MPI finalises cleanly.
//
// Threads: MPI_Init_thread asks for MPI_THREAD_MULTIPLE, so chapter 05's
// async all-reduce can run on the progress thread while the rank thread
// computes. If the library offers less, thread_safe() is false and async work
// runs at once on the calling thread (correct, without overlap).
//
// Collectives start with a "preflight": a tiny MPI_Allreduce(MAX) of
// {kind, count, root, op} and their negations, so that a rank passing a
// different count (or calling a different collective) gets a dpt::Error on
// every rank instead of undefined behaviour. It costs one small all-reduce.
//
// Limits: counts above 2^31-1 floats are refused (MPI's int counts). After a
// timeout, an unmatched MPI_Isend is freed and a started collective is left
// behind (MPI cannot cancel either): the program is expected to end.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "dpt/comm.h"

namespace dpt {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kAbortTag = 1;
constexpr int kAbortBytes = 4096;

// ---- MPI start and end ----

int g_thread_level = MPI_THREAD_SINGLE;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void ensure_mpi_initialised() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised) {  // someone else started MPI: they finalise it too
      MPI_Query_thread(&g_thread_level);
      return;
    }
    // Open MPI 4.1's non-blocking all-reduce (libnbc), which do_all_reduce
    // polls, picks a binomial tree for in-place calls: the naive algorithm,
    // slow for large vectors. Ask for its ring, unless the user chose.
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
    DPT_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &g_thread_level));
    std::atexit(finalize_at_exit);
  });
}

int int_count(int64_t count, const char* call) {
  DPT_CHECK(count <= INT_MAX, call << ": " << count
                                   << " elements is more than MPI's int counts allow (2^31-1)");
  return int(count);
}

// Busy-polls for ~100 us, then yields, then sleeps: fast for the common case,
// kind to an oversubscribed machine (4 ranks on 2 cores) when waits are long.
void back_off(Clock::duration waited) {
  if (waited < std::chrono::microseconds(100)) return;
  if (waited < std::chrono::milliseconds(5)) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(100));
}

enum Kind { kAllReduce = 1, kReduceScatter, kAllGather, kBroadcast, kBarrier, kGatherBytes };
const char* kind_name(int64_t k) {
  static const char* names[] = {"?", "all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                "barrier", "all_gather_bytes"};
  return k >= 1 && k <= 6 ? names[k] : "?";
}

bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes && b_bytes && pa < pb + b_bytes && pb < pa + a_bytes;
}

// ----------------------------------------------------------------------------

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm data, MPI_Comm control, int rank, int size, double timeout_s)
      : Communicator(rank, size, "mpi", timeout_s, TrafficLog(size).view(rank)),
        data_(data), control_(control), abort_buffer_(kAbortBytes, '\0') {
    DPT_MPI_CHECK(MPI_Irecv(abort_buffer_.data(), kAbortBytes, MPI_CHAR, MPI_ANY_SOURCE, kAbortTag,
                            control_, &abort_request_));
  }

  ~MpiCommunicator() override {
    stop_async();
    std::lock_guard<std::mutex> lock(abort_mutex_);
    if (abort_request_ != MPI_REQUEST_NULL) {  // finish() never ran
      MPI_Cancel(&abort_request_);
      MPI_Wait(&abort_request_, MPI_STATUS_IGNORE);
    }
    for (MPI_Request& r : abort_sends_)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    MPI_Comm_free(&data_);
    MPI_Comm_free(&control_);
  }

  void fail(const std::string& message, bool primary) override;
  RankFailure finish() override;

 protected:
  bool thread_safe() const override { return g_thread_level >= MPI_THREAD_MULTIPLE; }

  void do_send(const float* data, int64_t count, int dst, int tag) override {
    MPI_Request request;
    DPT_MPI_CHECK(MPI_Isend(data, int_count(count, "send"), MPI_FLOAT, dst, tag, data_, &request));
    wait_for("send to", dst, tag, count, [&] { return test(request); },
             [&] { MPI_Request_free(&request); });
  }

  void do_recv(float* data, int64_t count, int src, int tag) override {
    MPI_Message message;
    MPI_Status status;
    wait_for("recv from", src, tag, count, [&] { return probe(src, tag, &message, &status); }, [] {});
    MPI_Request request = receive_matched(&message, status, data, count, src, tag);
    wait_for("recv from", src, tag, count, [&] { return test(request); }, [] {});
  }

  void do_sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                   int64_t recv_count, int src, int tag) override {
    MPI_Request send_request, recv_request = MPI_REQUEST_NULL;
    DPT_MPI_CHECK(MPI_Isend(send_buf, int_count(send_count, "sendrecv"), MPI_FLOAT, dst, tag, data_,
                            &send_request));
    bool sent = false, matched = false, received = false;
    wait_for("sendrecv from", src, tag, recv_count, [&] {
      if (!sent) sent = test(send_request);
      MPI_Message message;
      MPI_Status status;
      if (!matched && probe(src, tag, &message, &status)) {
        matched = true;
        try {
          recv_request = receive_matched(&message, status, recv_buf, recv_count, src, tag);
        } catch (...) {
          if (!sent) MPI_Request_free(&send_request);
          throw;
        }
      }
      if (matched && !received) received = test(recv_request);
      return sent && received;
    }, [&] { if (!sent) MPI_Request_free(&send_request); });
  }

  void do_all_reduce(float* data, int64_t count, ReduceOp op) override {
    preflight(kAllReduce, count, 0, op);
    MPI_Request request;
    DPT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, int_count(count, "all_reduce"), MPI_FLOAT,
                                 MPI_SUM, data_, &request));
    wait_collective(kAllReduce, count, request);
    if (op == ReduceOp::Avg) divide(data, count);
  }

  void do_reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count,
                         ReduceOp op) override {
    preflight(kReduceScatter, recv_count, 0, op);
    bool staged = overlaps(recv_buf, 4 * recv_count, send_buf, 4 * recv_count * size());
    std::vector<float> stage(staged ? recv_count : 0);
    float* out = staged ? stage.data() : recv_buf;
    MPI_Request request;
    DPT_MPI_CHECK(MPI_Ireduce_scatter_block(send_buf, out, int_count(recv_count, "reduce_scatter"),
                                            MPI_FLOAT, MPI_SUM, data_, &request));
    wait_collective(kReduceScatter, recv_count, request);
    if (staged) std::memcpy(recv_buf, out, 4 * recv_count);
    if (op == ReduceOp::Avg) divide(recv_buf, recv_count);
  }

  void do_all_gather(const float* send_buf, float* recv_buf, int64_t send_count) override {
    preflight(kAllGather, send_count, 0, ReduceOp::Sum);
    int n = int_count(send_count, "all_gather");
    int_count(send_count * size(), "all_gather");
    bool in_place = send_buf == recv_buf + rank() * send_count;
    bool staged = !in_place && overlaps(recv_buf, 4 * send_count * size(), send_buf, 4 * send_count);
    std::vector<float> stage(staged ? send_count : 0);
    if (staged) std::memcpy(stage.data(), send_buf, 4 * send_count);
    const void* source = in_place ? MPI_IN_PLACE : staged ? stage.data() : send_buf;
    MPI_Request request;
    DPT_MPI_CHECK(MPI_Iallgather(source, n, MPI_FLOAT, recv_buf, n, MPI_FLOAT, data_, &request));
    wait_collective(kAllGather, send_count, request);
  }

  void do_broadcast(float* data, int64_t count, int root) override {
    preflight(kBroadcast, count, root, ReduceOp::Sum);
    MPI_Request request;
    DPT_MPI_CHECK(MPI_Ibcast(data, int_count(count, "broadcast"), MPI_FLOAT, root, data_, &request));
    wait_collective(kBroadcast, count, request);
  }

  void do_barrier() override {
    preflight(kBarrier, 0, 0, ReduceOp::Sum);
    MPI_Request request;
    DPT_MPI_CHECK(MPI_Ibarrier(data_, &request));
    wait_collective(kBarrier, 0, request);
  }

  void do_all_gather_bytes(const void* send, void* recv, int64_t bytes) override {
    preflight(kGatherBytes, bytes, 0, ReduceOp::Sum);
    int n = int_count(bytes, "all_gather_bytes");
    MPI_Request request;
    DPT_MPI_CHECK(MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, data_, &request));
    wait_collective(kGatherBytes, bytes, request);
  }

 private:
  bool test(MPI_Request& request) {
    int done = 0;
    DPT_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    return done != 0;
  }

  bool probe(int src, int tag, MPI_Message* message, MPI_Status* status) {
    int found = 0;
    DPT_MPI_CHECK(MPI_Improbe(src, tag, data_, &found, message, status));
    return found != 0;
  }

  // Starts receiving a probed message into data; a count mismatch is drained
  // into a scratch buffer (so MPI is left clean) and reported.
  MPI_Request receive_matched(MPI_Message* message, const MPI_Status& status, float* data,
                              int64_t count, int src, int tag) {
    int sent = 0;
    MPI_Status copy = status;
    DPT_MPI_CHECK(MPI_Get_count(&copy, MPI_FLOAT, &sent));
    if (sent != count) {
      std::vector<float> sink(std::max(sent, 1));
      DPT_MPI_CHECK(MPI_Mrecv(sink.data(), sent, MPI_FLOAT, message, MPI_STATUS_IGNORE));
      DPT_FAIL("rank " << rank() << " expected " << count << " floats from rank " << src << " (tag "
                       << tag << "), but rank " << src << " sent " << sent
                       << " floats: a recv must name exactly the count of its send");
    }
    MPI_Request request;
    DPT_MPI_CHECK(MPI_Imrecv(data, int(count), MPI_FLOAT, message, &request));
    return request;
  }

  void divide(float* data, int64_t count) {
    const float n = float(size());
    for (int64_t i = 0; i < count; ++i) data[i] /= n;
  }

  // Calls try_complete() until it returns true. Between tries: stop if this
  // rank or a peer has failed, give up at the deadline (give_up() releases
  // what MPI still holds), back off.
  template <class Try, class GiveUp>
  void wait_for(const char* call, int peer, int tag, int64_t count, Try&& try_complete,
                GiveUp&& give_up) {
    Clock::time_point start = Clock::now();
    Clock::time_point deadline =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s()));
    for (;;) {
      if (try_complete()) return;
      std::string stop = stop_reason();
      if (!stop.empty()) {
        give_up();
        throw PeerFailed(detail::format_error(__FILE__, __LINE__, stop));
      }
      Clock::time_point now = Clock::now();
      if (now >= deadline) {
        give_up();
        std::ostringstream msg;
        char waited[32];
        std::snprintf(waited, sizeof waited, "%.1f", timeout_s());
        const char* floats = count == 1 ? " float" : " floats";
        msg << "rank " << rank() << " waited " << waited << " s in " << call;
        if (peer >= 0) msg << " rank " << peer << " (tag " << tag << ", " << count << floats << ")";
        else if (std::strcmp(call, "barrier") == 0) msg << ": some rank has not called it";
        else msg << " (" << count << floats << "): some rank has not called it";
        msg << "; under MPI the other ranks' states are not visible here: look for their own "
               "messages (raise --comm-timeout if a peer is only slow)";
        throw Timeout(detail::format_error(__FILE__, __LINE__, msg.str()));
      }
      back_off(now - start);
    }
  }

  void wait_collective(int kind, int64_t count, MPI_Request& request) {
    wait_for(kind_name(kind), -1, 0, count, [&] { return test(request); }, [] {});
  }

  // Every rank passes {kind, count, root, op}; a MAX-reduction of them and
  // their negations gives each field's max and -min, equal iff all agree.
  void preflight(int kind, int64_t count, int root, ReduceOp op) {
    // On the heap, not the stack: if a peer fails while this all-reduce is in
    // flight we abandon it, and MPI may still write the result later.
    auto values = std::make_unique<int64_t[]>(8);
    int64_t* v = values.get();
    const int64_t fields[8] = {kind, -kind, count, -count, root, -root, int64_t(op), -int64_t(op)};
    std::copy(fields, fields + 8, v);
    MPI_Request request;
    DPT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, v, 8, MPI_INT64_T, MPI_MAX, data_, &request));
    try {
      wait_collective(kind, count, request);
    } catch (...) {
      keep_until_exit(std::move(values));
      throw;
    }
    const char* what = kind_name(kind);
    DPT_CHECK(v[0] == -v[1], "ranks called different collectives at the same point ("
                                 << kind_name(-v[1]) << " and " << kind_name(v[0])
                                 << "): every rank must call the same collectives in the same order");
    DPT_CHECK(v[2] == -v[3], what << ": ranks passed different counts (from " << -v[3] << " to "
                                  << v[2] << "): every rank must pass the same count");
    DPT_CHECK(v[4] == -v[5], what << ": ranks named different roots (from " << -v[5] << " to " << v[4] << ")");
    DPT_CHECK(v[6] == -v[7], what << ": ranks asked for different reductions (sum and avg)");
  }

  // An abandoned non-blocking call's buffer must outlive it: kept to the end.
  static void keep_until_exit(std::unique_ptr<int64_t[]> buffer) {
    static std::mutex mutex;
    static std::vector<std::unique_ptr<int64_t[]>> kept;
    std::lock_guard<std::mutex> lock(mutex);
    kept.push_back(std::move(buffer));
  }

  // ---- failure protocol ----

  // Non-empty when this rank must stop: it failed itself (its async work is
  // still running), or a peer's abort message has arrived.
  std::string stop_reason() {
    if (self_failed_.load()) {
      std::lock_guard<std::mutex> lock(abort_mutex_);
      return "stopped because rank " + std::to_string(rank()) + " failed: " + own_message_.substr(1);
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

  MPI_Comm data_, control_;
  std::mutex abort_mutex_;
  MPI_Request abort_request_ = MPI_REQUEST_NULL;  // our posted receive for an abort message
  std::vector<char> abort_buffer_;
  int abort_source_ = -1;
  std::atomic<bool> peer_failed_{false}, self_failed_{false};
  bool self_primary_ = false;
  std::string own_message_;  // 'P'/'S' + our error, what we send to peers
  std::vector<MPI_Request> abort_sends_;
};

void MpiCommunicator::fail(const std::string& message, bool primary) {
  std::lock_guard<std::mutex> lock(abort_mutex_);
  if (self_failed_.load()) return;
  own_message_ = std::string(primary ? "P" : "S") + message.substr(0, kAbortBytes - 2);
  self_primary_ = primary;
  self_failed_ = true;
  // Tell every peer; their polling loops (and finish()) pick it up.
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank()) continue;
    abort_sends_.emplace_back();
    DPT_MPI_CHECK(MPI_Isend(own_message_.data(), int(own_message_.size()) + 1, MPI_CHAR, peer,
                            kAbortTag, control_, &abort_sends_.back()));
  }
}

RankFailure MpiCommunicator::finish() {
  // 1. Who failed: 0 ok, 1 primary failure, 2 PeerFailed. No timeout: a peer
  //    may compute for long after we are done (as MPI_Finalize would wait).
  int mine = !self_failed_.load() ? 0 : self_primary_ ? 1 : 2;
  std::vector<int> states(size());
  MPI_Request request;
  DPT_MPI_CHECK(MPI_Iallgather(&mine, 1, MPI_INT, states.data(), 1, MPI_INT, control_, &request));
  for (Clock::time_point start = Clock::now(); !test(request);) back_off(Clock::now() - start);

  RankFailure failure;
  for (int want : {1, 2})
    for (int r = 0; r < size() && !failure.any(); ++r)
      if (states[r] == want) failure.rank = r;
  // 2. Its message, from itself.
  if (failure.any()) {
    std::vector<char> text(kAbortBytes, '\0');
    if (failure.rank == rank()) std::memcpy(text.data(), own_message_.c_str(), own_message_.size() + 1);
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
  for (int r = 0; r < size(); ++r) {
    if (r == rank() || r == received_from || states[r] == 0) continue;
    std::vector<char> sink(kAbortBytes);
    DPT_MPI_CHECK(MPI_Recv(sink.data(), kAbortBytes, MPI_CHAR, r, kAbortTag, control_, MPI_STATUS_IGNORE));
  }
  if (!abort_sends_.empty())
    DPT_MPI_CHECK(MPI_Waitall(int(abort_sends_.size()), abort_sends_.data(), MPI_STATUSES_IGNORE));
  abort_sends_.clear();
  return failure;
}

}  // namespace

namespace detail {
// Called by comm_factory_mpi.cpp.
std::unique_ptr<Communicator> new_mpi_communicator(double timeout_s) {
  ensure_mpi_initialised();
  MPI_Comm data, control;
  DPT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &data));
  DPT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &control));
  // Errors come back as return codes, which DPT_MPI_CHECK turns into dpt::Error.
  DPT_MPI_CHECK(MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN));
  DPT_MPI_CHECK(MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN));
  int rank = 0, size = 1;
  MPI_Comm_rank(data, &rank);
  MPI_Comm_size(data, &size);
  auto comm = std::make_unique<MpiCommunicator>(data, control, rank, size, timeout_s);
  // Every process leaves here together (launch() reads its clock next).
  DPT_MPI_CHECK(MPI_Barrier(control));
  return comm;
}
}  // namespace detail

}  // namespace dpt
