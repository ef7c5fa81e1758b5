// gpu_runtime.cpp — gpu.h on the CUDA runtime: device queries, streams,
// events, memory and copies (graphs: gpu_graph.cpp). Built only when CMake found the CUDA toolkit
// (backends/cuda/none/ stands in otherwise).
#include "dpt/gpu.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "dpt/check.h"
#include "library_check.h"

namespace dpt::gpu {

namespace {
cudaStream_t as_stream(void* handle) { return static_cast<cudaStream_t>(handle); }
cudaEvent_t as_event(void* handle) { return static_cast<cudaEvent_t>(handle); }

// The calling thread's streams: the default one made on first use, and the
// one a StreamGuard has put in front of it.
struct ThreadStreams {
  std::map<int, Stream*> own;      // made by current_stream(), freed at thread exit
  std::map<int, Stream*> current;  // set by StreamGuard
  // cudaStreamDestroy does not wait: the thread's last kernels are finished
  // first, so whoever joined this thread reads their results, and blocks the
  // Device cached under this stream's handle are idle before a new stream can
  // get the same handle. Errors ignored: at exit the runtime may be unloading.
  ~ThreadStreams() {
    for (auto& [device, stream] : own) {
      cudaStreamSynchronize(as_stream(stream->handle()));
      delete stream;
    }
  }
};
thread_local ThreadStreams t_streams;

void check_device(int device) {
  int count = device_count();
  DPT_CHECK(device >= 0 && device < count,
            "cuda:" << device << " does not exist: this process sees " << count << " GPU"
                    << (count == 1 ? "" : "s") << (count == 0 ? " (" + unavailable_reason() + ")" : ""));
}
}  // namespace

bool built_with_cuda() { return true; }

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error for later calls
    return 0;
  }
  return count;
}

std::string unavailable_reason() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(status);
  }
  if (count == 0) return "no CUDA device: the driver reports 0 GPUs";
  return "";
}

std::string device_description(int device) {
  check_device(device);
  cudaDeviceProp prop{};
  DPT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.1f GiB", double(prop.totalGlobalMem) / double(1 << 30));
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
         ", " + memory + ")";
}

void memory_info(int device, std::size_t& free_bytes, std::size_t& total_bytes) {
  check_device(device);
  DPT_CUDA_CHECK(cudaSetDevice(device));
  DPT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
}

// ----------------------------------------------------------------------------
// streams and events

Stream::Stream(int device) : device_(device) {
  check_device(device);
  DPT_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  DPT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  handle_ = stream;
}

Stream::~Stream() {
  if (handle_) cudaStreamDestroy(as_stream(handle_));
}

void Stream::synchronize() const { DPT_CUDA_CHECK(cudaStreamSynchronize(as_stream(handle_))); }

void Stream::wait(const Event& event) const {
  DPT_CUDA_CHECK(cudaStreamWaitEvent(as_stream(handle_), as_event(event.handle()), 0));
}

Event::Event() {
  cudaEvent_t event = nullptr;
  DPT_CUDA_CHECK(cudaEventCreate(&event));
  handle_ = event;
}

Event::~Event() {
  if (handle_) cudaEventDestroy(as_event(handle_));
}

void Event::record(const Stream& stream) {
  device_ = stream.device();
  DPT_CUDA_CHECK(cudaEventRecord(as_event(handle_), as_stream(stream.handle())));
}

void Event::synchronize() const { DPT_CUDA_CHECK(cudaEventSynchronize(as_event(handle_))); }

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0.0f;
  DPT_CUDA_CHECK(cudaEventElapsedTime(&ms, as_event(start.handle_), as_event(handle_)));
  return ms;
}

void set_current_device(int device) {
  check_device(device);
  DPT_CUDA_CHECK(cudaSetDevice(device));
}

int current_device() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return device;
}

Stream& current_stream(int device) {
  auto set = t_streams.current.find(device);
  if (set != t_streams.current.end() && set->second) return *set->second;
  Stream*& own = t_streams.own[device];
  if (!own) own = new Stream(device);
  return *own;
}

