// cuda_half.cuh — the device side of dpt/gpu_half.h: the kernels that apply
// dpt/half_math.h's float32 ↔ bf16/fp16 conversions (host-device functions on
// the bits), and the plans (grids) that launch them over a
// `launch(kernel, grid, block, args...)` callable, as cuda_launches.cuh does.
//
// The conversions are written on the bits, not with cuda_bf16.h's
// intrinsics, so the CPU tests can run this very code (tests/core/
// test_half_emulated.cpp) against dpt/half.h, a separate implementation, and
// against patterns worked out by hand. Included by cuda_half.cu and by that
// test only: the kernels below are not `inline`, and a second including file
// in one program would define them twice.
//
// Left out: loads wider than two elements, stochastic rounding.
#pragma once

#include <algorithm>
#include <cstdint>

#include "dpt/half_math.h"

#ifdef __CUDACC__
#define DPT_HALF_HD __host__ __device__
#else
#define DPT_HALF_HD
#endif
#ifndef DPT_CUDA_BUILD
#define DPT_CUDA_BUILD nvcc
#endif

namespace dpt::cuda {
inline namespace DPT_CUDA_BUILD {

// ----------------------------------------------------------------------------
// bits: dpt/half_math.h's, the functions chapter 11's CPU loops run too

using math::bf16_of;
using math::bits_float;
using math::float_bits;
using math::float_of;
using math::float_of_bf16;
using math::float_of_fp16;
using math::fp16_of;
using math::half_of;

// ----------------------------------------------------------------------------
// kernels: grid-stride over elements (or rows × columns), n may exceed 2^31

constexpr int kHalfThreads = 256;      // threads a block
constexpr int kHalfBlocks = 8192;      // most blocks over elements; the grid-stride loop does the rest
constexpr int kHalfRowBlocks = 65535;  // most blocks over rows (gridDim.y's limit)

__global__ void round_to_half_kernel(uint16_t* out, const float* x, int64_t n, bool bf16) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = half_of(x[i], bf16);
}

__global__ void widen_half_kernel(float* out, const uint16_t* x, int64_t n, bool bf16) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = float_of(x[i], bf16);
}

// y (rows, cols): rows by blockIdx.y, columns by x (no division per element).
__global__ void bias_relu_half_kernel(uint16_t* y, const float* bias, int64_t rows, int64_t cols, bool relu,
                                      bool bf16) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += int64_t(gridDim.x) * blockDim.x) {
      float v = float_of(y[r * cols + c], bf16) + bias[c];
      if (relu && v < 0.0f) v = 0.0f;  // NaN stays NaN, as math::relu
      y[r * cols + c] = half_of(v, bf16);
    }
}

__global__ void relu_backward_half_kernel(uint16_t* dy, const uint16_t* y, int64_t n, bool bf16) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    if (!(float_of(y[i], bf16) > 0.0f)) dy[i] = 0;  // +0 in both formats
}

// The same three, two neighbouring elements a thread (element 2p in the low
// half of word p, as a little-endian GPU stores them): twice the bytes per
// load, which a memory-bound pass over 2-byte values needs. For buffers
// aligned to a pair; the plans below fall back to the kernels above otherwise.
struct alignas(8) FloatPair {
  float lo, hi;
};
DPT_HALF_HD inline uint32_t pair_of(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }

__global__ void round_to_half_pairs_kernel(uint32_t* out, const FloatPair* x, int64_t pairs, bool bf16) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += int64_t(gridDim.x) * blockDim.x) {
    const FloatPair v = x[p];
    out[p] = pair_of(half_of(v.lo, bf16), half_of(v.hi, bf16));
  }
}

// y (rows, 2·col_pairs) as words, bias (2·col_pairs) as pairs.
__global__ void bias_relu_half_pairs_kernel(uint32_t* y, const FloatPair* bias, int64_t rows, int64_t col_pairs,
                                            bool relu, bool bf16) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < col_pairs;
         c += int64_t(gridDim.x) * blockDim.x) {
      const uint32_t word = y[r * col_pairs + c];
      const FloatPair b = bias[c];
      float lo = float_of(uint16_t(word), bf16) + b.lo, hi = float_of(uint16_t(word >> 16), bf16) + b.hi;
      if (relu && lo < 0.0f) lo = 0.0f;
      if (relu && hi < 0.0f) hi = 0.0f;
      y[r * col_pairs + c] = pair_of(half_of(lo, bf16), half_of(hi, bf16));
    }
}

