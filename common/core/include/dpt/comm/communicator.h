/// @file communicator.h
/// @brief `Communicator`: how ranks talk. Point-to-point messages that chapter
/// algorithms are built from, and library collectives that tests compare those
/// algorithms against (and later chapters use as tools).
///
/// Every rank holds one Communicator, handed out by `dpt::launch` (launch.h)
/// in `ctx.comm`. Two ranks swap n floats, then the library's oracle:
///
///     int peer = 1 - ctx.rank;                                            // ranks 0 and 1
///     ctx.comm.sendrecv(mine, n, peer, theirs, n, peer);                  // n floats each way
///     ctx.comm.all_reduce(grad.data(), grad.numel(), dpt::ReduceOp::Avg);  // the oracle
///     int64_t sent = ctx.comm.traffic().bytes(ctx.rank, peer);            // 4*n so far
///
/// Under `--comm threads` the ranks are threads of one process (an optional
/// simulated network, a deadlock report naming every waiting rank); under
/// `--comm mpi` each rank is one process started by mpirun.
///
/// Rules every backend keeps:
///  - Messages between one (src, dst, tag) are delivered in the order sent.
///  - A send of more than the eager limit waits until its receive is posted
///    (rendezvous); a smaller one is buffered and returns at once. Under MPI
///    the library sets the limit; under threads `--eager-limit` does (64 KiB
///    by default, like Open MPI over TCP). A large send therefore returns
///    only once its receiver has reached the matching recv (or sendrecv).
///  - A recv must name exactly the count that was sent; collectives must get
///    the same count (and root, and op) on every rank. A mismatch is a
///    dpt::Error naming both sides, never silent truncation.
///  - No call waits longer than `--comm-timeout`: it throws dpt::Timeout naming
///    the rank, the call and the peer it waited for (threads add what every
///    other rank is blocked on).
///  - When a rank fails, peers blocked on it throw dpt::PeerFailed ("stopped
///    because rank R failed: ...") and launch() reports the original error.
///  - Library collectives reduce in rank order under threads (every rank gets
///    the same bits as a serial loop), in MPI's order under MPI. Avg is Sum
///    divided by size().
///
/// Buffers may be host memory or GPU memory (a cuda:k tensor's data()), in
/// every backend: threads copies with cudaMemcpy and reduces with the CUDA
/// kernels, MPI stages GPU buffers through host memory, NCCL (`--comm nccl`)
/// takes them directly (and stages host buffers through the GPU). A call on GPU
/// buffers first waits for the calling thread's queued GPU work on them, and
/// returns when its results are in place. Under threads, every rank of a
/// reduction must pass the same kind of memory.
///
/// Sub-communicators (`split`, as MPI_Comm_split) give groups of ranks their
/// own ranks, collectives and traffic log: chapter 12's tensor-parallel rows,
/// chapter 13's pipeline stages (NCCL: ncclCommSplit). A rank failing anywhere
/// stops its peers waiting in any group (threads; MPI, NCCL: mpi_backend.h).
///
/// Integers and small records travel as typed messages: `send`/`recv` and
/// `all_gather` of any trivially copyable T (host memory), logged in bytes.
///
///     struct Seen { int32_t rank; int64_t step; float loss; };  // plain fields
///     Seen mine{ctx.rank, step, loss};
///     std::vector<Seen> all = ctx.comm.all_gather(mine);         // all[r] is rank r's
///
/// Left out: reductions of types other than float32, any-source/any-tag receives,
/// inter-communicators, MPI_UNDEFINED (every rank joins some group).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dpt/check.h"
#include "dpt/comm/async.h"
#include "dpt/comm/traffic_log.h"
#include "dpt/tensor.h"

