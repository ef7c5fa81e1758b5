// cuda_standin/state.h — the stand-in's state, shared by its two sources
// (tests/support/cuda_standin.cpp: devices and memory;
// cuda_standin_streams.cpp: streams, events, copies, graphs). Private to them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/cuda_standin/standin.h"

namespace dpt_test::standin {

/// Where an event stands: how often it was recorded, how many of those
/// points its streams have reached, and the work count when the last was.
struct EventState {
  std::uint64_t recorded = 0, reached = 0, time = 0;
};

/// One piece of a stream's work; it may run once `after` has reached `point`.
struct Op {
  std::function<void()> run;
  std::shared_ptr<EventState> after;
  std::uint64_t point = 0;
};

/// A device allocation: host bytes standing for GPU memory.
struct Block {
  std::unique_ptr<unsigned char[]> bytes;
  std::size_t size = 0;
  int device = 0;
  bool pool = false;     // cudaMallocAsync's, not cudaMalloc's
  bool freeing = false;  // a cudaFreeAsync is queued for it
};

constexpr int kMaxDevices = 8;

}  // namespace dpt_test::standin

struct CUmemPoolHandle_st {
  int device = 0;
  std::size_t idle = 0;           // freed, still reserved
  std::uint64_t threshold = 0;    // cudaMemPoolAttrReleaseThreshold
};

struct CUgraph_st {
  std::vector<dpt_test::standin::Op> nodes;
  std::set<void*> allocated;  // cudaMallocAsync'd while recording
  std::vector<void*> owned;   // freed by the graph: released when it is destroyed
};

struct CUgraphExec_st {
  std::vector<dpt_test::standin::Op> nodes;
};

struct CUstream_st {
  int device = 0;
  std::deque<dpt_test::standin::Op> queue;
  bool held = false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id capturer;
  CUgraph_st* recording = nullptr;  // while capture is active or invalidated
};

struct CUevent_st {
  int device = 0;
  bool timing = true;
  std::shared_ptr<dpt_test::standin::EventState> state = std::make_shared<dpt_test::standin::EventState>();
};

namespace dpt_test::standin {

/// One fake GPU: its capacity, the bytes in use (cudaMalloc'd and pooled), its pool.
struct Device {
  std::size_t capacity = 1 << 20, used = 0;
  CUmemPoolHandle_st pool;
};

/// Everything the stand-in knows, under one lock.
struct State {
  std::recursive_mutex mutex;
  int devices = 2;
  Device device[kMaxDevices];
  std::map<const unsigned char*, Block> blocks;  // by start address
  std::set<CUstream_st*> streams;
  std::map<std::string, cudaError_t> injected;
  Counts counts;
  void* last = nullptr;
  int handles = 0;
  std::uint64_t clock = 0;  // pieces of work run so far
};

using Lock = std::lock_guard<std::recursive_mutex>;

/// The one state (never destroyed).
State& state();
/// The calling thread's current fake GPU and last error.
extern thread_local int t_device;
/// Records `error` as the thread's last error and returns it.
cudaError_t failed(cudaError_t error);
/// The error fail_next() planted for `call`, once; else cudaSuccess.
cudaError_t injected(const char* call);
/// The live block `ptr` points into, or nullptr.
Block* block_holding(const void* ptr);
/// A pool block whose cudaFreeAsync its stream has reached: to the pool.
void give_to_pool(void* ptr);
/// Runs every stream's work that nothing holds or waits for, in order.
void run_ready();
/// A synchronize: the GPUs finish everything (holds released), then pools
/// give back idle memory above their release threshold.
void finish_all();
void release_idle_above_threshold();
/// Queues `work` on `stream` (recorded instead while it captures).
void queue(CUstream_st* stream, std::function<void()> work);
/// True while a Global or ThreadLocal capture by this thread is under way:
/// cudaMalloc and friends are refused then.
bool capture_forbids_unsafe_calls();

}  // namespace dpt_test::standin

/// Returns the error fail_next() planted for the enclosing runtime call.
#define STANDIN_INJECTED()                                                      \
  do {                                                                          \
    if (cudaError_t standin_error_ = ::dpt_test::standin::injected(__func__))   \
      return ::dpt_test::standin::failed(standin_error_);                       \
  } while (0)
