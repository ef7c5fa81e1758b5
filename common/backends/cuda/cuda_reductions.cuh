// cuda_reductions.cuh — the GPU kernels that turn many numbers into few:
// block reductions (sum, Σx², NaN-aware max |a − b|), softmax-cross-entropy
// (one thread per row, the CPU's double math), correct-row counts. Device
// code only: cuda_launches.cuh plans the launches, cuda_kernels.cu owns the
// streams and the scratch memory, and the tests run this file on the CPU
// emulator (tests/support/cuda_emulator.h).
//
// Every reduction is two launches on one stream: `blocks` blocks each reduce
// a grid-stride share of the input to one partial (partials[block]), then one
// block reduces the partials to the result. The order differs from the CPU's
// (a tree, not Eigen's lanes), so sums agree to rounding, not bit for bit;
// max |a − b| and counts agree exactly.
//
// Left out: warp shuffles, atomics, one-pass reductions. Plain shared-memory
// trees, as in every CUDA course.
#pragma once

#include <cstdint>

#include "dpt/kernel_math.h"

// The inline namespace of every kernel header here: `nvcc` under nvcc, and
// `emulated` where tests/support/cuda_emulator.h compiles them as C++. Names
// are dpt::cuda::… either way, but the two builds never share a symbol in a
// program that links both.
#ifndef DPT_CUDA_BUILD
#define DPT_CUDA_BUILD nvcc
#endif

namespace dpt::cuda {
inline namespace DPT_CUDA_BUILD {

/// Threads per block in every launch; a power of two (the trees halve it).
constexpr int kThreads = 256;
/// Most blocks a reduction's first pass uses: the partials then fit one block's
/// grid-stride loop and the scratch (kMaxPartials × 8 bytes) never grows.
constexpr int kMaxPartials = 1024;

__device__ inline int64_t first_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_stride() { return int64_t(gridDim.x) * blockDim.x; }

// ----------------------------------------------------------------------------
// combining two partial results

struct Add {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct NanAwareMax {
  __device__ float operator()(float a, float b) const { return math::nan_aware_max(a, b); }
};

// Every thread's `value` combined; the result is valid in every thread.
// Called once per kernel (it owns the block's shared array).
template <typename T, typename Combine>
__device__ T block_reduce(T value, Combine combine) {
  __shared__ T shared[kThreads];
  shared[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] = combine(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  return shared[0];
}

// ----------------------------------------------------------------------------
// what each element contributes

struct LoadValue {  // x[i]
  const float* x;
  __device__ float operator()(int64_t i) const { return x[i]; }
};
struct LoadSquare {  // x[i]²
  const float* x;
  __device__ float operator()(int64_t i) const { return x[i] * x[i]; }
};
struct LoadAbsDiff {  // |a[i] − b[i]|
  const float* a;
  const float* b;
  __device__ float operator()(int64_t i) const { return math::abs_diff(a[i], b[i]); }
};

// ----------------------------------------------------------------------------
// kernels

// partials[block] = combine over this block's share of load(0 .. n). 0 is the
// identity of both Add and NanAwareMax-of-absolute-values.
template <typename Load, typename Combine>
__global__ void reduce_kernel(Load load, Combine combine, int64_t n, float* partials) {
  float acc = 0.0f;
  for (int64_t i = first_index(); i < n; i += grid_stride()) acc = combine(acc, load(i));
  float total = block_reduce(acc, combine);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// *out = combine over partials[0 .. count); one block.
template <typename T, typename Combine>
__global__ void finish_kernel(const T* partials, int count, Combine combine, T* out) {
  T acc = T(0);
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc = combine(acc, partials[i]);
  T total = block_reduce(acc, combine);
  if (threadIdx.x == 0) *out = total;
}

// Softmax-cross-entropy, one thread per row: probs (rows, classes) written,
// partials[block] = Σ of the block's rows' −log p[label], in double.
__global__ void softmax_cross_entropy_kernel(float* probs, const float* logits, const int64_t* labels,
                                             int64_t rows, int64_t classes, double* partials) {
  double acc = 0.0;
  for (int64_t r = first_index(); r < rows; r += grid_stride())
    acc += math::softmax_cross_entropy_row(probs + r * classes, logits + r * classes, classes, labels[r]);
  double total = block_reduce(acc, Add{});
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// *loss = (Σ partials) / rows, rounded to float once at the end, as the CPU.
__global__ void softmax_cross_entropy_finish_kernel(const double* partials, int count, int64_t rows, float* loss) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  double total = block_reduce(acc, Add{});
  if (threadIdx.x == 0) *loss = float(total / double(rows));
}

// partials[block] = rows of this block's share whose first argmax is the label.
__global__ void count_correct_kernel(const float* logits, const int64_t* labels, int64_t rows, int64_t classes,
                                     unsigned long long* partials) {
  unsigned long long acc = 0;
  for (int64_t r = first_index(); r < rows; r += grid_stride())
    acc += math::row_argmax(logits + r * classes, classes) == labels[r] ? 1ull : 0ull;
  unsigned long long total = block_reduce(acc, Add{});
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

}  // namespace DPT_CUDA_BUILD
}  // namespace dpt::cuda
