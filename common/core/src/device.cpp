// device.cpp — the device registry and per-device byte accounting.
#include "dpt/device.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <sanitizer/asan_interface.h>  // ASAN_(UN)POISON_MEMORY_REGION: no-ops without ASan

#include "block_registry.h"
#include "dpt/check.h"
#include "dpt/gpu.h"

namespace dpt {

namespace {
// Freed host blocks kept per device for reuse; beyond this they go back to
// the OS. GPU blocks are all kept (a cudaFree waits for the whole GPU); a GPU
// allocation that finds no room empties the cache and tries again.
constexpr std::size_t kHostCacheLimit = std::size_t(256) << 20;

// Allocation granularity: 64-byte aligned, at least one cache line.
std::size_t rounded_size(std::size_t bytes) { return bytes == 0 ? 64 : (bytes + 63) / 64 * 64; }
// The size of a device's block for `bytes`: rounded, except a GPU's when
// caching is off (exact, for compute-sanitizer; cudaMalloc aligns it to 256).
std::size_t block_size(DeviceKind kind, std::size_t bytes) {
  if (kind == DeviceKind::Cuda && !Device::memory_caching()) return bytes == 0 ? 1 : bytes;
  return rounded_size(bytes);
}

// (kind, index, account) → the device, made on first use, never removed.
using DeviceKey = std::tuple<int, int, int>;
std::mutex g_registry_mutex;
std::map<DeviceKey, std::unique_ptr<Device>>& registry() {
  static std::map<DeviceKey, std::unique_ptr<Device>> devices;
  return devices;
}

// Fresh memory from the OS or the GPU driver; nullptr when there is none.
void* raw_allocate(DeviceKind kind, int index, std::size_t rounded) {
  if (kind == DeviceKind::Cuda) return gpu::allocate(index, rounded);
  return std::aligned_alloc(64, rounded);
}

// Under AddressSanitizer, host blocks are poisoned where no tensor may read:
// past a tensor's bytes (a block is rounded up to 64) and all of a cached
// block (raw_free, expose, hide). Without it, an index one past the end, or a
// read through a freed tensor's pointer, lands in memory the allocator still
// owns, and ASan (which sees one aligned_alloc) says nothing.
void raw_free(DeviceKind kind, int index, void* ptr, std::size_t rounded) {
  if (kind == DeviceKind::Cuda) {
    gpu::free(index, ptr);
    return;
  }
  ASAN_UNPOISON_MEMORY_REGION(ptr, rounded);
  std::free(ptr);
}

// A host block handed out for `bytes`: those readable, the rest poisoned
// (under AddressSanitizer; nothing otherwise).
void expose(DeviceKind kind, void* ptr, std::size_t bytes, std::size_t rounded) {
  if (kind == DeviceKind::Cuda) return;
  ASAN_UNPOISON_MEMORY_REGION(ptr, bytes);
  ASAN_POISON_MEMORY_REGION(static_cast<char*>(ptr) + bytes, rounded - bytes);
}
// A host block back in the cache: all of it poisoned.
void hide(DeviceKind kind, void* ptr, std::size_t rounded) {
  if (kind != DeviceKind::Cuda) ASAN_POISON_MEMORY_REGION(ptr, rounded);
}

Device& lookup(DeviceKind kind, int index, int account = 0) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  auto& slot = registry()[{static_cast<int>(kind), index, account}];
  if (!slot) slot = std::make_unique<Device>(kind, index, account);
  return *slot;
}

// Every account's cached blocks on GPU `gpu` back to the driver: one
// account's cache must not starve another's allocation on a shared GPU.
// (Devices are never removed, so the pointers outlive the registry lock.)
void empty_gpu_caches(int gpu) {
  std::vector<Device*> accounts;
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    for (auto& [key, device] : registry())
      if (std::get<0>(key) == static_cast<int>(DeviceKind::Cuda) && std::get<1>(key) == gpu)
        accounts.push_back(device.get());
  }
  for (Device* device : accounts) device->empty_cache();
}

// "cuda:K" for account 0, else "cuda:K/A".
std::string cuda_name(int index, int account) {
  return "cuda:" + std::to_string(index) + (account == 0 ? "" : "/" + std::to_string(account));
}

