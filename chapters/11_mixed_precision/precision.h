/// @file precision.h
/// @brief The two 16-bit formats of mixed-precision training: a float32
/// rounded to bf16 or fp16 is the same number a GPU would store.
///
///     bf16: 1 sign, 8 exponent, 7 mantissa bits — float32's range, 3 digits
///     fp16: 1 sign, 5 exponent, 10 mantissa bits — largest 65504, smallest
///           normal 2^-14 ≈ 6.1e-5, smallest subnormal 2^-24 ≈ 6.0e-8
///
/// Rounding is IEEE's round to nearest, ties to even. fp16 keeps subnormals
/// (values below 2^-14 lose mantissa bits, then flush to 0 below 2^-25) and
/// overflows to ±inf from 65520 up (the tie between 65504 and 2^16 goes to the
/// even side, which is infinity). NaN stays NaN (a quiet one).
///
/// Storage stays float32 (tensor.h has one dtype): a "16-bit tensor" here is a
/// float32 tensor every element of which is representable in the format.
/// Memory tables count its elements at the format's width (bytes_per_value).
/// Rounding and the overflow test run where the tensor lives (kernels.h's
/// round_half and count_inf_or_nan: a loop on the CPU, a kernel on a GPU),
/// both calling one element's math from dpt/half_math.h — so a cuda run
/// rounds exactly as a cpu run does.
///
/// Left out: fp8, stochastic rounding, denormals-are-zero modes.
#pragma once

#include <cstdint>
#include <string>

#include "dpt/half.h"
#include "dpt/tensor.h"

namespace dpt::ch11 {

/// Where a mixed-precision run stores weights, activations and gradients.
enum class Precision { FP32, BF16, FP16 };

/// "fp32", "bf16", "fp16".
const char* precision_name(Precision p);
/// Parses "fp32" | "bf16" | "fp16"; throws dpt::Error naming the choices otherwise.
Precision parse_precision(const std::string& text);
/// Bytes of one stored value: 4, 2, 2.
int bytes_per_value(Precision p);
/// The smallest positive normal value: 2^-126 (fp32, bf16), 2^-14 (fp16).
float smallest_normal(Precision p);

/// float32 → bf16 bits (round to nearest even; NaN → quiet NaN): dpt/half.h's.
inline uint16_t bf16_bits(float x) { return to_bf16(x); }
/// bf16 bits → the float32 they mean (exact).
inline float from_bf16_bits(uint16_t bits) { return from_bf16(bits); }
/// float32 → fp16 bits (round to nearest even, subnormals, ±inf from 65520): dpt/half.h's.
inline uint16_t fp16_bits(float x) { return to_fp16(x); }
/// fp16 bits → the float32 they mean (exact: every fp16 is a float32).
inline float from_fp16_bits(uint16_t bits) { return from_fp16(bits); }

/// The 16-bit format of a 16-bit precision (dpt/half.h's Half; p is not FP32).
Half half_format(Precision p);
/// x rounded to the format, as a float32 (identity for FP32): dpt/half.h's
/// round_to(format, x), with the precision first as there.
float round_to(Precision p, float x);
/// What roundings met: entries non-zero before, and how many of them the
/// format flushed to 0 (underflow).
struct Flushes {
  int64_t nonzero = 0;  ///< entries that were not 0 before rounding
  int64_t flushed = 0;  ///< of those, entries that were 0 after
  int64_t tiny = 0;     ///< of those, entries below the format's smallest normal after (0 or subnormal: bits lost)
  /// flushed / nonzero (0 when nothing was counted).
  double fraction() const { return nonzero ? double(flushed) / double(nonzero) : 0.0; }
  /// tiny / nonzero (0 when nothing was counted).
  double tiny_fraction() const { return nonzero ? double(tiny) / double(nonzero) : 0.0; }
};

/// Rounds every element of `t` to the format, in place (`t` is a handle: the
/// caller's tensor changes, `round_(w.grad(), p)` included); adds what it met
/// to `*count` when given (on a GPU that waits for the counts).
void round_(Tensor t, Precision p, Flushes* count = nullptr);

/// Differentiable: x rounded to the format — where a 16-bit run stores an
/// activation. Its backward rounds the incoming gradient to the format too:
/// the gradient of a stored activation is stored in 16 bits as well (where
/// fp16's small gradients underflow to 0), counted in `*gradient_flushes`
/// when given (it must outlive backward). Identity both ways for FP32.
Tensor store(const Tensor& x, Precision p, Flushes* gradient_flushes = nullptr);

/// True when any element of `t` is ±inf or NaN (on a GPU: counted there, waits).
bool has_inf_or_nan(const Tensor& t);

}  // namespace dpt::ch11
