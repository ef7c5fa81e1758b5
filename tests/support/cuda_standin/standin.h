// cuda_standin/standin.h — how a test steers and reads the CUDA runtime
// stand-in (cuda_runtime.h beside this file, tests/support/cuda_standin.cpp).
//
// The model, as far as dpt's glue can tell it from a GPU:
// - fake GPUs 0..devices-1, each with `capacity` bytes. cudaMalloc and the
//   stream-ordered pool (cudaMallocAsync) hand out host memory and count it
//   against that capacity; beyond it they fail with cudaErrorMemoryAllocation.
//   Freed pool memory stays reserved by the pool (idle) until a synchronize
//   finds it above the pool's release threshold (CUDA's default 0) or
//   cudaMemPoolTrimTo gives it back.
// - a stream is an in-order queue that runs each piece of work as soon as
//   nothing holds it: a test may hold() a stream (a busy GPU) so that its
//   work waits; a cudaStreamWaitEvent makes a stream wait for the event's
//   point on another stream. Every synchronize (stream, event, cudaFree)
//   lets the whole GPU finish: holds are released and all queues run.
// - cudaMemcpyAsync copies in stream order (so a copy to host memory has not
//   arrived until its stream has run); cudaMemcpyPeerAsync likewise.
// - capture: work queued on a capturing stream is recorded, not run; a
//   synchronize or a copy to or from host memory there fails and invalidates
//   the capture, as CUDA does; cudaMalloc while a Global/ThreadLocal capture
//   is under way is refused. A graph's launch queues what was recorded.
// Not modelled: kernels (a test queues host functions with enqueue()),
// peer access, pinned memory, timing beyond a count of executed work.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>

namespace dpt_test::standin {

/// What reset() sets up.
struct Config {
  int devices = 2;                  ///< fake GPUs
  std::size_t capacity = 1 << 20;   ///< bytes each holds
};

/// Starts over with `config`: forgets allocations, holds and counters and
/// empties every pool (each keeps its release threshold: dpt sets it once
/// per process). Streams, events and graphs the runtime still holds stay
/// valid. Call when no allocation is live (tests end by freeing theirs).
void reset(const Config& config = Config{});

/// What the stand-in has been asked so far (since the last reset()).
struct Counts {
  int mallocs = 0;          ///< successful cudaMalloc
  int frees = 0;            ///< successful cudaFree
  int async_mallocs = 0;    ///< successful cudaMallocAsync
  int async_frees = 0;      ///< cudaFreeAsync whose stream reached it
  int out_of_memory = 0;    ///< allocations refused for capacity
  int trims = 0;            ///< cudaMemPoolTrimTo
  int synchronizes = 0;     ///< cudaStreamSynchronize, cudaEventSynchronize that succeeded
  int refused_in_capture = 0;  ///< calls a capture refused (and was invalidated by)
};
/// The counters.
Counts counts();

/// Allocations not yet given back (cudaMalloc'd, or the pool's that a
/// cudaFreeAsync has not yet reached in its stream), over all fake GPUs.
std::size_t live_allocations();
/// The pointer the latest successful cudaMalloc or cudaMallocAsync returned.
void* last_allocation();
/// Bytes of GPU `device` in use: cudaMalloc'd plus what its pool reserves.
std::size_t used_bytes(int device);
/// Bytes GPU `device`'s pool holds freed and idle.
std::size_t pool_idle_bytes(int device);
/// Streams, events, graphs and graph execs created and not yet destroyed.
int live_handles();

/// Work queued on `stream` (a cudaStream_t as gpu::Stream::handle() gives it)
/// waits until release() or any synchronize.
void hold(void* stream);
/// Lets `stream`'s work run (what is queued runs now, in order).
void release(void* stream);
/// Queues `work` on `stream` like a kernel: run in stream order (recorded
/// instead while the stream captures).
void enqueue(void* stream, std::function<void()> work);
/// Pieces of work queued on `stream` that have not run yet.
std::size_t pending(void* stream);

/// The next call to the runtime function named `call` ("cudaMallocAsync")
/// returns `error` and does nothing else.
void fail_next(const char* call, cudaError_t error);

}  // namespace dpt_test::standin