// The digits of a device index in `text`, or -1 when it is not all digits.
int parse_index(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(text);
}

// The live blocks of every device, by address (student build only).
std::mutex g_blocks_mutex;
std::map<const char*, detail::LiveBlock>& live_blocks() {
  static std::map<const char*, detail::LiveBlock> blocks;
  return blocks;
}
}  // namespace

namespace detail {
void note_block(const void* begin, std::size_t bytes, const Device* device) {
  std::lock_guard<std::mutex> lock(g_blocks_mutex);
  const char* at = static_cast<const char*>(begin);
  live_blocks()[at] = LiveBlock{at, bytes, device};
}

void forget_block(const void* begin) {
  std::lock_guard<std::mutex> lock(g_blocks_mutex);
  live_blocks().erase(static_cast<const char*>(begin));
}

bool block_holding(const void* p, LiveBlock* out) {
  std::lock_guard<std::mutex> lock(g_blocks_mutex);
  const char* at = static_cast<const char*>(p);
  auto it = live_blocks().upper_bound(at);
  if (it == live_blocks().begin()) return false;
  --it;
  if (at >= it->first + rounded_size(it->second.bytes)) return false;
  *out = it->second;
  return true;
}

bool block_starting_within(const void* p, std::size_t bytes, LiveBlock* out) {
  std::lock_guard<std::mutex> lock(g_blocks_mutex);
  const char* at = static_cast<const char*>(p);
  auto it = live_blocks().upper_bound(at);
  if (it == live_blocks().end() || it->first >= at + bytes) return false;
  *out = it->second;
  return true;
}
}  // namespace detail

Device& Device::host() { return lookup(DeviceKind::Host, 0); }

Device& Device::cpu(int index) {
  DPT_CHECK(index >= 0, "device index must be >= 0, got " << index);
  return lookup(DeviceKind::Cpu, index);
}

// "host", "cpu:K", "cuda:K" or "cuda:K/A" (name() prints the same).
Device& Device::get(const std::string& name) {
  if (name == "host") return host();
  const char* expected = ": expected host, cpu:K, cuda:K or cuda:K/A";
  auto colon = name.find(':');
  DPT_CHECK(colon != std::string::npos, "unknown device '" << name << "'" << expected);
  std::string kind = name.substr(0, colon), rest = name.substr(colon + 1);
  DPT_CHECK(kind == "cpu" || kind == "cuda", "unknown device kind '" << kind << "'" << expected);
  auto slash = rest.find('/');
  int index = parse_index(rest.substr(0, slash));
  int account = slash == std::string::npos ? 0 : parse_index(rest.substr(slash + 1));
  DPT_CHECK(index >= 0 && account >= 0, "device '" << name << "' has no valid index" << expected);
  DPT_CHECK(kind == "cuda" || slash == std::string::npos,
            "device '" << name << "': only a GPU has accounts (cuda:K/A); every rank has a cpu:K of its own already");
  return kind == "cpu" ? cpu(index) : cuda(index, account);
}

Device& Device::cuda(int index, int account) {
  DPT_CHECK(index >= 0, "device index must be >= 0, got " << index);
  DPT_CHECK(account >= 0, "a GPU's memory account must be >= 0, got " << account);
  std::string name = cuda_name(index, account);
  std::string reason = gpu::unavailable_reason();
  DPT_CHECK(reason.empty(), name << " is not available: " << reason);
  int count = gpu::device_count();
  DPT_CHECK(index < count, name << " does not exist: this process sees " << count << " GPU" << (count == 1 ? "" : "s")
                                << " (CUDA_VISIBLE_DEVICES decides which)");
  return lookup(DeviceKind::Cuda, index, account);
}

std::string Device::name() const {
  switch (kind_) {
    case DeviceKind::Host: return "host";
    case DeviceKind::Cpu: return "cpu:" + std::to_string(index_);
    case DeviceKind::Cuda: return cuda_name(index_, account_);
  }
  return "?";
}

