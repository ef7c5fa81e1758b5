/// @file floats.h
/// @brief Flat float buffers wherever they live — host memory or a GPU: the
/// few things the chapters' communication algorithms do to raw buffers (copy,
/// add a received chunk, divide by the world size, a scratch buffer), so the
/// same ring, bucket and ZeRO code runs on `cpu:k` and on `cuda:k` devices.
///
///     dpt::Floats scratch(data, n);                    // n floats in data's memory
///     comm.recv(scratch.data(), n, peer);
///     dpt::add_floats(data + at, scratch.data(), n);   // data[at + i] += scratch[i]
///
/// On host memory these are the plain loops (the same bits). On a GPU they
/// are kernels and copies queued on the calling thread's current stream
/// (gpu.h), in order with its other work; a Communicator call on a GPU buffer
/// first waits for that work, so a ring's add always lands before the chunk
/// leaves. Both pointers of one call must live in the same memory, except for
/// `copy_floats`, which copies between any two.
///
/// In the student build (CMake DPT_STUDENT=ON) each call also checks every
/// range it is given against the tensor it points into: a range that runs
/// past a tensor's end, or starts before one and runs into it, is a
/// dpt::Error naming the call, the argument and the floats it asked for.
#pragma once

#include <cstdint>
#include <vector>

namespace dpt {
namespace gpu {
class Stream;
}

/// Whether this build checks the ranges given to the calls below (the
/// student build does).
bool float_ranges_checked();

/// The GPU `ptr` points into, or -1 for host memory (always -1 without CUDA).
int gpu_of(const void* ptr);

/// dst[0, count) = src[0, count), between any two of host memory and GPU
/// memory; complete when it returns (the host, or another rank, may use either
/// buffer at once). Host to host is a plain memcpy.
void copy_floats(float* dst, const float* src, int64_t count);

/// dst[i] += src[i] for i < count — the reduction step of a ring. `src` lives
/// in dst's memory (receive into a `Floats` made next to dst).
void add_floats(float* dst, const float* src, int64_t count);

/// data[i] *= factor for i < count.
void scale_floats(float* data, int64_t count, float factor);

/// data[i] /= divisor for i < count: a division, not a multiplication by
/// 1/divisor (the two differ in the last bit unless divisor is a power of two).
void divide_floats(float* data, int64_t count, float divisor);

/// `count` floats of scratch in the same memory as a given buffer (host memory
/// or its GPU), freed when it goes out of scope (on a GPU stream-ordered: after
/// the work queued on the stream that was current when it was made, no wait). Not charged to any Device's
/// account: scratch a communication algorithm needs, like a library's own.
class Floats {
 public:
  /// Scratch next to `near` (host memory when `near` is host memory or null).
  Floats(const float* near, int64_t count);
  /// Scratch on GPU `gpu` (-1: host memory). Throws dpt::Error (a sentence with
  /// the size) when the GPU has no room.
  Floats(int gpu, int64_t count);
  ~Floats();
  Floats(const Floats&) = delete;
  Floats& operator=(const Floats&) = delete;
  /// The first float (nullptr when count is 0).
  float* data() const { return data_; }
  /// Number of floats.
  int64_t size() const { return count_; }
  /// -1 for host memory, else the GPU.
  int gpu() const { return gpu_; }

 private:
  int gpu_;
  int64_t count_;
  float* data_ = nullptr;
  const gpu::Stream* stream_ = nullptr;  // where GPU scratch was allocated, and is freed
  std::vector<float> host_;
};

}  // namespace dpt
