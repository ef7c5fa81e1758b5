// cuda_batch_norm.cuh — the GPU kernels of batch normalization (kernels.h,
// "batch normalization"), and the plans that launch them: the per-column
// moments, the normalize-and-affine forward, the running statistics, the
// backward's two column sums and dx, evaluation. cuda_launches.cuh's
// LaunchedKernels calls the plans, so the GPU and the CPU emulator
// (tests/support/cuda_emulator.h) run the same grids. x is (rows, cols), one
// sample a row, statistics per column.
//
// Two shapes of kernel:
// - column sums (the moments, Σ dy and Σ dy·x̂): sum_rows' blocks of 32
//   columns × 8 row lanes and its row chunks (cuda_elementwise.cuh's
//   launch_column_sums_of), the terms made on the fly; no atomics, so every
//   call gives the same bits;
// - elementwise (the normalize, dx, evaluation, and the per-column scale and
//   running update): one thread per element, grid-stride; the per-element
//   math is kernel_math.h's, which the CPU loops run too.
//
// The moments are the mean, then M2 = Σ (x − mean)², each a column sum: two
// passes over x, not one pass of Σx and Σx². In float, Σx²/N − mean² cancels
// when |mean| ≫ std (a Linear's outputs with a bias of 100 and a spread of
// 0.1 keep ~6e-4 of error on a variance of 1e-2: all of it), while M2 adds
// non-negative terms: its error is the sum's own rounding, γ(N)·M2, plus
// N·δ² for an error δ in the mean (the first-order term Σ(x − mean)·δ is 0).
// The price is reading x twice; a batch is small. Welford's one-pass update
// would read it once, at a division per row and a longer merge of lanes.
//
// Left out: fusing the statistics into the GEMM before, or the normalize into
// the ReLU after; warp shuffles; 3-D inputs (BatchNorm2d's N·H·W rows).
#pragma once

#include <cstdint>

#include "cuda_elementwise.cuh"
#include "dpt/kernel_math.h"

