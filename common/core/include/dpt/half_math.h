/// @file half_math.h
/// @brief One element's 16-bit math, written once for the CPU and the GPU:
/// float32 ↔ bf16/fp16 on the bits, rounding a float32 to a format while
/// counting what the rounding met, and the inf-or-NaN test. The one 16-bit
/// implementation: dpt/half.h's conversions are these; the CUDA backend's
/// kernels (common/backends/cuda/cuda_half.cuh) call them on the GPU and the
/// CPU kernels (cpu_kernels.cpp: kernels.h's round_half, gemm_half,
/// count_inf_or_nan) on the host, so the two sides can differ only in where
/// the sums of counts are taken, never in a rounding.
///
/// Compiled by nvcc they are `__host__ __device__`; by the C++ compiler,
/// plain inline functions (kernel_math.h's DPT_HOST_DEVICE). The CPU tests
/// run them against a separate implementation written in the tests
/// (tests/support/half_oracle.h; test_half_emulated.cpp, test_half_math.cpp).
///
/// Left out: fp8, stochastic rounding, the loops (cuda_half.cuh, cpu_kernels.cpp).
#pragma once

#include <string.h>

#include <cstdint>

#include "dpt/kernel_math.h"  // DPT_HOST_DEVICE

namespace dpt::math {

// ----------------------------------------------------------------------------
// bits

/// x's 32 bits (no conversion).
DPT_HOST_DEVICE inline uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

/// The float whose 32 bits are `bits` (no conversion).
DPT_HOST_DEVICE inline float bits_float(uint32_t bits) {
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
DPT_HOST_DEVICE inline uint16_t bf16_of(float x) {
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
DPT_HOST_DEVICE inline uint16_t fp16_of(float x) {
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
DPT_HOST_DEVICE inline float float_of_bf16(uint16_t h) { return bits_float(uint32_t(h) << 16); }

/// fp16 → float32 (exact): subnormals are mantissa · 2^-24, inf and NaN keep
/// their mantissa, normals rebias their exponent by 112.
DPT_HOST_DEVICE inline float float_of_fp16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = float(m) * 5.9604644775390625e-8f;  // 2^-24; m < 2^10, so exact
    return sign ? -v : v;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

/// x → bf16 (`bf16`) or fp16 bits.
DPT_HOST_DEVICE inline uint16_t half_of(float x, bool bf16) { return bf16 ? bf16_of(x) : fp16_of(x); }
/// bf16 (`bf16`) or fp16 bits → float32 (exact).
DPT_HOST_DEVICE inline float float_of(uint16_t h, bool bf16) { return bf16 ? float_of_bf16(h) : float_of_fp16(h); }

// ----------------------------------------------------------------------------
// rounding a float32 to a format, counting what it met

/// What roundings met: entries that were not 0 before; of those, entries 0
/// after (flushed: underflow) and entries below the format's smallest normal
/// after (0 or subnormal: bits lost). Plain data (no initialisers: a GPU
/// block sums these in shared memory); start from `RoundingCounts{}`.
struct RoundingCounts {
  unsigned long long nonzero;  ///< entries not 0 before rounding
  unsigned long long flushed;  ///< of those, 0 after
  unsigned long long tiny;     ///< of those, below the smallest normal after
};

/// The sum of two counts.
DPT_HOST_DEVICE inline RoundingCounts operator+(const RoundingCounts& a, const RoundingCounts& b) {
  return {a.nonzero + b.nonzero, a.flushed + b.flushed, a.tiny + b.tiny};
}

/// The format's smallest positive normal: 2^-126 (bf16, float32's), 2^-14 (fp16).
DPT_HOST_DEVICE inline float smallest_normal_of(bool bf16) { return bf16 ? 0x1p-126f : 0x1p-14f; }

/// x rounded to bf16 (`bf16`) or fp16, as the float32 it is (to nearest, ties
/// to even, fp16's subnormals, ±inf from 65520, NaN quiet).
DPT_HOST_DEVICE inline float round_float(float x, bool bf16) { return float_of(half_of(x, bf16), bf16); }

/// round_float(x, bf16), with what it met added to `count`: a non-zero x
/// counts as nonzero, and also as flushed when it became ±0, and as tiny when
/// it became less than the smallest normal in magnitude (a NaN is neither).
/// A zero stays zero and is not counted.
DPT_HOST_DEVICE inline float round_counting(float x, bool bf16, RoundingCounts& count) {
  const float r = round_float(x, bf16);
  if (x != 0.0f) {
    count.nonzero += 1;
    count.flushed += r == 0.0f ? 1 : 0;
    count.tiny += (r < smallest_normal_of(bf16) && r > -smallest_normal_of(bf16)) ? 1 : 0;
  }
  return r;
}

/// True when x is ±inf or NaN: its exponent bits are all ones.
DPT_HOST_DEVICE inline bool is_inf_or_nan(float x) { return (float_bits(x) & 0x7f800000u) == 0x7f800000u; }

}  // namespace dpt::math
