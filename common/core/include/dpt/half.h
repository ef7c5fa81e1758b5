/// @file half.h
/// @brief 16-bit floats by hand: IEEE fp16 and bfloat16 as bit patterns,
/// converted from float32 with round-to-nearest-even, the rounding a GPU's
/// cast does. Chapter 10 sends them on the wire; chapter 11 stores in them.
///
///   fp16: 1 sign, 5 exponent, 10 mantissa bits. Largest finite 65504; past
///         65520 (half-way to 65536) a value becomes ±inf; below 2^-14 it is
///         subnormal (steps of 2^-24), below 2^-25 it is ±0.
///   bf16: 1 sign, 8 exponent, 7 mantissa bits: float32's range (its top 16
///         bits), 3 significant digits.
///
///     uint16_t h = dpt::to_half(dpt::Half::BF16, 1.01171875f);  // 0x3f82
///     float r = dpt::round_to(dpt::Half::FP16, 65520.0f);       // inf
///
/// One implementation: these are the element functions of dpt/half_math.h,
/// which the GPU kernels (kernels.h's 16-bit ops) run too, so a value rounds
/// to the same bits on every device. The tests pin them against a separate
/// implementation written in the tests (tests/support/half_oracle.h).
///
/// Left out: fp8, stochastic rounding, signalling NaNs (every NaN becomes quiet).
#pragma once

#include <cstdint>

#include "dpt/half_math.h"

namespace dpt {

/// The two 16-bit formats: fp16 keeps 11 significant bits over 2^-24 … 65504;
/// bf16 keeps float32's range with 8.
enum class Half { FP16, BF16 };

/// "fp16" or "bf16".
const char* half_name(Half format);

/// x rounded to the nearest fp16 (ties to even; ±inf from 65520; NaN stays NaN).
inline uint16_t to_fp16(float x) { return math::fp16_of(x); }
/// The float32 an fp16 bit pattern stands for (exact: every fp16 is a float32).
inline float from_fp16(uint16_t h) { return math::float_of_fp16(h); }
/// x rounded to the nearest bf16 (ties to even; a carry past the largest finite is inf; NaN stays NaN).
inline uint16_t to_bf16(float x) { return math::bf16_of(x); }
/// The float32 a bf16 bit pattern stands for (exact).
inline float from_bf16(uint16_t h) { return math::float_of_bf16(h); }

/// x rounded to `format`'s nearest bit pattern (to_fp16 or to_bf16).
inline uint16_t to_half(Half format, float x) { return math::half_of(x, format == Half::BF16); }
/// The float32 a `format` pattern stands for (from_fp16 or from_bf16; exact).
inline float from_half(Half format, uint16_t h) { return math::float_of(h, format == Half::BF16); }
/// x rounded to `format` and back: the float32 a 16-bit store or wire makes of x.
inline float round_to(Half format, float x) { return math::round_float(x, format == Half::BF16); }

/// A 32-bit word's bits as a float and back (no conversion).
inline float word_of(uint32_t bits) { return math::bits_float(bits); }
/// See word_of.
inline uint32_t bits_of(float word) { return math::float_bits(word); }

}  // namespace dpt
