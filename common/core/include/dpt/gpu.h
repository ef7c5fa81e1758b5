/// @file gpu.h
/// @brief The CUDA runtime as dpt uses it: which GPUs there are, streams and
/// events, raw device memory and copies. No CUDA header leaks out of here.
///
/// A `cuda:k` `Device` (device.h) allocates through `allocate()` below and
/// copies through `copy()`; ops launch their kernels on the calling thread's
/// *current stream* for that GPU. Each thread gets its own stream per GPU on
/// first use, so N rank threads sharing one GPU queue their work on N streams,
/// as N processes would; chapter 05 makes a second, communication stream and
/// orders it after the compute stream with an `Event`.
///
///     dpt::gpu::Stream comm(0);                    // a second queue on GPU 0
///     dpt::gpu::Event ready;
///     ready.record(dpt::gpu::current_stream(0));  // "the gradients are written"
///     comm.wait(ready);                           // comm work starts after that
///
/// Built without CUDA (no toolkit when CMake ran), every function here says so
/// in a sentence (`device_count()` is 0 and `unavailable_reason()` explains);
/// nothing else in dpt branches on it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace dpt::gpu {

/// True when this dpt was compiled with the CUDA toolkit.
bool built_with_cuda();
/// True when this dpt was compiled with NCCL (the `--comm nccl` communicator).
bool built_with_nccl();
/// GPUs this process can use (0 without CUDA, a driver or a device).
int device_count();
/// Why GPU work cannot run here ("dpt was built without CUDA …", "no CUDA
/// device: …"), or "" when at least one GPU is usable.
std::string unavailable_reason();
/// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" for GPU `device`.
std::string device_description(int device);
/// Free and total bytes of GPU `device`, as the driver reports them.
void memory_info(int device, std::size_t& free_bytes, std::size_t& total_bytes);

// ----------------------------------------------------------------------------
// streams and events

/// An ordered queue of GPU work on one device (a cudaStream_t that does not
/// synchronise with the legacy default stream). Not copyable.
class Stream {
 public:
  /// A new stream on GPU `device`.
  explicit Stream(int device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /// The GPU this stream runs on.
  int device() const { return device_; }
  /// The cudaStream_t, as an opaque pointer (kernels and libraries cast it back).
  void* handle() const { return handle_; }
  /// Blocks the calling thread until all work queued so far has finished.
  void synchronize() const;
  /// Work queued on this stream after this call waits until `event` has happened.
  void wait(const class Event& event) const;

 private:
  int device_;
  void* handle_ = nullptr;
};

/// A marker in a stream: "everything queued before this point". Not copyable.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  /// Marks the current end of `stream`'s queue.
  void record(const Stream& stream);
  /// Blocks the calling thread until the recorded point has been reached.
  void synchronize() const;
  /// Milliseconds between `start` and this event (both recorded and reached).
  float elapsed_ms_since(const Event& start) const;
  /// The cudaEvent_t, as an opaque pointer.
  void* handle() const { return handle_; }

 private:
  void* handle_ = nullptr;
  int device_ = -1;
};

/// Makes GPU `device` the calling thread's current GPU, where an `Event`
/// made next lives (record it only on that GPU's streams).
void set_current_device(int device);
/// The calling thread's current GPU (the last one a gpu.h call used), or -1
/// without CUDA or a GPU.
int current_device();

/// Gives the calling thread its current GPU back at the end of a scope that
/// works on another (a peer's buffer must not leave its GPU current: an
/// Event made next would live there).
class CurrentDeviceGuard {
 public:
  CurrentDeviceGuard() : before_(current_device()) {}
  ~CurrentDeviceGuard() {
    try {
      if (before_ >= 0 && before_ != current_device()) set_current_device(before_);
    } catch (...) {  // a GPU in error: the error surfaces at the next call
    }
  }
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

 private:
  int before_;
};

/// The calling thread's stream for GPU `device`: the one set with
/// `StreamGuard`, else a stream of this thread's own, made on first use.
Stream& current_stream(int device);

