/// @file fast_casts.h
/// @brief The 16-bit casts of formats.h, a whole array at a time (provided,
/// not a hole): the same bits as the hand-rounded to_fp16/to_bf16/from_*,
/// element for element, at close to memory speed.
///
/// The hand-rounded conversions are the lesson (dpt/half.h reads as the
/// format's definition: sign, exponent, mantissa, a branch per case). Run on
/// Ψ = 203,530 floats they cost more time than 16 bits save on a 10 Gbit/s
/// link, so the compressors call these instead:
///   - bf16 and the decodes: the same rounding written branch-free
///     (add 0x7fff plus the kept lsb, shift; selects for NaN and subnormals),
///     loops a compiler turns into vector code;
///   - fp16's encode: F16C's vcvtps2ph where the CPU has it (checked at run
///     time, so a binary built elsewhere still runs), then NaN made the
///     lesson's quiet NaN; otherwise the branch-free loop.
/// Not used, because they are not the lesson's bits: AVX512-BF16's
/// vcvtneps2bf16 flushes subnormal inputs to zero (0x00018000 gives 0x0000,
/// the lesson 0x0002), and F16C's vcvtph2ps quiets a signalling NaN (0x7c01
/// gives 0x7fc02000, the lesson's from_fp16 0x7f802000).
///
/// tests/test_ch10_fast.cpp checks every path against the lesson's code on
/// every fp16/bf16 pattern and on millions of floats (ties, subnormals,
/// overflow, inf, NaN).
#pragma once

#include <cstdint>

namespace dpt::ch10 {

/// Which code converts to fp16: the branch-free loop, or F16C (x86-64 only).
enum class Fp16Path { Portable, F16C };

/// The fastest fp16 path this CPU runs: F16C when it has it.
Fp16Path best_fp16_path();
/// "F16C" or "portable (no F16C)".
const char* fp16_path_name(Fp16Path path);

/// h[i] = to_fp16(x[i]) for i < n. `path` F16C on a CPU without it throws dpt::Error.
void to_fp16_many(const float* x, uint16_t* h, int64_t n, Fp16Path path = best_fp16_path());
/// x[i] = from_fp16(h[i]) for i < n.
void from_fp16_many(const uint16_t* h, float* x, int64_t n);
/// h[i] = to_bf16(x[i]) for i < n.
void to_bf16_many(const float* x, uint16_t* h, int64_t n);
/// x[i] = from_bf16(h[i]) for i < n.
void from_bf16_many(const uint16_t* h, float* x, int64_t n);

}  // namespace dpt::ch10
