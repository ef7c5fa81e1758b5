/// @file comm.h
/// @brief `Communicator`: how ranks talk. Point-to-point messages that chapter
/// algorithms are built from, library collectives that tests compare those
/// algorithms against, non-blocking work, and a traffic log of who sent how
/// many bytes to whom.
///
/// Every rank holds one Communicator (from `dpt::launch`, see launch.h). Its
/// backend is either *threads* (N ranks as threads of one process: mailboxes in
/// shared memory, an optional alpha-beta link model, a deadlock timeout that
/// names the waiting ranks) or *mpi* (one rank per process, Open MPI).
///
///     // a ring step: send my chunk right, receive my left neighbour's chunk
///     int right = (ctx.rank + 1) % ctx.world, left = (ctx.rank + ctx.world - 1) % ctx.world;
///     ctx.comm.sendrecv(mine, n, right, theirs, n, left);
///     ctx.comm.all_reduce(grad.data(), grad.numel(), dpt::ReduceOp::Avg);   // the oracle
///     int64_t sent = ctx.comm.traffic().bytes(ctx.rank, right);           // 4*n so far
///
/// Rules every backend keeps:
///  - Messages between one (src, dst, tag) are delivered in the order sent.
///  - A recv must name exactly the count that was sent; collectives must get
///    the same count (and root, and op) on every rank. A mismatch is a
///    dpt::Error naming both sides, never silent truncation.
///  - No call waits longer than the timeout (`--comm-timeout`): it throws
///    dpt::Timeout naming the rank, the call and the peer it waited for (the
///    threads backend adds what every other rank is blocked on).
///  - When a rank fails (a timeout included), peers blocked on it throw
///    dpt::PeerFailed ("stopped because rank R failed: ...") and launch()
///    reports the original error.
///  - Library collectives sum in rank order under threads (so every rank gets
///    the same bits, equal to a serial loop); under MPI in MPI's order. Avg
///    is Sum divided by size().
///
/// Deliberately left out: datatypes other than float32, any-source/any-tag
/// receives, sub-communicators, reduce ops other than Sum/Avg, and device
/// (CUDA) memory — every pointer here is host memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/check.h"
#include "dpt/tensor.h"

namespace dpt {

class Tracer;

// ----------------------------------------------------------------------------
// reduce ops, errors

/// How a collective combines the ranks' values.
enum class ReduceOp { Sum, Avg };
/// "sum" or "avg".
const char* reduce_op_name(ReduceOp op);

/// Thrown on a rank that was talking to (or waiting on) peers when another rank
/// failed: "stopped because rank R failed: <R's message>".
class PeerFailed : public Error {
 public:
  using Error::Error;
};

// ----------------------------------------------------------------------------
// alpha-beta link model (threads backend)

/// The cost model of a network link: a message of S bytes takes
/// `latency_us` (alpha) plus S / bandwidth (beta) to arrive. Zero fields mean
/// "free": the default model delivers messages as fast as memcpy.
struct LinkModel {
  double latency_us = 0;  ///< alpha, microseconds per message
  double gbps = 0;        ///< beta, gigabits per second (8 Gbps = 1 GB/s); 0 = unlimited
  /// True when either field is set.
  bool enabled() const { return latency_us > 0 || gbps > 0; }
  /// Seconds `bytes` occupy a port: 8*bytes / (gbps*1e9); 0 when gbps is 0.
  double transfer_seconds(int64_t bytes) const;
  /// "25.0 GB/s (200 Gbit/s), 10 us latency" or "none".
  std::string describe() const;
};

/// A named preset: "none", "pcie", "nvlink", "ethernet", "infiniband" (numbers
/// and their sources are in comm.cpp). Throws dpt::Error on another name.
LinkModel link_preset(const std::string& name);
/// The names link_preset() accepts.
const std::vector<std::string>& link_preset_names();

// ----------------------------------------------------------------------------
// traffic log

/// Who sent how many bytes to whom, per step. Point-to-point messages are
/// recorded per (src, dst) pair at the sender, under the sender's current step;
/// library collectives are recorded apart, per collective name ("all_reduce",
/// "reduce_scatter", "all_gather", "broadcast", "barrier") and rank, as the
/// payload bytes each rank passed in (their wire bytes depend on the algorithm).
///
/// A rank's communicator hands out a handle bound to that rank. Threads ranks
/// share one table (every query sees every rank's sends); an MPI process sees
/// only its own sends until `Communicator::gather_traffic()` collects them all.
/// Thread-safe.
class TrafficLog {
 public:
  /// An empty standalone table for `world` ranks (records as no rank).
  explicit TrafficLog(int world = 1);
  /// A handle onto the same table that records as `rank` (0 <= rank < world()).
  TrafficLog view(int rank) const;

