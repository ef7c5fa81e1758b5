/// @file formats.h
/// @brief 16-bit floats on the wire (provided, not a hole): IEEE fp16 and
/// bfloat16 (dpt/half.h converts them by hand, round-to-nearest-even).
///
/// Two 16-bit values travel in one 32-bit word (pack/unpack): the
/// communicator counts float32 words, so 2 bytes per value on the wire.
/// Left out: fp8, stochastic rounding, signalling NaNs (every NaN becomes quiet).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/half.h"

namespace dpt::ch10 {

// The formats and conversions are the core's (dpt/half.h), named here as
// chapter 10 always has: Half::FP16 / Half::BF16, to_half(format, x),
// from_half(format, h), round_to(format, x) (x rounded to the format and
// back: what x becomes on a 16-bit wire), to_fp16 … from_bf16.
using dpt::from_bf16;
using dpt::from_fp16;
using dpt::from_half;
using dpt::Half;
using dpt::round_to;
using dpt::to_bf16;
using dpt::to_fp16;
using dpt::to_half;

/// 16-bit values two to a 32-bit word (the second in the high half); an odd
/// count leaves the last word's high half 0. Result: (ceil(n/2),) words.
std::vector<float> pack(const std::vector<uint16_t>& halves);
/// The inverse of pack: the first `count` halves of `words`.
std::vector<uint16_t> unpack(const std::vector<float>& words, int64_t count);

using dpt::bits_of;
using dpt::word_of;

}  // namespace dpt::ch10