/// Makes `stream` the calling thread's current stream for its device until the
/// guard goes out of scope (RAII; guards nest).
class StreamGuard {
 public:
  /// Work this thread queues on `stream.device()` goes to `stream` meanwhile.
  explicit StreamGuard(Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  Stream* previous_;
};

// ----------------------------------------------------------------------------
// graphs: record a stream's work once, replay it with one launch

/// A CUDA graph: the kernels and copies some host code queues on a stream,
/// recorded once and replayed with a single launch, so a training step of a
/// few dozen small kernels costs one launch instead of a few dozen. Not
/// copyable.
///
///     dpt::gpu::Graph graph;
///     graph.capture(dpt::gpu::current_stream(0), [&] { step(); });  // records, runs nothing
///     for (int i = 0; i < 1000; ++i) graph.replay(dpt::gpu::current_stream(0));
///
/// While capturing, work is recorded, not run, and a call that waits for the
/// GPU (a copy to or from pageable host memory, `Stream::synchronize`,
/// `Tensor::item`) fails the capture. A replay reads and writes exactly the
/// addresses the capture saw and runs none of the host code: every buffer the
/// captured work touches must stay allocated, and be handed to nobody else,
/// for as long as the graph is replayed (see bench/bench_gpu_step.cpp). The
/// kernels' own scratch that a capture records (labels, reduction partials)
/// belongs to the capturing thread: replay a graph only while that thread lives.
class Graph {
 public:
  /// An empty graph (nothing captured yet).
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Runs `record()` with `stream` in capture mode (work queued on it is
  /// recorded), then makes the recording replayable. Queue the work on
  /// `stream`: ops use the calling thread's current stream, so pass
  /// `current_stream(device)`. Throws dpt::Error with CUDA's reason when a
  /// call in `record()` cannot be captured; the stream works normally again
  /// afterwards. A graph is captured once.
  void capture(Stream& stream, const std::function<void()>& record);
  /// Queues one replay of the recorded work on `stream` (same GPU as the
  /// capture; any stream of it).
  void replay(const Stream& stream) const;
  /// True once capture() has succeeded.
  bool captured() const { return exec_ != nullptr; }
  /// Nodes (kernels, copies, memsets) in the recording: the launches one
  /// replay stands for.
  std::size_t node_count() const;

 private:
  void* graph_ = nullptr;  // cudaGraph_t: the recording
  void* exec_ = nullptr;   // cudaGraphExec_t: its replayable form
  int device_ = -1;
};

// ----------------------------------------------------------------------------
// memory (device.h's cuda:k devices allocate through these; use Tensor instead)

/// `bytes` of memory on GPU `device`, or nullptr when the GPU has no room
/// (after giving the stream-ordered pool's idle memory back and trying again).
void* allocate(int device, std::size_t bytes);
/// Frees memory from allocate(). Waits for the GPU's queued work first.
void free(int device, void* ptr);
/// `bytes` on GPU `device` from CUDA's stream-ordered pool, in order on the
/// calling thread's current stream of that GPU (other streams may use it once
/// that stream has been synchronized), or nullptr when the GPU has no room.
/// For short-lived scratch (dpt::Floats): no cudaMalloc, no device-wide wait.
void* allocate_on_stream(int device, std::size_t bytes);
/// Gives memory from allocate_on_stream() back once the work queued so far on
/// the calling thread's current stream of `device` has run; never waits.
void free_on_stream(int device, void* ptr);
/// The same, in order on `stream` (a stream of `device`): scratch that may
/// outlive a StreamGuard goes back on the stream it was allocated on.
void free_on_stream(int device, void* ptr, const Stream& stream);
/// Copies `bytes` between any two of host memory and GPU memory (unified
/// addressing tells which is which), in order on the calling thread's current
/// stream of `device`. When `dst` or `src` is host memory the call returns
/// only once the copy is complete, so the host may read or reuse it.
void copy(void* dst, const void* src, std::size_t bytes, int device);
/// Blocks until this thread's own stream of GPU `device`, and the stream a
/// StreamGuard has made current there, are idle (a `Stream` the caller holds
/// outside any guard is the caller's to synchronize).
void synchronize(int device);

// ----------------------------------------------------------------------------
// pointers and identity (the communicators ask where a buffer lives)

/// The GPU whose memory `ptr` points into, or -1 for host memory (pageable,
/// pinned or managed: the host may read it). Always -1 without CUDA or a GPU,
/// where it costs one branch.
int device_of_pointer(const void* ptr);
/// True when `ptr` points into GPU memory: `device_of_pointer(ptr) >= 0`.
bool is_device_pointer(const void* ptr);
/// PCI bus id of GPU `device`, e.g. "0000:1b:00.0": the same physical GPU has
/// the same id in every process, whatever CUDA_VISIBLE_DEVICES numbers it.
std::string pci_bus_id(int device);

}  // namespace dpt::gpu