namespace dpt {

class SpanRecorder;
namespace detail {
class Backend;
class AsyncQueue;
struct CommAccess;
}  // namespace detail

// ----------------------------------------------------------------------------
// reduce ops, errors

/// How a collective combines the ranks' values: elementwise sum, mean, maximum.
enum class ReduceOp { Sum, Avg, Max };
/// "sum", "avg" or "max".
const char* reduce_op_name(ReduceOp op);

/// Thrown on a rank that was talking to (or waiting on) peers when another rank
/// failed: "stopped because rank R failed: <R's message>".
class PeerFailed : public Error {
 public:
  using Error::Error;
};

// ----------------------------------------------------------------------------
// the communicator

/// One rank's endpoint. Pointers are host or GPU memory; counts are in floats.
/// Calls block until done unless named *_async.
class Communicator {
 public:
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /// This rank, 0 <= rank() < size().
  int rank() const { return rank_; }
  /// Number of ranks.
  int size() const { return size_; }
  /// "threads" or "mpi" (for printing; programs should not branch on it).
  const std::string& backend() const { return backend_name_; }
  /// Seconds a call may wait on a peer before it throws dpt::Timeout.
  double timeout_s() const { return timeout_s_; }
  /// The group's name ("tp", "dp"; "" for none): its calls' spans are named
  /// "tp all_reduce", so a timeline tells the groups apart (dpt::Grid names its groups).
  const std::string& name() const { return name_; }
  /// Names the group; its later calls' spans carry the name.
  void set_name(std::string name) { name_ = std::move(name); }

  // ---- point-to-point: what chapter algorithms are built from ----
  /// Sends data[0, count) to `dst`. Up to the eager limit it returns at once
  /// (the data is buffered); above it, it waits until `dst` posts the
  /// matching receive, as MPI does.
  void send(const float* data, int64_t count, int dst, int tag = 0);
  /// Receives exactly `count` floats from `src` into data[0, count).
  void recv(float* data, int64_t count, int src, int tag = 0);
  /// Sends to `dst` and receives from `src` in one call, the two in progress
  /// at once (MPI_Sendrecv). Returns when the receive is complete and
  /// send_buf may be reused. Buffers must not overlap.
  void sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                int64_t recv_count, int src, int tag = 0);