StreamGuard::StreamGuard(Stream& stream) : device_(stream.device()) {
  auto it = t_streams.current.find(device_);
  previous_ = it == t_streams.current.end() ? nullptr : it->second;
  t_streams.current[device_] = &stream;
}

StreamGuard::~StreamGuard() { t_streams.current[device_] = previous_; }

// ----------------------------------------------------------------------------
// memory

namespace {
// Runs `allocation(&ptr)` (a cudaMalloc-like call) and returns the memory,
// or nullptr when the GPU has no room (not sticky: the caller says so in a
// sentence); any other failure throws, naming `call`. The helper owns the
// out-pointer and reads it only after the call has returned:
// `f(cudaMalloc(&ptr, n), ptr)` may read ptr first (C++ leaves argument
// order unspecified; GCC did, on an H100: every allocation read "no room"
// and leaked). tests/test_call_order.py refuses that shape in the tree.
template <class Allocation>
void* allocated_or_null(const char* call, Allocation&& allocation) {
  void* ptr = nullptr;
  cudaError_t status = allocation(&ptr);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  DPT_CHECK(status == cudaSuccess, call << " failed: " << cudaGetErrorString(status));
  return ptr;
}
// A free's outcome. At exit (static destructors) the runtime may already be
// unloading: the memory goes with the process, nothing to report.
void check_freed(cudaError_t status) {
  if (status == cudaErrorCudartUnloading || status == cudaErrorContextIsDestroyed) return;
  DPT_CUDA_CHECK(status);
}
}  // namespace

namespace {
// This thread's streams of GPU `device`: its own and the one a StreamGuard set.
std::vector<Stream*> thread_streams(int device) {
  std::vector<Stream*> streams;
  for (const auto* map : {&t_streams.own, &t_streams.current})
    for (const auto& [index, stream] : *map)
      if (index == device && stream) streams.push_back(stream);
  return streams;
}
// True when one of this thread's streams of GPU `device` is capturing.
bool capturing_on(int device) {
  for (Stream* stream : thread_streams(device)) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    DPT_CUDA_CHECK(cudaStreamIsCapturing(as_stream(stream->handle()), &status));
    if (status != cudaStreamCaptureStatusNone) return true;
  }
  return false;
}
}  // namespace

void* allocate(int device, std::size_t bytes) {
  check_device(device);
  DPT_CUDA_CHECK(cudaSetDevice(device));
  auto malloc_bytes = [bytes](void** out) { return cudaMalloc(out, bytes); };
  if (void* got = allocated_or_null("cudaMalloc", malloc_bytes)) return got;
  // The stream-ordered pool keeps what scratch gave back (keep_pool_memory),
  // where cudaMalloc cannot reach it: once this thread's frees have run,
  // hand the pool's idle memory to the driver and try once more. Not while
  // this thread captures a CUDA graph: a synchronize would end the capture,
  // and the caller's out-of-memory sentence would turn into a capture error.
  if (capturing_on(device)) return nullptr;
  synchronize(device);
  cudaMemPool_t pool = nullptr;
  DPT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  DPT_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
  return allocated_or_null("cudaMalloc", malloc_bytes);
}

void free(int device, void* ptr) {
  if (!ptr) return;
  cudaError_t status = cudaSetDevice(device);
  if (status == cudaSuccess) status = cudaFree(ptr);  // waits for queued work that may still use it
  check_freed(status);
}

