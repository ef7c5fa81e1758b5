// half_oracle.h — fp16 and bf16 written a second way, for the tests only:
// the oracle dpt/half.h and dpt/half_math.h (the one implementation the
// library, the chapters and the GPU kernels run) are checked against. It
// shares no code with them: it rounds with one general shift-and-round on
// the rebiased bits and widens through std::ldexp, where half_math.h adds
// biases to the raw bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace dpt_test::oracle {

inline uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

inline float word(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// Drops the low `shift` bits of `value`, rounding to nearest, ties to even.
// A carry out of the kept bits is the next binade (or inf): that is correct.
inline uint32_t round_shift(uint32_t value, int shift) {
  const uint32_t kept = value >> shift, rest = value & ((1u << shift) - 1), half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

inline uint16_t to_fp16(float x) {
  const uint32_t f = bits(x), sign = (f >> 16) & 0x8000u, magnitude = f & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN → quiet NaN
  if (magnitude >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520: rounds past 65504 → inf
  const int exponent = int(magnitude >> 23) - 127;
  if (exponent >= -14) {  // normal: rebias 127 → 15, keep 10 of 23 mantissa bits
    const uint32_t rebiased = (uint32_t(exponent + 15) << 23) | (magnitude & 0x7fffffu);
    return uint16_t(sign | round_shift(rebiased, 13));
  }
  if (magnitude <= 0x33000000u) return uint16_t(sign);  // <= 2^-25: half-way to 2^-24 or less → ±0
  // Subnormal: the value in units of 2^-24 is the 24-bit significand · 2^(exponent+1).
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  return uint16_t(sign | round_shift(significand, -exponent - 1));
}

inline float from_fp16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in float32
    const float value = std::ldexp(float(mantissa), -24);
    return sign ? -value : value;
  }
  if (exponent == 31) return word(sign | 0x7f800000u | (mantissa << 13));  // inf or NaN
  return word(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

inline uint16_t to_bf16(float x) {
  const uint32_t f = bits(x);
  if ((f & 0x7fffffffu) > 0x7f800000u) return uint16_t((f >> 16) | 0x40u);  // NaN → quiet NaN
  return uint16_t(round_shift(f, 16));  // float32's top half; a carry past the largest finite is inf
}

inline float from_bf16(uint16_t h) { return word(uint32_t(h) << 16); }

}  // namespace dpt_test::oracle
