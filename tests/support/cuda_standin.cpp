// cuda_standin.cpp — the CUDA runtime stand-in's state, devices and memory
// (the model: cuda_standin/standin.h). Streams, events, copies and graphs:
// cuda_standin_streams.cpp. Every call runs under one lock.
#include "support/cuda_standin/state.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace dpt_test::standin {

State& state() {
  static State* s = new State;  // never destroyed: thread_local streams are freed at exit after statics
  return *s;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;

cudaError_t failed(cudaError_t error) {
  t_last_error = error;
  return error;
}

cudaError_t injected(const char* call) {
  auto it = state().injected.find(call);
  if (it == state().injected.end()) return cudaSuccess;
  cudaError_t error = it->second;
  state().injected.erase(it);
  return error;
}

Block* block_holding(const void* ptr) {
  auto& blocks = state().blocks;
  auto it = blocks.upper_bound(static_cast<const unsigned char*>(ptr));
  if (it == blocks.begin()) return nullptr;
  --it;
  auto at = static_cast<const unsigned char*>(ptr);
  return at < it->first + it->second.size ? &it->second : nullptr;
}

void* add_block(int device, std::size_t bytes, bool pool) {
  Block block{std::make_unique<unsigned char[]>(bytes), bytes, device, pool};
  void* ptr = block.bytes.get();
  state().blocks.emplace(block.bytes.get(), std::move(block));
  state().last = ptr;
  return ptr;
}

void release_idle_above_threshold() {
  for (int d = 0; d < state().devices; ++d) {
    Device& device = state().device[d];
    if (device.pool.idle > device.pool.threshold) {
      device.used -= device.pool.idle - device.pool.threshold;
      device.pool.idle = device.pool.threshold;
    }
  }
}

// ---- the test's side ---------------------------------------------------------

void reset(const Config& config) {
  Lock lock(state().mutex);
  State& s = state();
  for (CUstream_st* stream : s.streams) stream->held = false;
  run_ready();
  s.blocks.clear();
  s.counts = Counts{};
  s.injected.clear();
  s.last = nullptr;
  s.devices = config.devices;
  for (int d = 0; d < kMaxDevices; ++d) {
    s.device[d].capacity = config.capacity;
    s.device[d].used = 0;
    s.device[d].pool.device = d;
    s.device[d].pool.idle = 0;
  }
}

Counts counts() {
  Lock lock(state().mutex);
  return state().counts;
}

std::size_t live_allocations() {
  Lock lock(state().mutex);
  return state().blocks.size();
}

void* last_allocation() {
  Lock lock(state().mutex);
  return state().last;
}

std::size_t used_bytes(int device) {
  Lock lock(state().mutex);
  return state().device[device].used;
}

std::size_t pool_idle_bytes(int device) {
  Lock lock(state().mutex);
  return state().device[device].pool.idle;
}

int live_handles() {
  Lock lock(state().mutex);
  return state().handles;
}

void fail_next(const char* call, cudaError_t error) {
  Lock lock(state().mutex);
  state().injected[call] = error;
}

}  // namespace dpt_test::standin

using namespace dpt_test::standin;

// ---- errors and devices --------------------------------------------------------

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorCudartUnloading: return "driver shutting down";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorContextIsDestroyed: return "context is destroyed";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  }
  return "unrecognized error code";
}

cudaError_t cudaGetLastError() {
  cudaError_t error = t_last_error;
  t_last_error = cudaSuccess;
  return error;
}

cudaError_t cudaGetDeviceCount(int* count) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  *count = state().devices;
  return state().devices == 0 ? failed(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (device < 0 || device >= state().devices) return failed(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "Stand-in GPU %d", device);
  prop->totalGlobalMem = state().device[device].capacity;
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (device < 0 || device >= state().devices) return failed(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (state().devices == 0) return failed(cudaErrorNoDevice);
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  const Device& device = state().device[t_device];
  *free_bytes = device.capacity - device.used;
  *total_bytes = device.capacity;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* id, int length, int device) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (device < 0 || device >= state().devices) return failed(cudaErrorInvalidDevice);
  std::snprintf(id, std::size_t(length), "0000:%02x:00.0", device + 1);
  return cudaSuccess;
}

// ---- memory ---------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (capture_forbids_unsafe_calls()) return failed(cudaErrorStreamCaptureUnsupported);
  Device& device = state().device[t_device];
  if (bytes > device.capacity - device.used) {
    ++state().counts.out_of_memory;
    return failed(cudaErrorMemoryAllocation);
  }
  device.used += bytes;
  *ptr = add_block(t_device, bytes, false);
  ++state().counts.mallocs;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (!ptr) return cudaSuccess;
  Block* block = block_holding(ptr);
  if (!block || block->bytes.get() != ptr || block->pool) return failed(cudaErrorInvalidValue);
  finish_all();  // cudaFree waits for the device's queued work
  state().device[block->device].used -= block->size;
  state().blocks.erase(block->bytes.get());
  ++state().counts.frees;
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** ptr, std::size_t bytes, cudaStream_t stream) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  Device& device = state().device[stream->device];
  std::size_t from_idle = std::min(bytes, device.pool.idle);
  if (bytes - from_idle > device.capacity - device.used) {
    ++state().counts.out_of_memory;
    return failed(cudaErrorMemoryAllocation);
  }
  device.pool.idle -= from_idle;
  device.used += bytes - from_idle;
  *ptr = add_block(stream->device, bytes, true);
  if (stream->recording) {
    stream->recording->allocated.insert(*ptr);
    stream->recording->nodes.push_back(Op{[] {}, nullptr, 0});  // a memory-allocation node
  }
  ++state().counts.async_mallocs;
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  Block* block = block_holding(ptr);
  if (!block || block->bytes.get() != ptr || !block->pool || block->freeing) return failed(cudaErrorInvalidValue);
  if (stream->recording) {  // freed by the graph's free node: live until the graph is destroyed
    if (!stream->recording->allocated.count(ptr)) return failed(cudaErrorNotSupported);  // not modelled
    block->freeing = true;
    stream->recording->owned.push_back(ptr);
    stream->recording->nodes.push_back(Op{[] {}, nullptr, 0});
    return cudaSuccess;
  }
  block->freeing = true;
  queue(stream, [ptr] { give_to_pool(ptr); });
  return cudaSuccess;
}

void dpt_test::standin::give_to_pool(void* ptr) {
  Block* block = block_holding(ptr);
  Device& device = state().device[block->device];
  device.pool.idle += block->size;
  state().blocks.erase(block->bytes.get());
  ++state().counts.async_frees;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (device < 0 || device >= state().devices) return failed(cudaErrorInvalidDevice);
  *pool = &state().device[device].pool;
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  if (attr != cudaMemPoolAttrReleaseThreshold) return failed(cudaErrorNotSupported);
  pool->threshold = *static_cast<std::uint64_t*>(value);
  return cudaSuccess;
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, std::size_t min_bytes_to_keep) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  ++state().counts.trims;
  if (pool->idle > min_bytes_to_keep) {
    state().device[pool->device].used -= pool->idle - min_bytes_to_keep;
    pool->idle = min_bytes_to_keep;
  }
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  Lock lock(state().mutex);
  STANDIN_INJECTED();
  *attributes = cudaPointerAttributes{cudaMemoryTypeUnregistered, -2, nullptr, const_cast<void*>(ptr)};
  if (Block* block = block_holding(ptr))
    *attributes = cudaPointerAttributes{cudaMemoryTypeDevice, block->device, const_cast<void*>(ptr), nullptr};
  return cudaSuccess;
}
