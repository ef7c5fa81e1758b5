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
/// Left out: fp8, stochastic rounding, signalling NaNs (every NaN becomes quiet).
#pragma once

#include <cstdint>

namespace dpt {

/// x rounded to the nearest fp16 (ties to even; ±inf from 65520; NaN stays NaN).
uint16_t to_fp16(float x);
/// The float32 an fp16 bit pattern stands for (exact: every fp16 is a float32).
float from_fp16(uint16_t h);
/// x rounded to the nearest bf16 (ties to even; a carry past the largest finite is inf; NaN stays NaN).
uint16_t to_bf16(float x);
/// The float32 a bf16 bit pattern stands for (exact).
float from_bf16(uint16_t h);

/// A 32-bit word's bits as a float and back (memcpy: no conversion).
float word_of(uint32_t bits);
/// See word_of.
uint32_t bits_of(float word);

}  // namespace dpt