namespace dpt::cuda {
inline namespace DPT_CUDA_BUILD {

// ----------------------------------------------------------------------------
// column sums: the first passes of launch_column_sums_of, one term each

// out (gridDim.y, cols): chunk sums of (x[r, c] − mean[c])², x (rows, cols).
__global__ void batch_norm_square_sums_kernel(float* out, const float* x, const float* mean, int64_t rows,
                                              int64_t cols, int64_t rows_per_chunk) {
  int64_t c = int64_t(blockIdx.x) * kColumnTile + threadIdx.x;
  int64_t first = int64_t(blockIdx.y) * rows_per_chunk;
  int64_t end = rows - first < rows_per_chunk ? rows : first + rows_per_chunk;
  float acc = 0.0f;
  if (c < cols) {
    const float mu = mean[c];
    for (int64_t r = first + threadIdx.y; r < end; r += kRowLanes) {
      float d = x[r * cols + c] - mu;
      acc += d * d;
    }
  }
  finish_column_tile(out, acc, c, cols);
}

// out (gridDim.y, cols): chunk sums of dy[r, c]·xhat[r, c].
__global__ void batch_norm_dy_xhat_sums_kernel(float* out, const float* dy, const float* xhat, int64_t rows,
                                               int64_t cols, int64_t rows_per_chunk) {
  int64_t c = int64_t(blockIdx.x) * kColumnTile + threadIdx.x;
  int64_t first = int64_t(blockIdx.y) * rows_per_chunk;
  int64_t end = rows - first < rows_per_chunk ? rows : first + rows_per_chunk;
  float acc = 0.0f;
  if (c < cols)
    for (int64_t r = first + threadIdx.y; r < end; r += kRowLanes) acc += dy[r * cols + c] * xhat[r * cols + c];
  finish_column_tile(out, acc, c, cols);
}

// ----------------------------------------------------------------------------
// elementwise: per column (cols threads) or per element (rows·cols threads)

// inv_std (cols) = 1/√(var + eps).
__global__ void batch_norm_inv_std_kernel(float* inv_std, const float* var, float eps, int64_t cols) {
  for (int64_t c = first_index(); c < cols; c += grid_stride()) inv_std[c] = math::batch_norm_inv_std(var[c], eps);
}

// xhat = (x − mean)·inv_std, y = xhat·weight + bias, (rows, cols).
__global__ void batch_norm_kernel(float* y, float* xhat, const float* x, const float* mean, const float* inv_std,
                                  const float* weight, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t i = first_index(); i < rows * cols; i += grid_stride()) {
    int64_t c = i % cols;
    float n = (x[i] - mean[c]) * inv_std[c];
    xhat[i] = n;
    y[i] = n * weight[c] + bias[c];
  }
}

// running_mean, running_var (cols) ← running_average with mean and var·unbias.
__global__ void batch_norm_running_kernel(float* running_mean, float* running_var, const float* mean,
                                          const float* var, float momentum, float unbias, int64_t cols) {
  for (int64_t c = first_index(); c < cols; c += grid_stride()) {
    running_mean[c] = math::running_average(running_mean[c], mean[c], momentum);
    running_var[c] = math::running_average(running_var[c], var[c] * unbias, momentum);
  }
}

// dx (rows, cols) = batch_norm_dx per element, the column sums over `count` rows.
__global__ void batch_norm_backward_kernel(float* dx, const float* dy, const float* xhat, const float* inv_std,
                                           const float* weight, const float* sum_dy, const float* sum_dy_xhat,
                                           float count, int64_t rows, int64_t cols) {
  for (int64_t i = first_index(); i < rows * cols; i += grid_stride()) {
    int64_t c = i % cols;
    dx[i] = math::batch_norm_dx(dy[i], xhat[i], weight[c], inv_std[c], sum_dy[c], sum_dy_xhat[c], count);
  }
}

// Evaluation: y = (x − mean)·batch_norm_inv_std(var, eps)·weight + bias.
__global__ void batch_norm_inference_kernel(float* y, const float* x, const float* mean, const float* var,
                                            const float* weight, const float* bias, int64_t rows, int64_t cols,
                                            float eps) {
  for (int64_t i = first_index(); i < rows * cols; i += grid_stride()) {
    int64_t c = i % cols;
    y[i] = (x[i] - mean[c]) * math::batch_norm_inv_std(var[c], eps) * weight[c] + bias[c];
  }
}

// ----------------------------------------------------------------------------
// the plans (`partials`: column_sum_partials(rows, cols) floats; the caller
// checks that column_tiles(cols) fits a grid)

/// kernel over cols, one thread a column, in the column sums' tiles:
/// column_tiles(cols) blocks of kColumnTile threads. cols ≥ 1.
template <typename Launch, typename... Params, typename... Args>
void launch_columns(Launch& launch, void (*kernel)(Params...), int64_t cols, Args... args) {
  launch(kernel, dim3(unsigned(column_tiles(cols))), dim3(kColumnTile), args...);
}

/// mean = Σ x / rows; var = Σ (x − mean)² / rows: each a column sum, then a
/// division of its cols results. rows ≥ 1, cols ≥ 1.
template <typename Launch>
void launch_batch_moments(Launch& launch, float* mean, float* var, const float* x, int64_t rows, int64_t cols,
                          float* partials) {
  launch_column_sums_of(launch, column_sums_kernel, mean, rows, cols, partials, x);
  launch_columns(launch, divide_kernel, cols, mean, float(rows), cols);
  launch_column_sums_of(launch, batch_norm_square_sums_kernel, var, rows, cols, partials, x,
                        static_cast<const float*>(mean));
  launch_columns(launch, divide_kernel, cols, var, float(rows), cols);
}

/// sum_dy = Σ dy and sum_dy_xhat = Σ dy·xhat per column, one after the other
/// through the same partials (one stream: the second waits for the first).
/// cols ≥ 1; rows = 0 writes zeros.
template <typename Launch>
void launch_batch_norm_gradient_sums(Launch& launch, float* sum_dy, float* sum_dy_xhat, const float* dy,
                                     const float* xhat, int64_t rows, int64_t cols, float* partials) {
  launch_column_sums_of(launch, column_sums_kernel, sum_dy, rows, cols, partials, dy);
  launch_column_sums_of(launch, batch_norm_dy_xhat_sums_kernel, sum_dy_xhat, rows, cols, partials, dy, xhat);
}

}  // namespace DPT_CUDA_BUILD
}  // namespace dpt::cuda
