/// @file device.h
/// @brief Devices: where a tensor's bytes live, and how many bytes each one holds.
///
/// A `Device` is the host, a *simulated* CPU device `cpu:k` (ordinary host
/// memory that is counted separately, so a laptop can play N accelerators), or
/// a CUDA GPU `cuda:k`. Every allocation goes through its device, which keeps
/// the current and peak bytes in use and refuses an allocation past an optional
/// capacity with a clear `dpt::OutOfMemory` — how chapter 07 shows a model that
/// does not fit under plain data parallel but fits under ZeRO stage 3.
///
/// Devices live for the whole program; get them with `Device::host()`,
/// `Device::cpu(k)` or `Device::get("cpu:3")`.
///
/// Several rank threads may share one GPU. Each then gets a Device of its own
/// on it, an *account* (`Device::cuda(gpu, account)`, named "cuda:0/2"): its
/// own bytes, peak, capacity and block cache, as if it were a process alone
/// on the GPU — so chapter 07's per-rank memory reads one rank, not the sum
/// of all. Account 0 is plain "cuda:0"; every account of a GPU runs the same
/// kernels (`index()` is the GPU).
///
/// Like PyTorch's caching allocator, a device keeps freed blocks for reuse by
/// the next allocation of the same (64-byte rounded) size: a training step
/// allocates the same activations every time, and asking the OS for them anew
/// costs page faults (on a GPU, cudaMalloc/cudaFree, which synchronise). On a
/// GPU a block is reused only on the stream it was allocated on. Cached blocks
/// are *not* counted as in use.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "dpt/memory_ledger.h"

namespace dpt {

/// What kind of memory a device owns.
enum class DeviceKind { Host, Cpu, Cuda };

/// One memory space with byte accounting. Thread-safe: rank threads allocate
/// on their own devices concurrently.
class Device {
 public:
  /// The host (where the master copy and data sets live).
  static Device& host();
  /// Simulated device k: host memory, counted on its own.
  static Device& cpu(int index);
  /// GPU `index`, memory account `account` (0: the GPU's first, "cuda:K"; A >
  /// 0: "cuda:K/A", counted apart from every other account). Throws
  /// dpt::Error naming the reason when the GPU is not there (no CUDA in this
  /// build, no driver, fewer GPUs) or an index is negative.
  static Device& cuda(int index, int account = 0);
  /// Parses what name() prints: "host", "cpu:K", "cuda:K" (account 0) or
  /// "cuda:K/A". Throws dpt::Error on anything else.
  static Device& get(const std::string& name);

  /// Host, simulated CPU device, or CUDA GPU.
  DeviceKind kind() const { return kind_; }
  /// k of cpu:k / cuda:k (0 for the host): for a GPU, which GPU.
  int index() const { return index_; }
  /// The memory account on a shared GPU (0 for host, cpu:k and account 0).
  int account() const { return account_; }
  /// "host", "cpu:2", "cuda:0", "cuda:0/3" (GPU 0, account 3).
  std::string name() const;
  /// True when data() pointers are host memory (host and cpu:k).
  bool is_host_memory() const { return kind_ != DeviceKind::Cuda; }

  /// Allocates `bytes` (64-byte aligned). Throws dpt::OutOfMemory when the
  /// capacity would be exceeded, naming the device, the request and the usage.
  void* allocate(std::size_t bytes);
  /// Returns memory obtained from allocate() with the same `bytes` (to the
  /// block cache, up to its limit; straight back when memory_caching() is off).
  void release(void* ptr, std::size_t bytes);
  /// Frees every cached block back to the operating system.
  void empty_cache();
  /// Bytes held in the block cache (not in use, not yet returned).
  std::size_t cached_bytes() const;
  /// Whether devices keep freed blocks for reuse: yes, unless the process
  /// started with DPT_NO_MEMORY_CACHING=1. Then every freed block goes back at
  /// once and a GPU block is exactly the bytes asked for (not rounded up to
  /// 64), so CUDA's compute-sanitizer sees each tensor's own bounds and
  /// lifetime (scripts/gpu-check --sanitize sets it). Slower: a GPU free
  /// waits for the GPU. Not for CUDA graphs: a captured step frees tensors
  /// inside the capture, where cudaFree is not allowed.
  static bool memory_caching();

  /// Bytes in use now.
  std::size_t current_bytes() const { return current_.load(); }
  /// Most bytes ever in use at once since the last reset_peak().
  std::size_t peak_bytes() const { return peak_.load(); }
  /// Sets the peak (and every category's, memory_ledger.h) to the current usage.
  void reset_peak() {
    peak_.store(current_.load());
    ledger_.reset_peak();
  }
  /// Bytes in use, and their peak, by category (see memory_ledger.h).
  const MemoryLedger& ledger() const { return ledger_; }
  /// Capacity in bytes; 0 means unlimited (the default).
  std::size_t capacity() const { return capacity_.load(); }
  /// Limits the bytes in use (0: unlimited); later allocations past it fail.
  void set_capacity(std::size_t bytes) { capacity_.store(bytes); }

  /// Use host(), cpu() or get(): devices live in a registry for the whole program.
  Device(DeviceKind kind, int index, int account = 0) : kind_(kind), index_(index), account_(account) {}
  /// Frees the block cache (devices die at program exit).
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

 private:
  DeviceKind kind_;
  int index_;
  int account_;
  std::atomic<std::size_t> current_{0};
  std::atomic<std::size_t> peak_{0};
  std::atomic<std::size_t> capacity_{0};
  mutable std::mutex cache_mutex_;  // rank threads free on other threads
  // (stream, rounded size) → free blocks. A GPU block is reused only by work
  // on the stream it was first allocated on, so a block freed while its
  // stream still has queued kernels using it is never handed to another rank
  // thread's stream (PyTorch's caching allocator does the same); host blocks
  // have stream nullptr.
  std::map<std::pair<const void*, std::size_t>, std::vector<void*>> cache_;
  std::map<void*, const void*> stream_of_;  // GPU block → its stream
  std::size_t cached_ = 0;
  MemoryLedger ledger_;  // the same bytes as current_, by category
};

/// Copies `bytes` from `src` on device `from` to `dst` on device `to`. When
/// either side is host memory the copy is complete on return; GPU to GPU it
/// is queued in order on the current stream (gpu.h).
void copy_bytes(void* dst, const Device& to, const void* src, const Device& from, std::size_t bytes);

/// "1.50 MiB"-style text for a byte count.
std::string format_bytes(double bytes);

}  // namespace dpt
