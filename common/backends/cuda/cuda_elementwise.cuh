// cuda_elementwise.cuh — the GPU kernels that visit each element once: the
// elementwise loops, the bias add, the column sums of sum_rows, the
// softmax-cross-entropy backward and the optimizer updates. Each thread's
// per-element math is kernel_math.h's, shared with the CPU loops.
//
// Device code only: which kernel runs with what grid is cuda_launches.cuh's,
// the streams and scratch memory are cuda_kernels.cu's. So the tests can
// compile this file as C++ and run it, thread by thread, on the CPU emulator
// of tests/support/cuda_emulator.h.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda_reductions.cuh"
#include "dpt/kernel_math.h"
#include "dpt/kernels.h"

namespace dpt::cuda {
inline namespace DPT_CUDA_BUILD {

// ----------------------------------------------------------------------------
// elementwise kernels: one thread per element, grid-stride, n may exceed 2^31

__global__ void axpy_kernel(float* y, float alpha, const float* x, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] += alpha * x[i];
}
__global__ void scale_kernel(float* x, float s, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] *= s;
}
__global__ void divide_kernel(float* x, float d, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] /= d;  // IEEE division (no --use_fast_math)
}
__global__ void fill_kernel(float* x, float value, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] = value;
}
__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = a[i] + b[i];
}
__global__ void sub_kernel(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = a[i] - b[i];
}
__global__ void mul_kernel(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = a[i] * b[i];
}
__global__ void scaled_copy_kernel(float* out, const float* a, float s, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = s * a[i];
}
__global__ void scale_by_scalar_kernel(float* out, const float* a, const float* scalar, float multiplier,
                                       float divisor, int64_t n) {
  float f = math::scalar_factor(*scalar, multiplier, divisor);
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = a[i] * f;
}
__global__ void fill_from_scalar_kernel(float* out, const float* scalar, float multiplier, float divisor,
                                        int64_t n) {
  float f = math::scalar_factor(*scalar, multiplier, divisor);
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = f;
}
__global__ void relu_kernel(float* out, const float* x, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = math::relu(x[i]);
}
__global__ void relu_backward_kernel(float* dx, const float* x, const float* dout, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dx[i] = math::relu_backward(x[i], dout[i]);
}

// y (rows, cols) += bias on every row; i runs over all rows·cols elements.
__global__ void add_bias_kernel(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t i = first_index(); i < rows * cols; i += grid_stride()) y[i] += bias[i % cols];
}

// Column sums (sum_rows: dbias[c] = Σ_r dy[r, c]) in blocks of 32 columns × 8
// row lanes: a warp is one lane and reads 32 neighbouring floats of a row (one
// coalesced 128-byte read). The rows are cut into `chunks` chunks, one per
// blockIdx.y, so even a 10-column matrix fills the GPU.
constexpr int kColumnTile = 32;  // columns per block (blockDim.x, a warp)
constexpr int kRowLanes = 8;     // rows a block reads at once (blockDim.y), a power of two
static_assert(kColumnTile * kRowLanes == kThreads, "a column-sum block is kThreads threads");

// The tail every column-sum block shares (sum_rows', layer norm's dweight,
// batch norm's moments and gradient sums): `acc` is this thread's sum of its
// row lane's terms for column c = blockIdx.x·kColumnTile + threadIdx.x; the
// block's lanes meet in a fixed tree (lane l < 4 adds lane l+4's sum, l < 2
// adds l+2's, lane 0 adds lane 1's) and lane 0 writes out[blockIdx.y, c].
// Every thread of the block must call it (it has barriers).
__device__ inline void finish_column_tile(float* out, float acc, int64_t c, int64_t cols) {
  __shared__ float lane_sums[kRowLanes][kColumnTile];
  lane_sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  for (unsigned half = kRowLanes / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) lane_sums[threadIdx.y][threadIdx.x] += lane_sums[threadIdx.y + half][threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.y == 0 && c < cols) out[int64_t(blockIdx.y) * cols + c] = lane_sums[0][threadIdx.x];
}

// out (gridDim.y, cols): out[k, c] = Σ in[r, c] over chunk k's rows,
// r ∈ [k·rows_per_chunk, (k+1)·rows_per_chunk) ∩ [0, rows); in is (rows, cols).
// The order is fixed by (rows, rows_per_chunk) alone: lane l adds rows
// first+l, first+l+8, … one after the other, then finish_column_tile's tree.
// No atomics: same input, same bits.
__global__ void column_sums_kernel(float* out, const float* in, int64_t rows, int64_t cols, int64_t rows_per_chunk) {
  int64_t c = int64_t(blockIdx.x) * kColumnTile + threadIdx.x;
  int64_t first = int64_t(blockIdx.y) * rows_per_chunk;
  int64_t end = rows - first < rows_per_chunk ? rows : first + rows_per_chunk;
  float acc = 0.0f;
  if (c < cols) {
#pragma unroll 8  // independent loads in flight; the adds stay in row order
    for (int64_t r = first + threadIdx.y; r < end; r += kRowLanes) acc += in[r * cols + c];
  }
  finish_column_tile(out, acc, c, cols);
}