  /// Number of ranks the table has rows for.
  int world() const;
  /// The rank this handle records as (-1 for a standalone table).
  int rank() const { return rank_; }

  // ---- steps: set by the rank's own code, e.g. once per training step ----
  /// Records this rank's later sends under `step` (>= 0). Per rank.
  void set_step(int64_t step);
  /// set_step(step() + 1).
  void begin_step();
  /// This rank's current step (0 at the start).
  int64_t step() const;

  // ---- recording (the communicator does this; chapters never need to) ----
  /// One message of `bytes` from this rank to `dst`.
  void record_send(int dst, int64_t bytes);
  /// One call of library collective `name` by this rank with `bytes` of payload.
  void record_collective(const std::string& name, int64_t bytes);

  // ---- queries (totals over all steps unless a step is given) ----
  /// Bytes `src` sent to `dst`.
  int64_t bytes(int src, int dst) const;
  /// Bytes `src` sent to `dst` during `step`.
  int64_t bytes(int src, int dst, int64_t step) const;
  /// Messages `src` sent to `dst`.
  int64_t messages(int src, int dst) const;
  /// Bytes `rank` sent to anyone.
  int64_t bytes_sent(int rank) const;
  /// Bytes anyone sent to `rank`.
  int64_t bytes_received(int rank) const;
  /// Bytes of all point-to-point messages of `step`.
  int64_t step_bytes(int64_t step) const;
  /// Bytes of all point-to-point messages.
  int64_t total_bytes() const;
  /// matrix()[src][dst] = bytes; world() x world().
  std::vector<std::vector<int64_t>> matrix() const;
  /// The steps that have point-to-point traffic, ascending.
  std::vector<int64_t> steps() const;
  /// Payload bytes passed to collective `name` by `rank` (-1: all ranks).
  int64_t collective_bytes(const std::string& name, int rank = -1) const;
  /// Calls of collective `name` by `rank` (-1: summed over ranks).
  int64_t collective_calls(const std::string& name, int rank = -1) const;
  /// Forgets everything (for every rank sharing the table); steps are kept.
  void clear();
  /// The byte matrix as a small text table (rows: src, columns: dst).
  std::string to_string() const;

  // ---- plumbing for gather_traffic() ----
  /// This handle's own records (sends by rank(), collective calls by rank())
  /// as flat int64 records.
  std::vector<int64_t> own_records() const;
  /// Adds records made by own_records() (of any rank) to this table.
  void merge_records(const std::vector<int64_t>& records);

 private:
  struct Table;
  TrafficLog(std::shared_ptr<Table> table, int rank) : table_(std::move(table)), rank_(rank) {}
  std::shared_ptr<Table> table_;
  int rank_ = -1;
};

// ----------------------------------------------------------------------------
// non-blocking work

/// Handle of a non-blocking operation (see Communicator::async).
class Work {
 public:
  virtual ~Work();
  /// Blocks until the operation has finished; rethrows its error, if any.
  virtual void wait() = 0;
  /// True once the operation has finished (successfully or not).
  virtual bool done() = 0;
};

/// What launch() learns when every rank's function has ended.
struct RankFailure {
  int rank = -1;        ///< the rank whose error came first; -1 when all succeeded
  std::string message;  ///< its error message
  /// True when some rank failed.
  bool any() const { return rank >= 0; }
};

// ----------------------------------------------------------------------------
// the communicator

/// One rank's endpoint. All pointers are host memory; counts are in floats.
/// Calls are blocking unless named *_async. The public calls check their
/// arguments, record traffic and trace spans, then dispatch to the backend
/// (the protected do_* functions: the one level of virtual dispatch).
///
/// Async work runs on a per-rank progress thread, in issue order. A blocking
/// call made while async work is pending waits its turn behind it, so a
/// program means the same with or without _async.
class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /// This rank, 0 <= rank() < size().
  int rank() const { return rank_; }
  /// Number of ranks.
  int size() const { return size_; }
  /// "threads" or "mpi".
  const std::string& backend() const { return backend_; }
  /// Seconds a call may wait on a peer before it throws dpt::Timeout.
  double timeout_s() const { return timeout_s_; }

