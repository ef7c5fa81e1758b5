// backend.h — what a communication backend implements, and the plumbing only
// launch(), the backends and the trace writer use. Private to libdpt: a
// chapter sees communicator.h, never this. The core declares it; the backends
// (common/backends/) implement it; their factories are in backends/backends.h.
//
// One level of virtual dispatch: Communicator's public calls (communicator.cpp)
// check arguments, keep order with async work, trace and log, then call one
// Backend function. A backend is only the data movement and the failure
// protocol: threads/ (ranks as threads), mpi/ (one rank per process) and
// nccl/ (one rank per process and GPU), in common/backends/. Which backends
// exist is decided in factory_{mpi,nompi,nccl,nonccl}.cpp and CMake only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dpt/comm/communicator.h"
#include "dpt/comm/link_model.h"

namespace dpt {
namespace detail {

/// What launch() learns when every rank's function has ended.
struct RankFailure {
  int rank = -1;        ///< the rank whose error is the root cause; -1 when all succeeded
  std::string message;  ///< its error message
  /// No rank threw: the run ended with messages sent that nobody received
  /// (`rank` is the one that should have received them; `message` says so).
  bool unreceived = false;
  /// True when some rank failed.
  bool any() const { return rank >= 0; }
};

class Backend;

/// What Backend::split makes: the new communicator's backend, and the traffic
/// log handle it records into (bound to the new rank; threads members share one table).
struct SplitBackend {
  std::unique_ptr<Backend> backend;
  TrafficLog traffic;
};

/// A backend's data movement. Arguments are already checked: counts >= 0,
/// non-null buffers, peers, roots and tags in range. Called on the rank's
/// thread or on its progress thread, never on both at once.
class Backend {
 public:
  virtual ~Backend() = default;
  /// "threads" or "mpi".
  virtual const char* name() const = 0;
  /// Point-to-point, as Communicator's.
  virtual void send(const float* data, int64_t count, int dst, int tag) = 0;
  virtual void recv(float* data, int64_t count, int src, int tag) = 0;
  virtual void sendrecv(const float* send_buf, int64_t send_count, int dst, float* recv_buf,
                        int64_t recv_count, int src, int tag) = 0;
  /// Collectives, as Communicator's.
  virtual void all_reduce(float* data, int64_t count, ReduceOp op) = 0;
  virtual void reduce_scatter(const float* send_buf, float* recv_buf, int64_t recv_count,
                              ReduceOp op) = 0;
  virtual void all_gather(const float* send_buf, float* recv_buf, int64_t send_count) = 0;
  virtual void broadcast(float* data, int64_t count, int root) = 0;
  virtual void barrier() = 0;
  /// Every rank passes `bytes` bytes; recv gets size() * bytes, rank-major.
  virtual void all_gather_bytes(const void* send, void* recv, int64_t bytes) = 0;
  /// Communicator::split's data movement, after the core has gathered every
  /// rank's (color, key): `members` are the ranks of this communicator passing
  /// this rank's `color`, in the new rank order (by key, then rank); this rank
  /// is among them. Collective over every rank of this backend.
  virtual SplitBackend split(int color, int key, const std::vector<int>& members) = 0;
  /// False when the backend cannot be called from two threads (MPI without
  /// MPI_THREAD_MULTIPLE): async work then runs at once on the calling thread.
  virtual bool thread_safe() const { return true; }
  /// This rank's function threw `message`: wake peers blocked on this rank
  /// (they throw PeerFailed). `primary` is false for a PeerFailed error.
  virtual void fail(const std::string& message, bool primary) = 0;
  /// Called once by every rank after its function ended (ok or not). Waits for
  /// every rank; returns the root cause: the first primary failure (by time
  /// under threads, by rank under MPI), a PeerFailed one only if none is primary.
  virtual RankFailure finish() = 0;
};

/// True when the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share a
/// byte (a collective must then stage its output).
inline bool overlaps(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes && b_bytes && pa < pb + b_bytes && pb < pa + a_bytes;
}

/// The Communicator members chapters never need: for launch(), backends'
/// factories and the trace writer.
struct CommAccess {
  /// Wraps a backend as rank `rank` of `size`, logging to `traffic`.
  static std::unique_ptr<Communicator> wrap(std::unique_ptr<Backend> backend, int rank, int size,
                                            double timeout_s, TrafficLog traffic);
  /// Communication calls record "comm" spans on `tracer` (span.h; launch
  /// passes the rank's Tracer; may be null).
  static void set_tracer(Communicator& comm, SpanRecorder* tracer) { comm.tracer_ = tracer; }
  /// The recorder `comm` records on (null when none).
  static SpanRecorder* tracer(const Communicator& comm) { return comm.tracer_; }
  /// The backend `comm` passes its calls to (watch.cpp wraps it).
  static Backend& backend(Communicator& comm) { return *comm.backend_; }
  /// Backend::all_gather_bytes, in order with async work; not logged or traced.
  static void all_gather_bytes(Communicator& comm, const void* send, void* recv, int64_t bytes);
  /// Backend::fail.
  static void fail(Communicator& comm, const std::string& message, bool primary);
  /// Backend::finish.
  static RankFailure finish(Communicator& comm);
};

}  // namespace detail
}  // namespace dpt