namespace {
// CUDA's stream-ordered pool gives freed memory back to the driver at every
// synchronize unless told to keep it (release threshold 0 by default): then
// every Floats after a copy_floats would map fresh memory. Kept, once per GPU.
void keep_pool_memory(int device) {
  static std::mutex mutex;
  static std::set<int> done;
  std::lock_guard<std::mutex> lock(mutex);
  if (!done.insert(device).second) return;
  cudaMemPool_t pool = nullptr;
  DPT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  std::uint64_t keep = UINT64_MAX;
  DPT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
}

// Makes `waiting` (a stream of GPU `waiting_device`) wait for what is queued
// so far on `producer` (a stream of GPU `producer_device`).
void order_after(int waiting_device, cudaStream_t waiting, int producer_device, cudaStream_t producer) {
  DPT_CUDA_CHECK(cudaSetDevice(producer_device));
  cudaEvent_t event = nullptr;
  DPT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  cudaError_t status = cudaEventRecord(event, producer);
  if (status == cudaSuccess) status = cudaSetDevice(waiting_device);
  if (status == cudaSuccess) status = cudaStreamWaitEvent(waiting, event, 0);
  cudaEventDestroy(event);  // released once reached; the wait already holds its point
  DPT_CUDA_CHECK(status);
}
}  // namespace

void* allocate_on_stream(int device, std::size_t bytes) {
  check_device(device);
  keep_pool_memory(device);
  DPT_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t stream = as_stream(current_stream(device).handle());
  return allocated_or_null("cudaMallocAsync", [&](void** out) { return cudaMallocAsync(out, bytes, stream); });
}

void free_on_stream(int device, void* ptr) {
  if (ptr) free_on_stream(device, ptr, current_stream(device));
}

void free_on_stream(int device, void* ptr, const Stream& stream) {
  if (!ptr) return;
  cudaError_t status = cudaSetDevice(device);
  if (status == cudaSuccess) status = cudaFreeAsync(ptr, as_stream(stream.handle()));
  check_freed(status);
}

void copy(void* dst, const void* src, std::size_t bytes, int device) {
  if (bytes == 0) return;
  DPT_CUDA_CHECK(cudaSetDevice(device));
  cudaPointerAttributes to{}, from{};
  DPT_CUDA_CHECK(cudaPointerGetAttributes(&to, dst));
  DPT_CUDA_CHECK(cudaPointerGetAttributes(&from, src));
  Stream& stream = current_stream(device);
  cudaStream_t s = as_stream(stream.handle());
  bool both_gpus = to.type == cudaMemoryTypeDevice && from.type == cudaMemoryTypeDevice;
  if (both_gpus && to.device != from.device) {
    // Between two GPUs: after the work this thread queued on the source GPU
    // (it may still be writing src), with cudaMemcpyPeerAsync (a plain copy
    // may fail on stream-ordered pool memory, Floats' scratch, without peer
    // access), and the source GPU's stream waits for the copy before it may
    // overwrite src.
    cudaStream_t source = as_stream(current_stream(from.device).handle());
    order_after(device, s, from.device, source);
    DPT_CUDA_CHECK(cudaMemcpyPeerAsync(dst, to.device, src, from.device, bytes, s));
    order_after(from.device, source, device, s);
    DPT_CUDA_CHECK(cudaSetDevice(device));
    return;
  }
  DPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  // Host memory on either side: the host may touch it as soon as we return.
  bool host_side = to.type != cudaMemoryTypeDevice || from.type != cudaMemoryTypeDevice;
  if (host_side) stream.synchronize();
}

void synchronize(int device) {
  DPT_CUDA_CHECK(cudaSetDevice(device));
  for (Stream* stream : thread_streams(device)) stream->synchronize();
}

// ----------------------------------------------------------------------------
// pointers and identity

int device_of_pointer(const void* ptr) {
  static const bool any_gpu = device_count() > 0;  // no GPU: no runtime call per message
  if (!ptr || !any_gpu) return -1;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();  // not a pointer CUDA knows: host memory
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

bool is_device_pointer(const void* ptr) { return device_of_pointer(ptr) >= 0; }

std::string pci_bus_id(int device) {
  check_device(device);
  char id[32] = {};
  DPT_CUDA_CHECK(cudaDeviceGetPCIBusId(id, int(sizeof id), device));
  return id;
}

}  // namespace dpt::gpu