__global__ void relu_backward_half_pairs_kernel(uint32_t* dy, const uint32_t* y, int64_t pairs, bool bf16) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += int64_t(gridDim.x) * blockDim.x) {
    const uint32_t out = y[p];
    uint32_t d = dy[p];
    if (!(float_of(uint16_t(out), bf16) > 0.0f)) d &= 0xffff0000u;
    if (!(float_of(uint16_t(out >> 16), bf16) > 0.0f)) d &= 0x0000ffffu;
    dy[p] = d;
  }
}

// ----------------------------------------------------------------------------
// float32 tensors rounded in place, and counts summed on the device (no
// atomics: each block writes its partial, one block sums the partials; the
// emulator runs both as written)

constexpr int kHalfCountBlocks = 1024;  // most partials a count leaves for its second pass

// Every thread's `mine` summed over the block (kHalfThreads threads); the
// result in every thread. Once per kernel: the shared array is the call's.
template <typename T>
__device__ T half_block_sum(T mine) {
  __shared__ T shared[kHalfThreads];
  shared[threadIdx.x] = mine;
  __syncthreads();
  for (unsigned half = kHalfThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] = shared[threadIdx.x] + shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

// x (n floats) = math::round_counting(x): rounded in place; with `partials`,
// partials[block] = what this block's share met (every thread takes part in the
// sum: `partials` is the same for the whole grid).
__global__ void round_floats_kernel(float* x, int64_t n, bool bf16, math::RoundingCounts* partials) {
  math::RoundingCounts mine{};
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = math::round_counting(x[i], bf16, mine);
  if (partials == nullptr) return;
  const math::RoundingCounts total = half_block_sum(mine);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// partials[block] = entries of this block's share of x (n floats) that are ±inf or NaN.
__global__ void count_inf_or_nan_kernel(const float* x, int64_t n, unsigned long long* partials) {
  unsigned long long mine = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    mine += math::is_inf_or_nan(x[i]) ? 1ull : 0ull;
  const unsigned long long total = half_block_sum(mine);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// *out = Σ partials[0 .. count); one block of kHalfThreads.
template <typename T>
__global__ void sum_partials_kernel(const T* partials, int count, T* out) {
  T mine{};
  for (int i = int(threadIdx.x); i < count; i += int(blockDim.x)) mine = mine + partials[i];
  const T total = half_block_sum(mine);
  if (threadIdx.x == 0) *out = total;
}

// ----------------------------------------------------------------------------
// plans

inline unsigned half_blocks(int64_t n) {
  return unsigned(std::clamp<int64_t>((n + kHalfThreads - 1) / kHalfThreads, 1, kHalfBlocks));
}

/// kernel over n elements; nothing for n ≤ 0 (an empty grid is refused).
template <typename Launch, typename... Params, typename... Args>
void launch_half_elementwise(Launch& launch, void (*kernel)(Params...), int64_t n, Args... args) {
  if (n <= 0) return;
  launch(kernel, dim3(half_blocks(n)), dim3(kHalfThreads), args...);
}

inline bool aligned_to(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

/// out (n) = x rounded: pairs where both are pair-aligned, the odd last
/// element alone; one element a thread otherwise.
template <typename Launch>
void launch_round_to_half(Launch& launch, uint16_t* out, const float* x, int64_t n, bool bf16) {
  if (n <= 0) return;
  if (!aligned_to(out, 4) || !aligned_to(x, 8)) return launch_half_elementwise(launch, round_to_half_kernel, n, out, x, n, bf16);
  const int64_t pairs = n / 2;
  if (pairs > 0)
    launch(round_to_half_pairs_kernel, dim3(half_blocks(pairs)), dim3(kHalfThreads), reinterpret_cast<uint32_t*>(out),
           reinterpret_cast<const FloatPair*>(x), pairs, bf16);
  if (n % 2) launch_half_elementwise(launch, round_to_half_kernel, 1, out + n - 1, x + n - 1, int64_t(1), bf16);
}

/// ReLU's backward over n: pairs where both are pair-aligned (the odd last
/// element alone), one element a thread otherwise.
template <typename Launch>
void launch_relu_backward_half(Launch& launch, uint16_t* dy, const uint16_t* y, int64_t n, bool bf16) {
  if (n <= 0) return;
  if (!aligned_to(dy, 4) || !aligned_to(y, 4)) return launch_half_elementwise(launch, relu_backward_half_kernel, n, dy, y, n, bf16);
  const int64_t pairs = n / 2;
  if (pairs > 0)
    launch(relu_backward_half_pairs_kernel, dim3(half_blocks(pairs)), dim3(kHalfThreads), reinterpret_cast<uint32_t*>(dy),
           reinterpret_cast<const uint32_t*>(y), pairs, bf16);
  if (n % 2) launch_half_elementwise(launch, relu_backward_half_kernel, 1, dy + n - 1, y + n - 1, int64_t(1), bf16);
}

/// bias + ReLU over (rows, cols): column blocks × row blocks, by pairs of
/// columns when cols is even and y and bias are pair-aligned.
template <typename Launch>
void launch_bias_relu_half(Launch& launch, uint16_t* y, const float* bias, int64_t rows, int64_t cols, bool relu,
                           bool bf16) {
  if (rows <= 0 || cols <= 0) return;
  const bool pairs = cols % 2 == 0 && aligned_to(y, 4) && aligned_to(bias, 8);
  const int64_t across_items = pairs ? cols / 2 : cols;
  const auto across = unsigned(std::clamp<int64_t>((across_items + kHalfThreads - 1) / kHalfThreads, 1, kHalfBlocks));
  const auto down = unsigned(std::min<int64_t>(rows, kHalfRowBlocks));
  if (pairs)
    launch(bias_relu_half_pairs_kernel, dim3(across, down), dim3(kHalfThreads), reinterpret_cast<uint32_t*>(y),
           reinterpret_cast<const FloatPair*>(bias), rows, cols / 2, relu, bf16);
  else
    launch(bias_relu_half_kernel, dim3(across, down), dim3(kHalfThreads), y, bias, rows, cols, relu, bf16);
}

/// Blocks of a count over n elements: each writes one partial (1 … kHalfCountBlocks).
inline unsigned count_blocks(int64_t n) {
  return unsigned(std::clamp<int64_t>((n + kHalfThreads - 1) / kHalfThreads, 1, kHalfCountBlocks));
}

/// x (n floats) rounded in place; with `partials` (count_blocks(n) of them)
/// and `out`, *out = what the rounding met, summed. Nothing for n ≤ 0.
template <typename Launch>
void launch_round_floats(Launch& launch, float* x, int64_t n, bool bf16, math::RoundingCounts* partials,
                         math::RoundingCounts* out) {
  if (n <= 0) return;
  if (partials == nullptr) return launch_half_elementwise(launch, round_floats_kernel, n, x, n, bf16, partials);
  const unsigned blocks = count_blocks(n);
  launch(round_floats_kernel, dim3(blocks), dim3(kHalfThreads), x, n, bf16, partials);
  launch(sum_partials_kernel<math::RoundingCounts>, dim3(1), dim3(kHalfThreads),
         static_cast<const math::RoundingCounts*>(partials), int(blocks), out);
}

/// *out = entries of x (n floats, n ≥ 1) that are ±inf or NaN, through
/// count_blocks(n) partials.
template <typename Launch>
void launch_count_inf_or_nan(Launch& launch, const float* x, int64_t n, unsigned long long* partials,
                             unsigned long long* out) {
  const unsigned blocks = count_blocks(n);
  launch(count_inf_or_nan_kernel, dim3(blocks), dim3(kHalfThreads), x, n, partials);
  launch(sum_partials_kernel<unsigned long long>, dim3(1), dim3(kHalfThreads),
         static_cast<const unsigned long long*>(partials), int(blocks), out);
}

}  // namespace DPT_CUDA_BUILD
}  // namespace dpt::cuda
