// cuda_transformer.cuh — the GPU kernels of a transformer's loops (kernels.h,
// "a transformer's loops"), and the plans that launch them: the embedding and
// its backward, layer norm, GELU, the (causal) row softmax, the head swap and
// the column copy. cuda_launches.cuh's LaunchedKernels calls the plans, so the
// GPU and the CPU emulator (tests/support/cuda_emulator.h) run the same grids.
//
// Two shapes of kernel:
// - elementwise (embedding, GELU, swap, column copy, the embedding backward's
//   (token, column) pairs): one thread per output element, grid-stride, at
//   most kElementwiseBlocks blocks;
// - one block per row (layer norm, softmax, their backwards): the block's
//   threads stride over the row's columns, meet in shared-memory trees for the
//   row's sums and maxima, then write the row; at most kRowBlocks blocks, which
//   then stride over the rows. A tree sums in another order than the CPU's
//   loop: rows agree to summation order, not bit for bit.
//
// No atomics anywhere: the embedding backward adds a token's rows in the order
// of their positions (a stable sort by token, made on the host, where the
// tokens are), so every call gives the same bits.
//
// Left out: warp shuffles, vector loads, fusing layer norm into the GEMM that
// follows it. A row softmax of 64 columns leaves most of its 256 threads idle.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda_elementwise.cuh"
#include "cuda_reductions.cuh"
#include "dpt/kernel_math.h"

namespace dpt::cuda {
inline namespace DPT_CUDA_BUILD {

/// Most blocks a one-block-per-row kernel gets (an H100 holds ~1056 blocks of
/// 256 threads at once); past it, blocks stride over rows.
constexpr int kRowBlocks = 1024;

// ----------------------------------------------------------------------------
// a block's reduction over one row, callable again and again in one kernel

// Every thread's `value` combined (a fixed tree: same bits on every call); the
// result is valid in every thread. Unlike block_reduce it ends with a barrier,
// so the next call's writes wait until every thread has read this result.
template <typename Combine>
__device__ float row_reduce(float value, Combine combine) {
  __shared__ float shared[kThreads];
  shared[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] = combine(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  float total = shared[0];
  __syncthreads();
  return total;
}
struct Max {
  __device__ float operator()(float a, float b) const { return a < b ? b : a; }
};

// ----------------------------------------------------------------------------
// elementwise kernels

// out (n, cols): row i = table's row tokens[i] (tokens in the GPU's memory).
__global__ void embedding_kernel(float* out, const float* table, const int64_t* tokens, int64_t n, int64_t cols) {
  for (int64_t i = first_index(); i < n * cols; i += grid_stride()) out[i] = table[tokens[i / cols] * cols + i % cols];
}

// dtable (·, cols) += the rows of dout of each token, one thread per (token,
// column). `order` (n) lists the positions sorted by token, stable; token s's
// positions are order[starts[s] .. starts[s + 1]), its row tokens_of[s].
__global__ void embedding_backward_kernel(float* dtable, const float* dout, const int64_t* order,
                                          const int64_t* starts, const int64_t* tokens_of, int64_t segments,
                                          int64_t cols) {
  for (int64_t i = first_index(); i < segments * cols; i += grid_stride()) {
    int64_t s = i / cols, c = i % cols;
    float acc = dtable[tokens_of[s] * cols + c];
    for (int64_t k = starts[s]; k < starts[s + 1]; ++k) acc += dout[order[k] * cols + c];
    dtable[tokens_of[s] * cols + c] = acc;
  }
}

__global__ void gelu_kernel(float* out, const float* x, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = math::gelu(x[i]);
}
__global__ void gelu_backward_kernel(float* dx, const float* x, const float* dout, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dx[i] = math::gelu_backward(x[i], dout[i]);
}

// out (a, c, b, d) = x (a, b, c, d) with axes 1 and 2 swapped; i runs over
// out, so the writes are coalesced and so are the reads (d at a time).
__global__ void swap_axes_12_kernel(float* out, const float* x, int64_t a, int64_t b, int64_t c, int64_t d) {
  for (int64_t i = first_index(); i < a * b * c * d; i += grid_stride()) {
    int64_t id = i % d, ib = (i / d) % b, ic = (i / (d * b)) % c, ia = i / (d * b * c);
    out[i] = x[((ia * b + ib) * c + ic) * d + id];
  }
}

// out[r·out_stride + j] = x[r·x_stride + j] for r < rows, j < cols.
__global__ void copy_columns_kernel(float* out, int64_t out_stride, const float* x, int64_t x_stride, int64_t rows,
                                    int64_t cols) {
  for (int64_t i = first_index(); i < rows * cols; i += grid_stride())
    out[(i / cols) * out_stride + i % cols] = x[(i / cols) * x_stride + i % cols];
}

// ----------------------------------------------------------------------------
// one block per row

// out (rows, cols) = (x − μ)·rstd·weight + bias per row; mean, rstd (rows).
__global__ void layer_norm_kernel(float* out, float* mean, float* rstd, const float* x, const float* weight,
                                  const float* bias, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = x + r * cols;
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += row[j];
    float mu = row_reduce(sum, Add{}) / float(cols);
    float squares = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) squares += (row[j] - mu) * (row[j] - mu);
    float s = 1.0f / ::sqrtf(row_reduce(squares, Add{}) / float(cols) + eps);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[r * cols + j] = (row[j] - mu) * s * weight[j] + bias[j];
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = s;
    }
  }
}

