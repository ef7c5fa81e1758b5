// cuda_half.cu — dpt/gpu_half.h on a GPU: cublasGemmEx with bf16/fp16
// operands and CUBLAS_COMPUTE_32F (tensor cores), and cuda_half.cuh's kernels
// launched on the calling thread's current stream. The counts (round_floats,
// count_inf_or_nan) sum in stream-ordered scratch and copy 8 or 24 bytes back.
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
#include "dpt/floats.h"
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

// `count` values of T in stream-ordered scratch on the current stream of
// `device` (dpt::Floats: given back in that stream's order).
template <typename T>
struct Scratch {
  Floats floats;
  T* ptr;
  Scratch(int device, int64_t count)
      : floats(device, int64_t((std::size_t(count) * sizeof(T) + sizeof(float) - 1) / sizeof(float))),
        ptr(reinterpret_cast<T*>(floats.data())) {}
};

// The result of a count the stream is computing, once it is there: copied
// back into `host` and waited for.
template <typename T>
void read_back(T& host, const T* on_device, cudaStream_t stream) {
  DPT_CUDA_CHECK(cudaMemcpyAsync(&host, on_device, sizeof(T), cudaMemcpyDeviceToHost, stream));
  DPT_CUDA_CHECK(cudaStreamSynchronize(stream));
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

void round_floats(float* x, int64_t n, Half format, int device, math::RoundingCounts* counts) {
  if (n <= 0) return;
  cudaStream_t stream = current(device);
  StreamLaunch launch{stream};
  const bool bf16 = format == Half::BF16;
  if (counts == nullptr) return launch_round_floats(launch, x, n, bf16, nullptr, nullptr);
  const unsigned blocks = count_blocks(n);  // partials, then the sum
  Scratch<math::RoundingCounts> scratch(device, blocks + 1);
  math::RoundingCounts* partials = scratch.ptr;
  launch_round_floats(launch, x, n, bf16, partials, partials + blocks);
  math::RoundingCounts met{};
  read_back(met, partials + blocks, stream);
  *counts = *counts + met;
}

int64_t count_inf_or_nan(const float* x, int64_t n, int device) {
  if (n <= 0) return 0;
  cudaStream_t stream = current(device);
  StreamLaunch launch{stream};
  const unsigned blocks = count_blocks(n);
  Scratch<unsigned long long> scratch(device, blocks + 1);
  unsigned long long* partials = scratch.ptr;
  launch_count_inf_or_nan(launch, x, n, partials, partials + blocks);
  unsigned long long found = 0;
  read_back(found, partials + blocks, stream);
  return int64_t(found);
}

}  // namespace dpt::gpu
