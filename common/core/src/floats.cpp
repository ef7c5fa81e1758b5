// floats.cpp — flat float buffers on host memory or a GPU (dpt/floats.h):
// host memory takes kernels.h's CPU loops, GPU memory its CUDA kernels.
#include "dpt/floats.h"

#include <cstring>
#include <string>

#include "block_registry.h"
#include "dpt/check.h"
#include "dpt/device.h"
#include "dpt/gpu.h"
#include "dpt/kernels.h"

namespace dpt {

namespace {
// The loops for the memory `ptr` lives in.
Kernels& kernels_at(const void* ptr) {
  int gpu = gpu_of(ptr);
  return gpu < 0 ? cpu_kernels() : cuda_kernels(gpu);
}

void check_same_memory(const void* a, const void* b, int64_t count, const char* call) {
  if (count == 0) return;
  int ga = gpu_of(a), gb = gpu_of(b);
  DPT_CHECK(ga == gb, call << ": both buffers must live in the same memory, got "
                           << (ga < 0 ? std::string("host memory") : "cuda:" + std::to_string(ga)) << " and "
                           << (gb < 0 ? std::string("host memory") : "cuda:" + std::to_string(gb))
                           << " (receive into a dpt::Floats made next to the destination)");
}
// What a block is, for a message: "a tensor of 8 floats on cpu:0" or "a
// dpt::Floats of 2 floats (scratch)".
std::string block_name(const detail::LiveBlock& block) {
  const std::string floats = std::to_string(block.bytes / sizeof(float)) + " floats";
  return block.device ? "a tensor of " + floats + " on " + block.device->name() : "a dpt::Floats of " + floats + " (scratch)";
}

// Scratch is allocated in whole 64-byte units (block_registry.h's rounding),
// so the registry may count the rounded tail as the Floats' own.
int64_t allocated_floats(int64_t count) { return (count + 15) / 16 * 16; }
}  // namespace

namespace detail {
// Student build: `count` floats from `p` must lie inside the device block
// (the tensor's allocation) or the dpt::Floats that `p` points into; an
// offset or a count that is wrong is a sentence naming the call and the
// argument, not a crash or a silently overwritten neighbour. Memory nobody
// recorded (a std::vector, a stack array) is not checked.
void check_float_range(const float* p, int64_t count, const char* call, const char* argument) {
  DPT_CHECK(count >= 0, call << ": a negative count (" << count << ")");
  if (!kCheckFloatRanges || count == 0) return;
  const std::size_t bytes = std::size_t(count) * sizeof(float);
  LiveBlock block;
  if (block_holding(p, &block)) {
    const int64_t offset = int64_t(reinterpret_cast<const char*>(p) - block.begin) / int64_t(sizeof(float));
    const int64_t size = int64_t(block.bytes / sizeof(float));
    DPT_CHECK(offset + count <= size,
              call << ": out of bounds: its " << argument << " is floats [" << offset << ", " << offset + count
                   << ") of " << block_name(block) << " (" << offset + count - size
                   << " past its end): an offset or a count is wrong");
    return;
  }
  DPT_CHECK(!block_starting_within(p, bytes, &block),
            call << ": out of bounds: its " << argument << " (" << count << " floats) starts "
                 << (block.begin - reinterpret_cast<const char*>(p)) / int64_t(sizeof(float)) << " floats before "
                 << block_name(block) << " and runs into it: an offset is too small (negative?)");
}
}  // namespace detail

namespace {
void check_range(const float* p, int64_t count, const char* call, const char* argument) {
  detail::check_float_range(p, count, call, argument);
}
}  // namespace

bool float_ranges_checked() { return detail::kCheckFloatRanges; }

int gpu_of(const void* ptr) { return gpu::device_of_pointer(ptr); }

void copy_floats(float* dst, const float* src, int64_t count) {
  check_range(dst, count, "copy_floats", "destination");
  check_range(src, count, "copy_floats", "source");
  if (count == 0) return;
  const std::size_t bytes = std::size_t(count) * sizeof(float);
  int to = gpu_of(dst), from = gpu_of(src);
  if (to < 0 && from < 0) {
    std::memcpy(dst, src, bytes);
    return;
  }
  int device = to >= 0 ? to : from;
  gpu::CurrentDeviceGuard keep;  // a peer's GPU must not stay this thread's current one
  gpu::copy(dst, src, bytes, device);
  gpu::current_stream(device).synchronize();  // GPU to GPU copies return early
}

void add_floats(float* dst, const float* src, int64_t count) {
  check_range(dst, count, "add_floats", "destination");
  check_range(src, count, "add_floats", "source");
  if (count == 0) return;
  check_same_memory(dst, src, count, "add_floats");
  kernels_at(dst).add(dst, dst, src, count);
}

void scale_floats(float* data, int64_t count, float factor) {
  check_range(data, count, "scale_floats", "data");
  if (count == 0) return;
  kernels_at(data).scale(data, factor, count);
}

void divide_floats(float* data, int64_t count, float divisor) {
  check_range(data, count, "divide_floats", "data");
  if (count == 0) return;
  kernels_at(data).divide(data, divisor, count);
}

Floats::Floats(const float* near, int64_t count) : Floats(near ? gpu_of(near) : -1, count) {}

Floats::Floats(int gpu, int64_t count) : gpu_(gpu), count_(count) {
  DPT_CHECK(count >= 0, "Floats: a negative count (" << count << ")");
  if (count == 0) return;
  if (gpu < 0) {
    host_.resize(std::size_t(allocated_floats(count)));
    data_ = host_.data();
    if (detail::kCheckFloatRanges) detail::note_block(data_, std::size_t(count) * sizeof(float), nullptr);
    return;
  }
  // Stream-ordered: scratch comes and goes on every ring call, and cudaFree
  // would wait for the whole GPU (every rank thread's stream, and chapter 05's
  // backward while its comm stream runs the ring).
  stream_ = &gpu::current_stream(gpu);
  data_ = static_cast<float*>(gpu::allocate_on_stream(gpu, std::size_t(allocated_floats(count)) * sizeof(float)));
  DPT_CHECK(data_ != nullptr, "need " << count << " floats (" << 4 * count << " bytes) of scratch on cuda:" << gpu
                                      << ", and the GPU has no room left");
  if (detail::kCheckFloatRanges) detail::note_block(data_, std::size_t(count) * sizeof(float), nullptr);
}

Floats::~Floats() {
  if (detail::kCheckFloatRanges && data_ != nullptr) detail::forget_block(data_);
  if (gpu_ < 0 || data_ == nullptr) return;
  try {
    gpu::free_on_stream(gpu_, data_, *stream_);  // after the queued work that uses it, even if a StreamGuard ended
  } catch (...) {  // a destructor must not throw; the error already surfaced elsewhere
  }
}

}  // namespace dpt