void* Device::allocate(std::size_t bytes) {
  std::size_t now = current_.fetch_add(bytes) + bytes;
  std::size_t cap = capacity_.load();
  if (cap != 0 && now > cap) {
    current_.fetch_sub(bytes);
    throw OutOfMemory(detail::format_error(
        __FILE__, __LINE__,
        "out of memory on " + name() + ": asked for " + format_bytes(double(bytes)) + " with " +
            format_bytes(double(now - bytes)) + " in use of a " + format_bytes(double(cap)) +
            " capacity (while allocating " + memory_category_name(current_memory_category()) + ")"));
  }
  std::size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  std::size_t rounded = block_size(kind_, bytes);
  const void* stream = kind_ == DeviceKind::Cuda ? gpu::current_stream(index_).handle() : nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find({stream, rounded});
    if (it != cache_.end() && !it->second.empty()) {
      void* reused = it->second.back();
      it->second.pop_back();
      cached_ -= rounded;
      expose(kind_, reused, bytes, rounded);
      ledger_.on_allocate(reused, bytes);
      if (detail::kCheckFloatRanges) detail::note_block(reused, bytes, this);
      return reused;
    }
  }
  void* ptr = raw_allocate(kind_, index_, rounded);
  if (!ptr && kind_ == DeviceKind::Cuda) {
    // The GPU may be full of blocks its accounts cache but do not use: give
    // them back, retry.
    empty_gpu_caches(index_);
    ptr = raw_allocate(kind_, index_, rounded);
  }
  if (!ptr) {
    current_.fetch_sub(bytes);
    throw OutOfMemory(detail::format_error(
        __FILE__, __LINE__,
        "out of memory on " + name() + ": asked for " + format_bytes(double(bytes)) + " with " +
            format_bytes(double(current_.load())) + " in use by dpt, and " +
            (kind_ == DeviceKind::Cuda ? "the GPU has no more room" : "the host allocation failed") +
            " (while allocating " + memory_category_name(current_memory_category()) + ")"));
  }
  if (kind_ == DeviceKind::Cuda) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    stream_of_[ptr] = stream;
  }
  expose(kind_, ptr, bytes, rounded);
  ledger_.on_allocate(ptr, bytes);
  if (detail::kCheckFloatRanges) detail::note_block(ptr, bytes, this);
  return ptr;
}

void Device::release(void* ptr, std::size_t bytes) {
  if (!ptr) return;
  current_.fetch_sub(bytes);
  ledger_.on_release(ptr, bytes);
  if (detail::kCheckFloatRanges) detail::forget_block(ptr);
  std::size_t rounded = block_size(kind_, bytes);
  if (!memory_caching()) {
    if (kind_ == DeviceKind::Cuda) {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      stream_of_.erase(ptr);
    }
    raw_free(kind_, index_, ptr, rounded);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (kind_ == DeviceKind::Cuda) {  // back to its own stream's blocks
      cache_[{stream_of_.at(ptr), rounded}].push_back(ptr);
      cached_ += rounded;
      return;
    }
    if (cached_ + rounded <= kHostCacheLimit) {
      cache_[{nullptr, rounded}].push_back(ptr);
      cached_ += rounded;
      hide(kind_, ptr, rounded);
      return;
    }
  }
  raw_free(kind_, index_, ptr, rounded);
}

bool Device::memory_caching() {
  static const bool on = [] {
    const char* off = std::getenv("DPT_NO_MEMORY_CACHING");
    return !(off && std::string(off) == "1");
  }();
  return on;
}

Device::~Device() {
  try {
    empty_cache();
  } catch (...) {  // at exit the CUDA runtime may be gone: the memory goes with the process
  }
}

void Device::empty_cache() {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  for (auto& [key, blocks] : cache_)
    for (void* block : blocks) {
      raw_free(kind_, index_, block, key.second);
      stream_of_.erase(block);
    }
  cache_.clear();
  cached_ = 0;
}

std::size_t Device::cached_bytes() const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  return cached_;
}

void copy_bytes(void* dst, const Device& to, const void* src, const Device& from,
                std::size_t bytes) {
  if (bytes == 0) return;
  if (to.is_host_memory() && from.is_host_memory()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // Host↔GPU or GPU↔GPU: in order on the current stream of the GPU involved
  // (the destination's when both are GPUs).
  gpu::copy(dst, src, bytes, to.kind() == DeviceKind::Cuda ? to.index() : from.index());
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
  return text;
}

}  // namespace dpt
