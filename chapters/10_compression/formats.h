/// @file formats.h
/// @brief 16-bit floats by hand (provided, not a hole): IEEE fp16 and bfloat16
/// as bit patterns, converted from float32 with round-to-nearest-even, the
/// rounding a GPU's cast does.
///
///   fp16: 1 sign, 5 exponent, 10 mantissa bits. Largest finite 65504; past
///         65520 (half-way to 65536) a value becomes ±inf; below 2^-14 it is
///         subnormal (steps of 2^-24), below 2^-25 it is ±0.
///   bf16: 1 sign, 8 exponent, 7 mantissa bits: float32's range (its top 16
///         bits), 3 significant digits.
///
/// Two 16-bit values travel in one 32-bit word (pack/unpack): the
/// communicator counts float32 words, so 2 bytes per value on the wire.
/// Left out: fp8, stochastic rounding, signalling NaNs (every NaN becomes quiet).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dpt::ch10 {

/// Which 16-bit format.
enum class Half { FP16, BF16 };

/// x rounded to the nearest fp16 (ties to even; ±inf past 65520; NaN stays NaN).
uint16_t to_fp16(float x);
/// The float32 an fp16 bit pattern stands for (exact).
float from_fp16(uint16_t h);
/// x rounded to the nearest bf16 (ties to even; NaN stays NaN).
uint16_t to_bf16(float x);
/// The float32 a bf16 bit pattern stands for (exact).
float from_bf16(uint16_t h);

/// to_fp16 or to_bf16.
uint16_t to_half(Half format, float x);
/// from_fp16 or from_bf16.
float from_half(Half format, uint16_t h);
/// x rounded to the format and back: what x becomes on a 16-bit wire.
inline float round_to(Half format, float x) { return from_half(format, to_half(format, x)); }

/// 16-bit values two to a 32-bit word (the second in the high half); an odd
/// count leaves the last word's high half 0. Result: (ceil(n/2),) words.
std::vector<float> pack(const std::vector<uint16_t>& halves);
/// The inverse of pack: the first `count` halves of `words`.
std::vector<uint16_t> unpack(const std::vector<float>& words, int64_t count);

/// A 32-bit word's bits as a float and back (memcpy: no conversion).
float word_of(uint32_t bits);
/// See word_of.
uint32_t bits_of(float word);

}  // namespace dpt::ch10
