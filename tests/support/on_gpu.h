// on_gpu.h — raw GPU buffers for the 16-bit GPU tests (tensor.h holds only
// float32): OnGpu<T> owns `count` elements on cuda:0, and to16/from16 turn a
// float into a format's bit pattern and back on the host (support/half_oracle.h).
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/gpu.h"
#include "dpt/gpu_half.h"
#include "dpt/half.h"
#include "support/half_oracle.h"
#include "support/catch.h"

namespace dpt_test {

/// `count` elements of T in cuda:0's memory, freed at the end of the scope.
template <typename T>
struct OnGpu {
  T* ptr = nullptr;
  int64_t count;
  explicit OnGpu(int64_t n) : count(n) {
    ptr = static_cast<T*>(dpt::gpu::allocate(0, std::size_t(n) * sizeof(T)));
    REQUIRE(ptr != nullptr);
  }
  explicit OnGpu(const std::vector<T>& host) : OnGpu(int64_t(host.size())) {
    dpt::gpu::copy(ptr, host.data(), host.size() * sizeof(T), 0);
  }
  std::vector<T> to_host() const {
    std::vector<T> host(static_cast<std::size_t>(count));
    dpt::gpu::copy(host.data(), ptr, host.size() * sizeof(T), 0);
    return host;
  }
  ~OnGpu() { dpt::gpu::free(0, ptr); }
  OnGpu(const OnGpu&) = delete;
  OnGpu& operator=(const OnGpu&) = delete;
};

/// x rounded to the format's bits on the host by the tests' own conversions
/// (support/half_oracle.h: to nearest, ties to even).
inline uint16_t to16(float x, dpt::Half f) {
  return f == dpt::Half::BF16 ? oracle::to_bf16(x) : oracle::to_fp16(x);
}
/// The float32 a format's bits stand for (the oracle's).
inline float from16(uint16_t h, dpt::Half f) {
  return f == dpt::Half::BF16 ? oracle::from_bf16(h) : oracle::from_fp16(h);
}

}  // namespace dpt_test
