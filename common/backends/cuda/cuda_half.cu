// cuda_half.cu — dpt/gpu_half.h on a GPU: cublasGemmEx with bf16/fp16
// operands and CUBLAS_COMPUTE_32F (tensor cores), and cuda_half.cuh's kernels
// launched on the calling thread's current stream.
//
// The cuBLAS handle is the thread's own (cuda_thread_state.cuh), shared with
// the fp32 GEMMs of cuda_kernels.cu; each call sets the stream and math mode
// it needs, as those do.
//
// Left out: cuBLASLt (fused bias/ReLU epilogues, algorithm choice by
// heuristics: cuda_half_lt.cpp), aligned copies of odd-offset operands
// (cuda_kernels.cu makes them so an fp32 result does not depend on where a
// view starts; here an operand off 16 bytes only costs speed).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>

#include "cuda_half.cuh"
#include "cuda_stream_launch.cuh"
#include "cuda_thread_state.cuh"
#include "dpt/check.h"
#include "dpt/gpu.h"
#include "dpt/gpu_half.h"
#include "library_check.h"

namespace dpt::gpu {

namespace {
using namespace dpt::cuda;

cudaStream_t current(int device) {
  DPT_CUDA_CHECK(cudaSetDevice(device));
  return static_cast<cudaStream_t>(current_stream(device).handle());
}

cudaDataType_t cuda_type(Half format) { return format == Half::BF16 ? CUDA_R_16BF : CUDA_R_16F; }

// Row-major c (m, n) is column-major cᵀ (n, m) = op(b)ᵀ · op(a)ᵀ: b goes first
// (as cuda_kernels.cu's gemm), each with its stored row length as leading dimension.
void gemm_ex(int device, Half format, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
             float alpha, const uint16_t* a, const uint16_t* b, float beta, void* c, cudaDataType_t c_type) {
  if (m == 0 || n == 0) return;
  DPT_CHECK(m > 0 && n > 0 && k > 0, "gemm_half on cuda:" << device << ": sizes (" << m << ", " << n << ", " << k
                                                          << ") must be positive (k = 0 is not supported)");
  DPT_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX,
            "gemm_half on cuda:" << device << ": sizes (" << m << ", " << n << ", " << k << ") exceed cuBLAS's int");
  cudaStream_t stream = current(device);
  cublasHandle_t blas = thread_blas(device);
  DPT_CUBLAS_CHECK(cublasSetStream(blas, stream));
  // Tensor cores are used for 16-bit inputs whatever the mode; forbidding
  // reduced-precision reductions keeps a split-K's partial sums in fp32 too.
  DPT_CUBLAS_CHECK(cublasSetMathMode(
      blas, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  const cudaDataType_t t = cuda_type(format);
  DPT_CUBLAS_CHECK(cublasGemmEx(blas, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k), &alpha, b, t,
                                int(transpose_b ? k : n), a, t, int(transpose_a ? m : k), &beta, c, c_type, int(n),
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
}  // namespace

const char* half_name(Half format) { return format == Half::BF16 ? "bf16" : "fp16"; }

void round_to_half(uint16_t* out, const float* x, int64_t n, Half format, int device) {
  StreamLaunch launch{current(device)};
  launch_round_to_half(launch, out, x, n, format == Half::BF16);
}

void widen_half(float* out, const uint16_t* x, int64_t n, Half format, int device) {
  StreamLaunch launch{current(device)};
  launch_half_elementwise(launch, widen_half_kernel, n, out, x, n, format == Half::BF16);
}

void gemm_half(int device, Half format, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
               float alpha, const uint16_t* a, const uint16_t* b, float beta, float* c) {
  gemm_ex(device, format, transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c, CUDA_R_32F);
}

void gemm_half(int device, Half format, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
               float alpha, const uint16_t* a, const uint16_t* b, float beta, uint16_t* c) {
  gemm_ex(device, format, transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c, cuda_type(format));
}

void add_bias_relu_half(uint16_t* y, const float* bias, int64_t rows, int64_t cols, bool relu, Half format,
                        int device) {
  StreamLaunch launch{current(device)};
  launch_bias_relu_half(launch, y, bias, rows, cols, relu, format == Half::BF16);
}

void relu_backward_half(uint16_t* dy, const uint16_t* y, int64_t n, Half format, int device) {
  StreamLaunch launch{current(device)};
  launch_relu_backward_half(launch, dy, y, n, format == Half::BF16);
}

}  // namespace dpt::gpu
