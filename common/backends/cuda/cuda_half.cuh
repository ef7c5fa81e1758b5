// cuda_half.cuh — the device side of dpt/gpu_half.h: float32 ↔ bf16/fp16 as
// bit patterns (host-device functions), the kernels that apply them, and the
// plans (grids) that launch them over a `launch(kernel, grid, block, args...)`
// callable, as cuda_launches.cuh does.
//
// The conversions are written here on the bits, not with cuda_bf16.h's
// intrinsics, so the CPU tests can run this very code (tests/core/
// test_half_emulated.cpp) against dpt/half.h, a separate implementation, and
// against patterns worked out by hand. Included by cuda_half.cu and by that
// test only: the kernels below are not `inline`, and a second including file
// in one program would define them twice.
//
// Left out: loads wider than two elements, stochastic rounding.
#pragma once

#include <string.h>

#include <algorithm>
#include <cstdint>

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
// bits

DPT_HALF_HD inline uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

DPT_HALF_HD inline float bits_float(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

/// float32 → bf16: its top 16 bits, rounded on the low 16 by adding just
/// under half (0x7fff) plus the kept part's last bit (ties go to even). A
/// carry runs into the exponent: the next binade, or inf past the largest.
DPT_HALF_HD inline uint16_t bf16_of(float x) {
  const uint32_t f = float_bits(x);
  if ((f & 0x7fffffffu) > 0x7f800000u) return uint16_t((f >> 16) | 0x0040u);  // NaN → quiet NaN
  return uint16_t((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

/// float32 → fp16, by the float's biased exponent e:
///   e ≥ 143 (|x| ≥ 2^16), inf, NaN: ±inf, or a quiet NaN;
///   113 ≤ e ≤ 142 (normal): rebias by 127 − 15 = 112 and round away 13 bits
///     (|x| from 65520 carries into inf);
///   102 ≤ e ≤ 112 (subnormal): the value in units of 2^-24 is the 24-bit
///     significand shifted right by 126 − e (14 … 24 bits), rounded;
///   e ≤ 101 (|x| < 2^-25): ±0.
DPT_HALF_HD inline uint16_t fp16_of(float x) {
  const uint32_t f = float_bits(x), sign = (f >> 16) & 0x8000u, a = f & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);
  if (a >= 0x47800000u) return uint16_t(sign | 0x7c00u);
  if (a >= 0x38800000u) return uint16_t(sign | ((a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13));
  const uint32_t e = a >> 23;
  if (e < 102u) return uint16_t(sign);
  const uint32_t significand = (a & 0x007fffffu) | 0x00800000u, shift = 126u - e;
  return uint16_t(sign | ((significand + (1u << (shift - 1)) - 1u + ((significand >> shift) & 1u)) >> shift));
}

/// bf16 → float32: the pattern is float32's top half (exact).
DPT_HALF_HD inline float float_of_bf16(uint16_t h) { return bits_float(uint32_t(h) << 16); }

/// fp16 → float32 (exact): subnormals are mantissa · 2^-24, inf and NaN keep
/// their mantissa, normals rebias their exponent by 112.
DPT_HALF_HD inline float float_of_fp16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = float(m) * 5.9604644775390625e-8f;  // 2^-24; m < 2^10, so exact
    return sign ? -v : v;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

DPT_HALF_HD inline uint16_t half_of(float x, bool bf16) { return bf16 ? bf16_of(x) : fp16_of(x); }
DPT_HALF_HD inline float float_of(uint16_t h, bool bf16) { return bf16 ? float_of_bf16(h) : float_of_fp16(h); }

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

}  // namespace DPT_CUDA_BUILD
}  // namespace dpt::cuda