  // ---- point-to-point: what chapter algorithms are built from ----
  /// Sends data[0, count) to `dst`. Under threads it returns before `dst` has
  /// received (the data is buffered), so it never deadlocks by itself; under
  /// MPI a large send waits for the matching recv: use sendrecv on a ring.
  void send(const float* data, int64_t count, int dst, int tag = 0);
  /// Receives exactly `count` floats from `src` into data[0, count).
  void recv(float* data, int64_t count, int src, int tag = 0);
  /// Sends to `dst` and receives from `src` at once: safe when every rank of a
  /// ring calls it together. Returns when the receive is complete and
  /// send_buf may be reused. Buffers must not overlap.
  void sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                int64_t recv_count, int src, int tag = 0);

  // ---- library collectives: oracles for tests, tools for later chapters ----
  /// data (count,) becomes the elementwise sum (or mean) over ranks, in place.
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

  // ---- non-blocking ----
  /// Runs `op` on this rank's progress thread after earlier async work and
  /// returns at once. `op` may call this communicator (e.g. a ring all-reduce
  /// built from sendrecv), but must not wait() for work issued after it.
  /// Buffers it uses must stay alive until wait().
  std::shared_ptr<Work> async(std::function<void()> op);
  /// all_reduce on the progress thread; data must stay alive until wait().
  std::shared_ptr<Work> all_reduce_async(float* data, int64_t count, ReduceOp op);
  /// Waits for all async work; rethrows the first error nobody wait()ed for.
  void synchronize();

  // ---- Tensor conveniences (host-memory tensors; output handles are views) ----
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

  // ---- traffic ----
  /// This rank's handle on the traffic log (see TrafficLog).
  TrafficLog& traffic() { return traffic_; }
  /// Collective: every rank gets a standalone log with every rank's sends.
  TrafficLog gather_traffic();

  // ---- plumbing for launch(), logs and traces (chapters need none of it) ----
  /// Every rank passes `bytes` bytes; recv gets size() * bytes, rank-major.
  /// Not recorded in the traffic log or the trace.
  void all_gather_bytes(const void* send, void* recv, int64_t bytes);
  /// Communication calls record "comm" spans on `tracer` (may be null).
  void set_tracer(Tracer* tracer) { tracer_ = tracer; }
  /// This rank's function threw `message`: wake peers blocked on this rank
  /// (they throw PeerFailed). `primary` is false for a PeerFailed error.
  virtual void fail(const std::string& message, bool primary) = 0;
  /// Called once by every rank after its function ended (ok or not). Waits for
  /// every rank; returns the first failure (by time under threads, by rank
  /// under MPI), preferring primary failures over PeerFailed ones.
  virtual RankFailure finish() = 0;

 protected:
  /// For backends: rank `rank` of `size`, named `backend`, logging to `traffic`.
  Communicator(int rank, int size, std::string backend, double timeout_s, TrafficLog traffic);

  // What a backend implements. Arguments are already checked: counts >= 0,
  // non-null buffers, peers, roots and tags in range. Called on the rank's
  // thread or on its progress thread, never on both at once.
  /// Backend of send().
  virtual void do_send(const float* data, int64_t count, int dst, int tag) = 0;
  /// Backend of recv().
  virtual void do_recv(float* data, int64_t count, int src, int tag) = 0;
  /// Backend of sendrecv().
  virtual void do_sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                           int64_t recv_count, int src, int tag) = 0;
  /// Backend of all_reduce().
  virtual void do_all_reduce(float* data, int64_t count, ReduceOp op) = 0;
  /// Backend of reduce_scatter().
  virtual void do_reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count,
                                 ReduceOp op) = 0;
  /// Backend of all_gather().
  virtual void do_all_gather(const float* send_buf, float* recv_buf, int64_t send_count) = 0;
  /// Backend of broadcast().
  virtual void do_broadcast(float* data, int64_t count, int root) = 0;
  /// Backend of barrier().
  virtual void do_barrier() = 0;
  /// Backend of all_gather_bytes().
  virtual void do_all_gather_bytes(const void* send, void* recv, int64_t bytes) = 0;
  /// False when the backend cannot be called from two threads (MPI without
  /// MPI_THREAD_MULTIPLE): async work then runs at once on the calling thread.
  virtual bool thread_safe() const { return true; }

  /// Stops the progress thread (backend destructors call it first).
  void stop_async();

 private:
  struct AsyncQueue;
  template <class Body>
  void in_order(Body&& body);
  bool must_queue();

  int rank_, size_;
  std::string backend_;
  double timeout_s_;
  TrafficLog traffic_;
  Tracer* tracer_ = nullptr;
  std::unique_ptr<AsyncQueue> async_;
};

// ----------------------------------------------------------------------------
// factories (launch() calls these; tests may too)

/// The communicators of one threads world of `size` ranks, index = rank. Each
/// is used by its own rank thread. `timeout_s` > 0 bounds every wait.
std::vector<std::unique_ptr<Communicator>> make_threads_world(int size, double timeout_s,
                                                              const LinkModel& link = {});

/// True when this dpt was built with MPI.
bool mpi_available();

/// This process's MPI communicator (initialises MPI on first use, with
/// MPI_THREAD_MULTIPLE when the library offers it; finalises at exit).
/// Collective over all processes. Throws dpt::Error without MPI.
std::unique_ptr<Communicator> make_mpi_communicator(double timeout_s);

}  // namespace dpt