// dx (rows, cols) = rstd·(g − mean(g) − x̂·mean(g·x̂)) per row, g = dout·weight,
// x̂ = (x − mean)·rstd.
__global__ void layer_norm_backward_kernel(float* dx, const float* dout, const float* x, const float* mean,
                                           const float* rstd, const float* weight, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *row = x + r * cols, *drow = dout + r * cols;
    const float mu = mean[r], s = rstd[r];
    float g_sum = 0.0f, gx_sum = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float g = drow[j] * weight[j];
      g_sum += g;
      gx_sum += g * (row[j] - mu) * s;
    }
    float g_mean = row_reduce(g_sum, Add{}) / float(cols);
    float gx_mean = row_reduce(gx_sum, Add{}) / float(cols);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      dx[r * cols + j] = s * (drow[j] * weight[j] - g_mean - (row[j] - mu) * s * gx_mean);
  }
}

// The first pass of dweight[c] = Σ_r dout[r, c]·x̂[r, c]: column_sums_kernel's
// tiles, lanes and fixed tree (cuda_elementwise.cuh's finish_column_tile),
// each term made on the fly.
__global__ void layer_norm_weight_sums_kernel(float* out, const float* dout, const float* x, const float* mean,
                                              const float* rstd, int64_t rows, int64_t cols,
                                              int64_t rows_per_chunk) {
  int64_t c = int64_t(blockIdx.x) * kColumnTile + threadIdx.x;
  int64_t first = int64_t(blockIdx.y) * rows_per_chunk;
  int64_t end = rows - first < rows_per_chunk ? rows : first + rows_per_chunk;
  float acc = 0.0f;
  if (c < cols)
    for (int64_t r = first + threadIdx.y; r < end; r += kRowLanes)
      acc += dout[r * cols + c] * ((x[r * cols + c] - mean[r]) * rstd[r]);
  finish_column_tile(out, acc, c, cols);
}

// out (rows, cols) = softmax of each row of x; with period T > 0, row r sees
// columns j ≤ r mod T and the rest are written 0.
__global__ void softmax_kernel(float* out, const float* x, int64_t rows, int64_t cols, int64_t period) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = x + r * cols;
    const int64_t seen = period > 0 && r % period + 1 < cols ? r % period + 1 : cols;
    float top = -INFINITY;
    for (int64_t j = threadIdx.x; j < seen; j += blockDim.x) top = Max{}(top, row[j]);
    top = row_reduce(top, Max{});
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < seen; j += blockDim.x) sum += ::expf(row[j] - top);
    float total = row_reduce(sum, Add{});
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      out[r * cols + j] = j < seen ? ::expf(row[j] - top) / total : 0.0f;
  }
}

// dx (rows, cols) = y ⊙ (dy − Σ_row y ⊙ dy).
__global__ void softmax_backward_kernel(float* dx, const float* y, const float* dy, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *yr = y + r * cols, *dyr = dy + r * cols;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dot += yr[j] * dyr[j];
    dot = row_reduce(dot, Add{});
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dx[r * cols + j] = yr[j] * (dyr[j] - dot);
  }
}

// ----------------------------------------------------------------------------
// the plans

/// kernel over rows, one block of kThreads each, at most kRowBlocks blocks;
/// nothing for rows ≤ 0 or cols ≤ 0.
template <typename Launch, typename... Params, typename... Args>
void launch_rows(Launch& launch, void (*kernel)(Params...), int64_t rows, int64_t cols, Args... args) {
  if (rows <= 0 || cols <= 0) return;
  launch(kernel, dim3(unsigned(std::min<int64_t>(rows, kRowBlocks))), dim3(kThreads), args...);
}

/// The embedding backward's schedule, for the host to upload as one int64
/// array: [order (n) | starts (segments + 1) | tokens_of (segments)], the
/// positions sorted by token (stable: each token's in increasing i), where
/// each token's run starts, and its row. segments = distinct tokens.
inline std::vector<int64_t> embedding_schedule(const int64_t* tokens, int64_t n, int64_t& segments) {
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[std::size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return tokens[a] < tokens[b]; });
  std::vector<int64_t> starts, tokens_of;
  for (int64_t k = 0; k < n; ++k)
    if (k == 0 || tokens[order[std::size_t(k)]] != tokens[order[std::size_t(k - 1)]]) {
      starts.push_back(k);
      tokens_of.push_back(tokens[order[std::size_t(k)]]);
    }
  starts.push_back(n);
  segments = int64_t(tokens_of.size());
  order.insert(order.end(), starts.begin(), starts.end());
  order.insert(order.end(), tokens_of.begin(), tokens_of.end());
  return order;
}

/// dweight[c] = Σ_r dout[r, c]·x̂[r, c]: launch_column_sums' two passes (its
/// chunks, so its order), the first making the terms. `partials` holds
/// column_sum_partials(rows, cols) floats. cols ≥ 1; rows = 0 writes zeros.
template <typename Launch>
void launch_layer_norm_weight_sums(Launch& launch, float* dweight, const float* dout, const float* x,
                                   const float* mean, const float* rstd, int64_t rows, int64_t cols,
                                   float* partials) {
  launch_column_sums_of(launch, layer_norm_weight_sums_kernel, dweight, rows, cols, partials, dout, x, mean, rstd);
}

}  // namespace DPT_CUDA_BUILD
}  // namespace dpt::cuda
