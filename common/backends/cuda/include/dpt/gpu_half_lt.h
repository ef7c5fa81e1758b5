/// @file gpu_half_lt.h
/// @brief A 16-bit GEMM with a Linear layer's elementwise work fused into it
/// (cuBLASLt's epilogues): the bias, bias + ReLU keeping ReLU's mask as bits,
/// ReLU's backward from that mask, the bias gradient. The arithmetic is
/// gemm_half's (gpu_half.h: 16-bit operands, fp32 sums, row-major); what
/// changes is that the result is rounded once, after the epilogue, and that
/// no separate pass reads it again.
///
/// An LtGemm is planned once, with its pointers (cuBLASLt picks its algorithm
/// by their alignment), and queued by run() on the calling thread's current
/// stream, so a CUDA graph can capture it:
///
///     dpt::gpu::LtGemm fc1(0, Half::BF16, false, true, B, out, in, dpt::gpu::Epilogue::BiasRelu,
///                          {x16, w16, y16, nullptr, b16, nullptr, mask});
///     fc1.run();  // y16 = relu(x16·w16ᵀ + b16), mask bit (i, j) = y (i, j) > 0
///
/// The constructor throws dpt::Error with a sentence naming the cuBLASLt call
/// and its status when cuBLASLt refuses the plan (no algorithm for this
/// epilogue, types or alignment): a caller can fall back to gemm_half and the
/// kernels. Left out: alpha, beta (1 and 0), GELU, batched GEMMs. Built
/// without CUDA, the constructor says so in a sentence.
#pragma once

#include <cstdint>
#include <memory>

#include "dpt/gpu_half.h"

namespace dpt::gpu {

/// What the GEMM c (m, n) = op(a)·op(b) does before c is written, in dpt's
/// row-major terms (the cuBLASLt epilogue each is, in brackets).
enum class Epilogue {
  Bias,          ///< c += bias, one entry per column of c (n)                   [BIAS]
  BiasRelu,      ///< c = max(c + bias, 0); relu_mask bit (i, j) = c (i, j) > 0   [RELU_AUX_BIAS]
  ReluBackward,  ///< c = 0 where relu_mask bit (i, j) is clear                   [DRELU]
  BiasGradient,  ///< bias_grad (m) = Σ_p op(a) (i, p), the rows of op(a) summed  [BGRADB]
};

/// "bias", "bias+relu", "relu backward" or "bias gradient".
inline const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::Bias: return "bias";
    case Epilogue::BiasRelu: return "bias+relu";
    case Epilogue::ReluBackward: return "relu backward";
    case Epilogue::BiasGradient: return "bias gradient";
  }
  return "?";
}

/// Bits a ReLU mask keeps per row of c (m, n): n rounded up to 128 (cuBLASLt
/// wants the mask's leading dimension a multiple of 128 bits).
inline int64_t relu_mask_row_bits(int64_t n) { return (n + 127) / 128 * 128; }
/// Bytes of the ReLU mask of c (m, n): a multiple of 16.
inline int64_t relu_mask_bytes(int64_t m, int64_t n) { return m * relu_mask_row_bits(n) / 8; }

/// The GPU memory an LtGemm reads and writes, all on its device. a and b are
/// 16-bit in its format, shaped as gemm_half's (op(a) (m, k), op(b) (k, n)).
/// c is exactly one of c16 (16-bit, the format) and c32 (float32). bias (n,
/// c's type: 16-bit patterns or floats) for Bias and BiasRelu; bias_grad (m,
/// c's type) for BiasGradient; relu_mask (relu_mask_bytes(m, n)) written by
/// BiasRelu, read by ReluBackward. bias, bias_grad and relu_mask 16-byte aligned.
struct LtOperands {
  const uint16_t* a = nullptr;  ///< op(a) (m, k): a stored (m, k), or (k, m) when transpose_a
  const uint16_t* b = nullptr;  ///< op(b) (k, n): b stored (k, n), or (n, k) when transpose_b
  uint16_t* c16 = nullptr;      ///< c (m, n) in 16 bits, or null when c32 is given
  float* c32 = nullptr;         ///< c (m, n) in float32, or null when c16 is given
  const void* bias = nullptr;   ///< Bias, BiasRelu: n values of c's type, added to every row
  void* bias_grad = nullptr;    ///< BiasGradient: m values of c's type, written
  void* relu_mask = nullptr;    ///< BiasRelu writes it, ReluBackward reads it: relu_mask_bytes(m, n)
};

/// One planned cuBLASLt GEMM c = op(a)·op(b) with `epilogue`, sums in fp32
/// (no split-K partial sums in 16 bits). Needs m, n, k ≥ 1.
class LtGemm {
 public:
  /// Plans c = op(a)·op(b) with `epilogue` on GPU `device`, for exactly these
  /// pointers. Throws dpt::Error, in a sentence naming the cuBLASLt call and
  /// its status, when cuBLASLt refuses the plan or the operands break the
  /// contract (LtOperands); nothing is queued then.
  LtGemm(int device, Half format, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
         Epilogue epilogue, const LtOperands& operands);
  /// Frees the plan's handle, descriptors and workspace (destroy a CUDA graph
  /// that captured run() first).
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  /// Queues the GEMM on the calling thread's current stream of the device.
  void run() const;

  /// The cuBLASLt handle, descriptors, algorithm and workspace (defined by
  /// the backend: cuda_half_lt.cpp, or none/gpu_half_lt.cpp without CUDA).
  struct Plan;

 private:
  std::unique_ptr<Plan> plan_;
};

}  // namespace dpt::gpu
