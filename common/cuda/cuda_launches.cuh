// cuda_launches.cuh — which kernels each GPU Kernels call launches, with
// what grid and block, in what order and with which scratch: the plan of a
// call, apart from where it runs.
//
// Every function takes a `launch` callable,
//
//   launch(kernel, grid, block, args...)   // queue kernel<<<grid, block>>>(args...)
//
// cuda_kernels.cu passes one that queues on the thread's stream and checks
// cudaGetLastError; the tests pass tests/support/cuda_emulator.h's, which runs
// every thread of every block on the CPU. So the grids, the passes and the
// indexing the GPU will run are the ones the tests run against the CPU
// kernels, on machines with no GPU.
//
// Scratch (reduction partials, sum_rows' chunk partials) is the caller's:
// the GPU side keeps it per thread or per CUDA graph (cuda_kernels.cu).
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda_elementwise.cuh"
#include "cuda_reductions.cuh"

namespace dpt::cuda {
inline namespace DPT_CUDA_BUILD {

/// Most blocks an elementwise kernel gets; its grid-stride loop does the rest.
constexpr int kElementwiseBlocks = 8192;

/// Blocks for n elements: enough to fill an H100 (132 SMs), capped so the
/// grid-stride loops do the rest; at least 1 so reductions of 0 elements still
/// write their identity.
inline int blocks_for(int64_t n, int cap) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return int(std::max<int64_t>(1, std::min<int64_t>(blocks, cap)));
}

/// kernel over n elements, one thread each (grid-stride); nothing for n ≤ 0.
template <typename Launch, typename... Params, typename... Args>
void launch_elementwise(Launch& launch, void (*kernel)(Params...), int64_t n, Args... args) {
  if (n <= 0) return;
  launch(kernel, dim3(unsigned(blocks_for(n, kElementwiseBlocks))), dim3(kThreads), args...);
}

// ----------------------------------------------------------------------------
// sum_rows: dbias[c] = Σ_r dy[r, c]

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

/// Two passes of column_sums_kernel: chunk partials (chunks, cols), then each
/// column's partials summed in chunk order; one pass when there is one chunk.
/// rows = 0 writes zeros (an empty sum), cols = 0 writes nothing: as the CPU.
/// `partials` holds column_sum_partials(rows, cols) floats. The caller checks
/// that column_tiles(cols) fits a grid.
template <typename Launch>
void launch_column_sums(Launch& launch, float* dbias, const float* dy, int64_t rows, int64_t cols, float* partials) {
  if (cols <= 0) return;
  dim3 block(kColumnTile, kRowLanes);
  auto tiles = unsigned(column_tiles(cols));
  int64_t chunks = column_chunks(rows);
  if (chunks == 1) {
    launch(column_sums_kernel, dim3(tiles, 1), block, dbias, dy, rows, cols, rows);
    return;
  }
  int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  launch(column_sums_kernel, dim3(tiles, unsigned(chunks)), block, partials, dy, rows, cols, rows_per_chunk);
  launch(column_sums_kernel, dim3(tiles, 1), block, dbias, static_cast<const float*>(partials), chunks, cols, chunks);
}

// ----------------------------------------------------------------------------
// reductions: a first pass of blocks_for(n, kMaxPartials) blocks, each writing
// one partial, then one block over the partials

/// *out = combine over load(0 .. n); `partials` holds kMaxPartials floats.
template <typename Launch, typename Load, typename Combine>
void launch_reduce(Launch& launch, Load load, Combine combine, int64_t n, float* partials, float* out) {
  int blocks = blocks_for(n, kMaxPartials);
  launch(reduce_kernel<Load, Combine>, dim3(unsigned(blocks)), dim3(kThreads), load, combine, n, partials);
  launch(finish_kernel<float, Combine>, dim3(1), dim3(kThreads), static_cast<const float*>(partials), blocks, combine,
         out);
}

/// probs and *loss of softmax-cross-entropy over (rows, classes) logits;
/// `labels` in the GPU's memory, `partials` kMaxPartials doubles.
template <typename Launch>
void launch_softmax_cross_entropy(Launch& launch, float* probs, float* loss, const float* logits,
                                  const int64_t* labels, int64_t rows, int64_t classes, double* partials) {
  int blocks = blocks_for(rows, kMaxPartials);
  launch(softmax_cross_entropy_kernel, dim3(unsigned(blocks)), dim3(kThreads), probs, logits, labels, rows, classes,
         partials);
  launch(softmax_cross_entropy_finish_kernel, dim3(1), dim3(kThreads), static_cast<const double*>(partials), blocks,
         rows, loss);
}

/// *out = rows whose first argmax is their label; `partials` kMaxPartials
/// counters. Needs rows ≥ 1 and classes ≥ 1 (the caller answers 0 otherwise).
template <typename Launch>
void launch_count_correct(Launch& launch, const float* logits, const int64_t* labels, int64_t rows, int64_t classes,
                          unsigned long long* partials, unsigned long long* out) {
  int blocks = blocks_for(rows, kMaxPartials);
  launch(count_correct_kernel, dim3(unsigned(blocks)), dim3(kThreads), logits, labels, rows, classes, partials);
  launch(finish_kernel<unsigned long long, Add>, dim3(1), dim3(kThreads),
         static_cast<const unsigned long long*>(partials), blocks, Add{}, out);
}

}  // namespace DPT_CUDA_BUILD
}  // namespace dpt::cuda
