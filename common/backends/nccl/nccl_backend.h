// nccl_backend.h — the NCCL backend: one rank per process, one GPU per rank,
// NCCL moving the data and MPI (an MpiBackend) as its control plane. Private
// to libdpt; built only when CMake found CUDA, NCCL and MPI.
//
//   bootstrap.cpp       GPU check (one per rank), unique id over MPI, NCCL start and end
//   collectives.cpp     all_reduce, reduce_scatter, all_gather, broadcast, barrier
//   point_to_point.cpp  send, recv, sendrecv (ncclSend/ncclRecv)
//   stream_wait.cpp     waiting with a timeout, aborting
//   split.cpp           sub-communicators: ncclCommSplit, an MPI group as their control plane
//
// Every call queues its NCCL work on the backend's own stream, after the
// caller's stream (an event: the caller's kernels and scratch come first),
// then waits for it: the Communicator contract is blocking. The NCCL
// communicator is non-blocking (ncclConfig_t::blocking = 0): no NCCL call
// holds the host, not even the connection set-up of a pair's first send,
// which waits for the peer; a call returns ncclInProgress and the wait polls
// ncclCommGetAsyncError, then the stream. So a rank can time out or learn
// that a peer has failed (MPI's abort protocol, mpi/failure.cpp) wherever
// it waits; it then aborts the NCCL communicator (ncclCommAbort), the only
// way to stop a kernel waiting for a peer that will never come.
//
// Collectives first agree over MPI (preflight: the same collective, count,
// root and op on every rank), so a mismatch is a sentence and a peer that
// failed earlier is noticed before any GPU waits for it.
//
// Host buffers are staged through this GPU (StagedFloats), so every chapter
// runs under --comm nccl even where it hands the communicator host memory.
//
// Limits: NCCL has no tags and does not check counts: messages between two
// ranks match in the order they were sent, whatever their tags, and a recv
// naming another count than its send waits until the timeout. After an abort
// the communicator is gone: the program is expected to end.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "comm/gpu_floats.h"
#include "mpi/mpi_backend.h"
#include "dpt/gpu.h"

namespace dpt {
namespace detail {
namespace nccl {

class NcclBackend final : public Backend {
 public:
  /// Takes over `control` (the same ranks: a world, or split.cpp's group)
  /// and NCCL communicator `comm` on GPU `device` (non-blocking,
  /// initialised); `timeout_s` bounds the wait for its orderly end.
  NcclBackend(std::unique_ptr<mpi::MpiBackend> control, ncclComm_t comm, int device, double timeout_s);
  ~NcclBackend() override;

  const char* name() const override { return "nccl"; }
  bool thread_safe() const override { return control_->thread_safe(); }
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
  /// Over MPI: launch's plumbing moves host bytes.
  void all_gather_bytes(const void* send, void* recv, int64_t bytes) override {
    control_->all_gather_bytes(send, recv, bytes);
  }
  // ---- split.cpp ----
  /// An MPI group and ncclCommSplit's communicator, on this GPU; must be
  /// destroyed before this backend.
  SplitBackend split(int color, int key, const std::vector<int>& members) override;
  // ---- the failure protocol is MPI's ----
  void fail(const std::string& message, bool primary) override { control_->fail(message, primary); }
  /// MPI's agreement; after a failure the NCCL communicator is aborted (a
  /// local call, where destroying it might wait for peers that are gone).
  RankFailure finish() override;

 private:
  // ---- stream_wait.cpp ----
  // Runs enqueue(stream) on the backend's stream, then waits for it: returns
  // when done, throws Timeout/PeerFailed after aborting.
  template <class Enqueue>
  void run(const char* call, int peer, int tag, int64_t count, Enqueue&& enqueue) {
    cudaStream_t stream = begin();
    enqueue(stream);
    wait(call, peer, tag, count);
  }
  cudaStream_t begin();
  /// An NCCL call's return: done or under way (ncclInProgress, which wait()
  /// sees through) goes on; anything else aborts and throws, naming `what`.
  void issued(ncclResult_t result, const char* what);
  void wait(const char* call, int peer, int tag, int64_t count);
  void abort();
  // ---- collectives.cpp ----
  /// Avg's last step on the final `count` floats of `data` (host or GPU):
  /// divided by the rank count, as the other backends do (nothing for Sum, Max).
  void divide_for_avg(float* data, int64_t count, ReduceOp op);

  std::unique_ptr<mpi::MpiBackend> control_;
  ncclComm_t comm_;
  const int device_;
  const double timeout_s_;
  gpu::Stream stream_;         // where NCCL's work is queued
  gpu::Event caller_done_;     // the caller's stream at a call's start (made on device_, after stream_)
  Floats barrier_scratch_;  // one float that barrier() all-reduces
  bool aborted_ = false;
};

/// NCCL's reduction for `op`. Avg is ncclSum, divided afterwards
/// (divide_for_avg), the threads and MPI backends' recipe: NCCL's own ncclAvg
/// multiplies every input by 1/n before summing, one more rounding per input
/// whenever n is not a power of two. (The sum's order is NCCL's ring or tree,
/// so from 3 ranks on the bits may still differ from another backend's.)
ncclRedOp_t nccl_op(ReduceOp op);

}  // namespace nccl
}  // namespace detail
}  // namespace dpt