  // ---- library collectives: oracles for tests, tools for later chapters ----
  /// data (count,) becomes the elementwise reduction over ranks, in place.
  void all_reduce(float* data, int64_t count, ReduceOp op);
  /// send_buf is (size(), recv_count); rank r gets the reduction of row r of
  /// every rank's send_buf in recv_buf (recv_count,).
  void reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count, ReduceOp op);
  /// recv_buf (size(), send_count) gets every rank's send_buf (send_count,),
  /// row r from rank r. send_buf may be row rank() of recv_buf (in place).
  void all_gather(const float* send_buf, float* recv_buf, int64_t send_count);
  /// Every rank's data (count,) becomes root's.
  void broadcast(float* data, int64_t count, int root);
  /// Returns once every rank has called it.
  void barrier();

  // ---- typed messages: integers and small records, host memory ----
  /// Sends data[0, count) of a trivially copyable T (an integer, a struct of
  /// plain fields) to `dst`; the receiver names the same T and count. Logged
  /// as sizeof(T)·count bytes. Buffering and ordering as the float send.
  template <class T>
  void send(const T* data, int64_t count, int dst, int tag = 0) {
    check_typed<T>();
    send_bytes(data, count * int64_t(sizeof(T)), dst, tag);
  }
  /// Receives exactly `count` T from `src` into data[0, count).
  template <class T>
  void recv(T* data, int64_t count, int src, int tag = 0) {
    check_typed<T>();
    recv_bytes(data, count * int64_t(sizeof(T)), src, tag);
  }
  /// recv_buf (size(), send_count) of T gets every rank's send_buf
  /// (send_count,), row r from rank r; every rank passes the same count.
  template <class T>
  void all_gather(const T* send_buf, T* recv_buf, int64_t send_count) {
    check_typed<T>();
    all_gather_bytes(send_buf, recv_buf, send_count * int64_t(sizeof(T)));
  }
  /// Every rank's `value`, entry r from rank r (size() entries).
  template <class T>
  std::vector<T> all_gather(const T& value) {
    check_typed<T>();
    std::vector<T> all(static_cast<std::size_t>(size_));
    all_gather_bytes(&value, all.data(), int64_t(sizeof(T)));
    return all;
  }
  /// The typed calls' data movement: `bytes` bytes of host memory. A message
  /// travels as ceil(bytes/4) 4-byte words through the backend's float path
  /// (every backend's rules hold), so a receive naming another size is
  /// refused with the two sizes in words (the message calls them floats).
  void send_bytes(const void* data, int64_t bytes, int dst, int tag = 0);
  /// See send_bytes: receives exactly `bytes` bytes from `src`.
  void recv_bytes(void* data, int64_t bytes, int src, int tag = 0);
  /// recv_buf gets size() · bytes bytes, rank-major: `bytes` from each rank's
  /// send_buf (which may lie in recv_buf).
  void all_gather_bytes(const void* send_buf, void* recv_buf, int64_t bytes);

  // ---- non-blocking (async.h) ----
  /// Runs `op` on this rank's progress thread after earlier async work and
  /// returns at once. `op` may call this communicator (e.g. a ring all-reduce
  /// built from sendrecv), but must not wait() for work issued after it.
  /// Buffers it uses must stay alive until wait(). `op` runs on another
  /// thread, with its own GPU streams: GPU work it depends on must be ordered
  /// by the caller (record a gpu::Event, synchronize it in `op`).
  std::shared_ptr<Work> async(std::function<void()> op);
  /// all_reduce on the progress thread; data must stay alive until wait().
  /// GPU data: it starts after the GPU work this thread queued before the call.
  std::shared_ptr<Work> all_reduce_async(float* data, int64_t count, ReduceOp op);
  /// Waits for all async work; rethrows the first error nobody wait()ed for.
  void synchronize();

  // ---- Tensor conveniences (any device; output handles are views) ----
  /// send(t.data(), t.numel(), dst, tag).
  void send(const Tensor& tensor, int dst, int tag = 0);
  /// Receives tensor.numel() floats into `tensor` (a handle: views work).
  void recv(Tensor tensor, int src, int tag = 0);
  /// sendrecv of two tensors.
  void sendrecv(const Tensor& send_tensor, int dst, Tensor recv_tensor, int src, int tag = 0);
  /// all_reduce over all of `tensor`'s elements.
  void all_reduce(Tensor tensor, ReduceOp op);
  /// input has size() * output.numel() elements.
  void reduce_scatter(const Tensor& input, Tensor output, ReduceOp op);
  /// output has size() * input.numel() elements.
  void all_gather(const Tensor& input, Tensor output);
  /// broadcast of all of `tensor`'s elements.
  void broadcast(Tensor tensor, int root);
  /// all_reduce_async on a tensor (kept alive by the returned work).
  std::shared_ptr<Work> all_reduce_async(Tensor tensor, ReduceOp op);

  // ---- sub-communicators ----
  /// Collective over every rank of this communicator (each must call it): the
  /// ranks passing the same `color` (>= 0) form a new communicator, ranked by
  /// (key, this rank) as MPI_Comm_split does. The new one has this one's
  /// backend kind, timeout and tracer; its calls are logged in its own traffic log
  /// (ranks numbered in the new communicator).
  std::unique_ptr<Communicator> split(int color, int key);
  /// Parent rank of this communicator's rank r (r itself for a world communicator).
  int parent_rank(int r) const;

  // ---- traffic (traffic_log.h) ----
  /// This rank's handle on the traffic log.
  TrafficLog& traffic() { return traffic_; }
  /// Collective: every rank gets a standalone log with every rank's sends.
  TrafficLog gather_traffic();

 private:
  // Backends, launch and the trace writer reach the rest through
  // core/src/comm/backend.h (detail::CommAccess); chapters never need it.
  friend struct detail::CommAccess;
  Communicator(std::unique_ptr<detail::Backend> backend, int rank, int size, double timeout_s,
               TrafficLog traffic);
  template <class Body>
  void in_order(Body&& body);
  std::string span_name(const char* call) const { return name_.empty() ? call : name_ + " " + call; }
  template <class T>
  static void check_typed() {
    static_assert(std::is_trivially_copyable<T>::value && !std::is_pointer<T>::value,
                  "typed messages carry values whose bytes are the whole value (ints, plain structs), not pointers");
  }

  std::unique_ptr<detail::Backend> backend_;
  int rank_, size_;
  std::string backend_name_;
  double timeout_s_;
  TrafficLog traffic_;
  SpanRecorder* tracer_ = nullptr;  // where calls report their spans (span.h); may be null
  std::string name_;                // prefixes its calls' span names ("tp all_reduce"); "" for none
  std::vector<int> parent_ranks_;  // made by split: parent_ranks_[r] = parent rank of r; empty for a world
  std::unique_ptr<detail::AsyncQueue> async_;
};

/// True when this dpt was built with MPI (so `--comm mpi` can work).
bool mpi_available();

}  // namespace dpt