// Row chunks of a column sum (sum_rows' first pass), from rows alone, so a
// column's summation order, and its bits, depend on rows and nothing else
// (not cols, not the GPU): 64 rows a chunk (8 per row lane), at most 64
// chunks. 4096 rows: 64 chunks, so 4096×10 runs 64 blocks and 4096×1024
// 2048; under 128 rows: one chunk, a single pass. The partials (chunks × cols
// floats) are at most 1/64 of the input.
constexpr int64_t kRowsPerChunk = 64;
constexpr int64_t kMaxChunks = 64;
inline int64_t column_chunks(int64_t rows) { return std::clamp<int64_t>(rows / kRowsPerChunk, 1, kMaxChunks); }
/// Blocks across cols columns: one per kColumnTile of them.
inline int64_t column_tiles(int64_t cols) { return (cols + kColumnTile - 1) / kColumnTile; }
/// Floats of scratch launch_column_sums needs: (chunks, cols), none for one chunk.
inline int64_t column_sum_partials(int64_t rows, int64_t cols) {
  int64_t chunks = column_chunks(rows);
  return chunks == 1 ? 0 : chunks * cols;
}

/// out (cols) = per-column sums of terms that `first_pass` makes on the fly:
/// first_pass is called as (out or partials, args..., rows, cols,
/// rows_per_chunk), a column_sums_kernel that computes its terms, ending in
/// finish_column_tile. Two passes: chunk partials (chunks, cols), then
/// column_sums_kernel sums each column's partials in chunk order; one pass
/// when there is one chunk. `partials` holds column_sum_partials(rows, cols)
/// floats. cols ≥ 1; rows = 0 writes zeros (an empty sum). The caller checks
/// that column_tiles(cols) fits a grid.
template <typename Launch, typename... Params, typename... Args>
void launch_column_sums_of(Launch& launch, void (*first_pass)(Params...), float* out, int64_t rows, int64_t cols,
                           float* partials, Args... args) {
  dim3 block(kColumnTile, kRowLanes);
  auto tiles = unsigned(column_tiles(cols));
  int64_t chunks = column_chunks(rows);
  if (chunks == 1) {
    launch(first_pass, dim3(tiles, 1), block, out, args..., rows, cols, rows);
    return;
  }
  int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  launch(first_pass, dim3(tiles, unsigned(chunks)), block, partials, args..., rows, cols, rows_per_chunk);
  launch(column_sums_kernel, dim3(tiles, 1), block, out, static_cast<const float*>(partials), chunks, cols, chunks);
}

/// sum_rows: dbias[c] = Σ_r dy[r, c], column_sums_kernel's own terms in
/// launch_column_sums_of's passes; cols = 0 writes nothing, as the CPU.
template <typename Launch>
void launch_column_sums(Launch& launch, float* dbias, const float* dy, int64_t rows, int64_t cols, float* partials) {
  if (cols > 0) launch_column_sums_of(launch, column_sums_kernel, dbias, rows, cols, partials, dy);
}

// dlogits (rows, classes) = (probs − onehot(labels)) · (*dloss) / rows.
__global__ void softmax_cross_entropy_backward_kernel(float* dlogits, const float* probs, const int64_t* labels,
                                                      const float* dloss, int64_t rows, int64_t classes) {
  float factor = math::scalar_factor(*dloss, 1.0f, float(rows));
  for (int64_t i = first_index(); i < rows * classes; i += grid_stride())
    dlogits[i] = math::softmax_cross_entropy_grad(probs[i], i % classes == labels[i / classes], factor);
}

// ---- optimizers ----

__global__ void sgd_kernel(float* p, const float* g, float lr, float weight_decay, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) math::sgd_update(p[i], g[i], lr, weight_decay);
}
__global__ void momentum_kernel(float* p, float* v, const float* g, float lr, float momentum, float weight_decay,
                                bool first, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    math::momentum_update(p[i], v[i], g[i], lr, momentum, weight_decay, first);
}
__global__ void adam_kernel(float* p, float* m, float* v, const float* g, AdamStep s, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    math::adam_update(p[i], m[i], v[i], g[i], s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.decoupled,
                      s.correction1, s.correction2);
}

// LARS and LAMB on one layer: `squares` holds the layer's Σ p² and Σ g² (or
// Σ u²), which sum_squares wrote earlier on the same stream; every thread
// reads the two floats and computes the same ratio.
__global__ void lars_kernel(float* p, float* v, const float* g, const float* squares, LarsStep s, bool first,
                            int64_t n) {
  float ratio = math::lars_trust_ratio(squares[0], squares[1], s.trust_coefficient, s.weight_decay, s.eps);
  for (int64_t i = first_index(); i < n; i += grid_stride())
    math::lars_update(p[i], v[i], g[i], ratio, s.lr, s.momentum, s.weight_decay, first);
}
__global__ void lamb_direction_kernel(float* u, float* m, float* v, const float* p, const float* g, AdamStep s,
                                      int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    u[i] = math::lamb_direction(p[i], m[i], v[i], g[i], s.beta1, s.beta2, s.eps, s.weight_decay, s.correction1,
                                s.correction2);
}
__global__ void lamb_apply_kernel(float* p, const float* u, const float* squares, float lr, int64_t n) {
  float step = lr * math::lamb_trust_ratio(squares[0], squares[1]);
  for (int64_t i = first_index(); i < n; i += grid_stride()) p[i] -= step * u[i];
}

}  // namespace DPT_CUDA_BUILD
}  // namespace dpt::cuda
