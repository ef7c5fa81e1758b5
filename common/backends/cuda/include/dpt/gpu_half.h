/// @file gpu_half.h
/// @brief 16-bit math on a GPU: bf16 or fp16 storage, fp32 sums. The GEMMs
/// run on tensor cores (cuBLAS, CUBLAS_COMPUTE_32F); the conversions round as
/// dpt/half.h does on the CPU (to nearest, ties to even), bit for bit.
///
/// A 16-bit array is `uint16_t` bit patterns in GPU memory (tensor.h has one
/// dtype, float32): the caller allocates it (gpu::allocate) and says which
/// format it holds. Everything is queued on the calling thread's current
/// stream of `device` (gpu.h) and returns at once, so a CUDA graph can
/// capture it. Row-major throughout, as kernels.h's gemm.
///
///     dpt::gpu::round_to_half(w16, w, n, dpt::Half::BF16, 0);   // fp32 → bf16
///     dpt::gpu::gemm_half(0, dpt::Half::BF16, false, true, B, out, in,
///                         1.0f, x16, w16, 0.0f, y16);           // y = x·Wᵀ
///
/// The CUDA backend's, not the core's: it lives beside cuda_half.cu, and only
/// the backend, the benchmarks and the GPU tests see it. Chapters reach 16-bit
/// math through the core's op seam (kernels.h: round_half, gemm_half,
/// count_inf_or_nan), whose CUDA side calls `round_floats`, `round_to_half`,
/// `gemm_half` and `count_inf_or_nan` here — one element's math is
/// dpt/half_math.h's, which the CPU side runs too.
///
/// Left out: fp8, bias and ReLU fused into the GEMM (cuBLASLt's epilogues:
/// gpu_half_lt.h), a CPU side (the CPU kernels' loops over half_math.h). Built without CUDA, every function says so in a sentence.
#pragma once

#include <cstdint>

#include "dpt/half.h"  // Half (the formats), half_math.h

namespace dpt::gpu {

/// out (n patterns) = x (n floats) rounded to `format`: half.h's to_bf16 /
/// to_fp16, bit for bit (ties to even, fp16 subnormals, ±inf from 65520, NaN
/// quiet). out and x in GPU `device`'s memory, not overlapping.
void round_to_half(uint16_t* out, const float* x, int64_t n, Half format, int device);

/// out (n floats) = the float32 each pattern of x stands for (exact).
void widen_half(float* out, const uint16_t* x, int64_t n, Half format, int device);

/// c (m, n) = alpha · op(a) · op(b) + beta · c with a and b 16-bit, every
/// product summed in fp32 (no reduced-precision split-K), c float32. op(a) is
/// (m, k) — a is (k, m) when `transpose_a` — and op(b) is (k, n) — b is (n, k)
/// when `transpose_b`. With beta = 0, c is only written. Needs k ≥ 1.
void gemm_half(int device, Half format, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
               float alpha, const uint16_t* a, const uint16_t* b, float beta, float* c);

/// The same with c stored in `format` too: summed in fp32, rounded once when
/// written (beta · c read from 16 bits).
void gemm_half(int device, Half format, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
               float alpha, const uint16_t* a, const uint16_t* b, float beta, uint16_t* c);

/// y (rows, cols, 16-bit) = round(y + bias) on every row, then max(·, 0) when
/// `relu`: a Linear layer's bias (fp32, cols) and activation on its 16-bit
/// output. The sum is in fp32 and rounded once.
void add_bias_relu_half(uint16_t* y, const float* bias, int64_t rows, int64_t cols, bool relu, Half format,
                        int device);

/// dy (n, 16-bit) = 0 where y ≤ 0, else unchanged: ReLU's backward, from its
/// 16-bit output y (y > 0 exactly where its input was).
void relu_backward_half(uint16_t* dy, const uint16_t* y, int64_t n, Half format, int device);

/// x (n floats in GPU `device`'s memory) rounded to `format` in place, each
/// element half_math.h's round_counting. With `counts`, what the rounding met
/// is summed on the device and added to *counts: that call waits for the
/// device (a 24-byte copy back), so it cannot be captured in a CUDA graph;
/// without, it is queued and returns at once.
void round_floats(float* x, int64_t n, Half format, int device, math::RoundingCounts* counts = nullptr);

/// How many of x (n floats in GPU `device`'s memory) are ±inf or NaN
/// (half_math.h's is_inf_or_nan), counted on the device. Waits for it.
int64_t count_inf_or_nan(const float* x, int64_t n, int device);

}  // namespace dpt::gpu
