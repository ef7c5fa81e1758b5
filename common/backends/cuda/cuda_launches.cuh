// cuda_launches.cuh — which kernels each GPU Kernels call launches, with
// what grid and block, in what order and with which scratch: the plan of a
// call, apart from where it runs; and LaunchedKernels, the Kernels calls
// themselves, over a Host that says where they run.
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
#include <vector>

#include "cuda_batch_norm.cuh"
#include "cuda_elementwise.cuh"
#include "cuda_reductions.cuh"
#include "cuda_transformer.cuh"
#include "dpt/check.h"
#include "dpt/kernels.h"

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

// ----------------------------------------------------------------------------
// the Kernels calls

/// Every Kernels call but the GEMMs, as launches of the kernels above, written once
/// for the GPU (cuda_kernels.cu's CudaKernels) and for the tests' emulator
/// (tests/support/emulated_kernels.cpp), so the emulated tests run these very
/// bodies. What differs is where they run, which `Host` (the class deriving
/// from this one) says:
///
///   launcher()                    the launch callable for the calling thread
///   acquire() → Scratch&          the thread's scratch, before use …
///   release(Scratch&)             … and after (skipped when a launch throws)
///   partials(Scratch&)            kMaxPartials + 1 eight-byte slots: a
///                                 reduction's partials, then one result
///   column_partials(Scratch&, n)  n floats of sum_rows' chunk partials
///   labels(Scratch&, host, rows)  host labels where the kernels can read them
///   read_back(T* host, const T*)  one result to the host, once the launches ran
///   where()                       the device, for messages ("cuda:0")
template <typename Host>
class LaunchedKernels : public Kernels {
 public:
  // ---- BLAS-like ----
  void axpy(float* y, float alpha, const float* x, int64_t n) override { elementwise(axpy_kernel, n, y, alpha, x, n); }
  void scale(float* x, float s, int64_t n) override { elementwise(scale_kernel, n, x, s, n); }
  void divide(float* x, float d, int64_t n) override { elementwise(divide_kernel, n, x, d, n); }
  void fill(float* x, float value, int64_t n) override { elementwise(fill_kernel, n, x, value, n); }

  // ---- elementwise ----
  void add(float* out, const float* a, const float* b, int64_t n) override {
    elementwise(add_kernel, n, out, a, b, n);
  }
  void sub(float* out, const float* a, const float* b, int64_t n) override {
    elementwise(sub_kernel, n, out, a, b, n);
  }
  void mul(float* out, const float* a, const float* b, int64_t n) override {
    elementwise(mul_kernel, n, out, a, b, n);
  }
  void scaled_copy(float* out, const float* a, float s, int64_t n) override {
    elementwise(scaled_copy_kernel, n, out, a, s, n);
  }
  void scale_by_scalar(float* out, const float* a, const float* scalar, float multiplier, float divisor,
                       int64_t n) override {
    elementwise(scale_by_scalar_kernel, n, out, a, scalar, multiplier, divisor, n);
  }
  void fill_from_scalar(float* out, const float* scalar, float multiplier, float divisor, int64_t n) override {
    elementwise(fill_from_scalar_kernel, n, out, scalar, multiplier, divisor, n);
  }
  void relu(float* out, const float* x, int64_t n) override { elementwise(relu_kernel, n, out, x, n); }
  void relu_backward(float* dx, const float* x, const float* dout, int64_t n) override {
    elementwise(relu_backward_kernel, n, dx, x, dout, n);
  }

  // ---- rows and columns ----
  void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) override {
    elementwise(add_bias_kernel, rows * cols, y, bias, rows, cols);
  }
  /// launch_column_sums (cuda_elementwise.cuh): one pass, or two through the chunk partials.
  void sum_rows(float* dbias, const float* dy, int64_t rows, int64_t cols) override {
    if (cols <= 0) return;
    column_pass("sum_rows", rows, cols,
                [&](auto& launch, float* partials) { launch_column_sums(launch, dbias, dy, rows, cols, partials); });
  }

  // ---- reductions ----
  void sum(float* out, const float* x, int64_t n) override { reduce(LoadValue{x}, Add{}, n, out); }
  void sum_squares(float* out, const float* x, int64_t n) override { reduce(LoadSquare{x}, Add{}, n, out); }

  // ---- loss ----
  void softmax_cross_entropy(float* probs, float* loss, const float* logits, const int64_t* labels, int64_t rows,
                             int64_t classes) override {
    auto& s = host().acquire();
    const int64_t* device_labels = host().labels(s, labels, rows);
    auto launch = host().launcher();
    launch_softmax_cross_entropy(launch, probs, loss, logits, device_labels, rows, classes,
                                 static_cast<double*>(host().partials(s)));
    host().release(s);
  }
  void softmax_cross_entropy_backward(float* dlogits, const float* probs, const int64_t* labels, const float* dloss,
                                      int64_t rows, int64_t classes) override {
    auto& s = host().acquire();
    const int64_t* device_labels = host().labels(s, labels, rows);
    elementwise(softmax_cross_entropy_backward_kernel, rows * classes, dlogits, probs, device_labels, dloss, rows,
                classes);
    host().release(s);
  }

  // ---- optimizers ----
  void sgd_step(float* p, const float* g, float lr, float weight_decay, int64_t n) override {
    elementwise(sgd_kernel, n, p, g, lr, weight_decay, n);
  }
  void momentum_step(float* p, float* v, const float* g, float lr, float momentum, float weight_decay, bool first,
                     int64_t n) override {
    elementwise(momentum_kernel, n, p, v, g, lr, momentum, weight_decay, first, n);
  }
  void adam_step(float* p, float* m, float* v, const float* g, const AdamStep& step, int64_t n) override {
    elementwise(adam_kernel, n, p, m, v, g, step, n);
  }
  void lars_step(float* p, float* v, const float* g, const float* squares, const LarsStep& step, bool first,
                 int64_t n) override {
    elementwise(lars_kernel, n, p, v, g, squares, step, first, n);
  }
  void lamb_direction(float* u, float* m, float* v, const float* p, const float* g, const AdamStep& step,
                      int64_t n) override {
    elementwise(lamb_direction_kernel, n, u, m, v, p, g, step, n);
  }
  void lamb_apply(float* p, const float* u, const float* squares, float lr, int64_t n) override {
    elementwise(lamb_apply_kernel, n, p, u, squares, lr, n);
  }

  // ---- a transformer's loops (cuda_transformer.cuh) ----
  /// The tokens go where the kernel reads them (the labels' buffer).
  void embedding(float* out, const float* table, const int64_t* tokens, int64_t n, int64_t cols) override {
    if (n <= 0 || cols <= 0) return;
    auto& s = host().acquire();
    const int64_t* device_tokens = host().labels(s, tokens, n);
    elementwise(embedding_kernel, n * cols, out, table, device_tokens, n, cols);
    host().release(s);
  }
  /// One thread per (distinct token, column), adding that token's rows in
  /// position order: the schedule is sorted on the host, uploaded as labels.
  void embedding_backward(float* dtable, const float* dout, const int64_t* tokens, int64_t n, int64_t cols) override {
    if (n <= 0 || cols <= 0) return;
    int64_t segments = 0;
    std::vector<int64_t> schedule = embedding_schedule(tokens, n, segments);
    auto& s = host().acquire();
    const int64_t* order = host().labels(s, schedule.data(), int64_t(schedule.size()));
    elementwise(embedding_backward_kernel, segments * cols, dtable, dout, order, order + n, order + n + segments + 1,
                segments, cols);
    host().release(s);
  }
  void layer_norm(float* out, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                  int64_t rows, int64_t cols, float eps) override {
    rowwise(layer_norm_kernel, rows, cols, out, mean, rstd, x, weight, bias, rows, cols, eps);
  }
  /// dx one block per row; dweight and dbias as sum_rows' column sums.
  void layer_norm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                           const float* mean, const float* rstd, const float* weight, int64_t rows,
                           int64_t cols) override {
    rowwise(layer_norm_backward_kernel, rows, cols, dx, dout, x, mean, rstd, weight, rows, cols);
    if (dbias) sum_rows(dbias, dout, rows, cols);
    if (!dweight || cols <= 0) return;
    column_pass("layer_norm_backward", rows, cols, [&](auto& launch, float* partials) {
      launch_layer_norm_weight_sums(launch, dweight, dout, x, mean, rstd, rows, cols, partials);
    });
  }
  void gelu(float* out, const float* x, int64_t n) override { elementwise(gelu_kernel, n, out, x, n); }
  void gelu_backward(float* dx, const float* x, const float* dout, int64_t n) override {
    elementwise(gelu_backward_kernel, n, dx, x, dout, n);
  }
  void softmax(float* out, const float* x, int64_t rows, int64_t cols, int64_t causal_period) override {
    rowwise(softmax_kernel, rows, cols, out, x, rows, cols, causal_period);
  }
  void softmax_backward(float* dx, const float* y, const float* dy, int64_t rows, int64_t cols) override {
    rowwise(softmax_backward_kernel, rows, cols, dx, y, dy, rows, cols);
  }
  void swap_axes_12(float* out, const float* x, int64_t a, int64_t b, int64_t c, int64_t d) override {
    elementwise(swap_axes_12_kernel, a * b * c * d, out, x, a, b, c, d);
  }
  void copy_columns(float* out, int64_t out_stride, const float* x, int64_t x_stride, int64_t rows,
                    int64_t cols) override {
    elementwise(copy_columns_kernel, rows * cols, out, out_stride, x, x_stride, rows, cols);
  }

  // ---- batch normalization (cuda_batch_norm.cuh) ----
  void batch_moments(float* mean, float* var, const float* x, int64_t rows, int64_t cols) override {
    if (cols <= 0) return;
    DPT_CHECK(rows > 0, "batch_moments on " << host().where() << ": x has no rows to take moments over");
    column_pass("batch_moments", rows, cols, [&](auto& launch, float* partials) {
      launch_batch_moments(launch, mean, var, x, rows, cols, partials);
    });
  }
  void batch_norm(float* y, float* xhat, float* inv_std, const float* x, const float* mean, const float* var,
                  const float* weight, const float* bias, int64_t rows, int64_t cols, float eps) override {
    elementwise(batch_norm_inv_std_kernel, cols, inv_std, var, eps, cols);
    elementwise(batch_norm_kernel, rows * cols, y, xhat, x, mean, static_cast<const float*>(inv_std), weight, bias,
                rows, cols);
  }
  void batch_norm_running(float* running_mean, float* running_var, const float* mean, const float* var,
                          float momentum, float unbias, int64_t cols) override {
    elementwise(batch_norm_running_kernel, cols, running_mean, running_var, mean, var, momentum, unbias, cols);
  }
  void batch_norm_gradient_sums(float* sum_dy, float* sum_dy_xhat, const float* dy, const float* xhat, int64_t rows,
                                int64_t cols) override {
    if (cols <= 0) return;
    column_pass("batch_norm_gradient_sums", rows, cols, [&](auto& launch, float* partials) {
      launch_batch_norm_gradient_sums(launch, sum_dy, sum_dy_xhat, dy, xhat, rows, cols, partials);
    });
  }
  void batch_norm_backward(float* dx, const float* dy, const float* xhat, const float* inv_std, const float* weight,
                           const float* sum_dy, const float* sum_dy_xhat, int64_t count, int64_t rows,
                           int64_t cols) override {
    elementwise(batch_norm_backward_kernel, rows * cols, dx, dy, xhat, inv_std, weight, sum_dy, sum_dy_xhat,
                float(count), rows, cols);
  }
  void batch_norm_inference(float* y, const float* x, const float* mean, const float* var, const float* weight,
                            const float* bias, int64_t rows, int64_t cols, float eps) override {
    elementwise(batch_norm_inference_kernel, rows * cols, y, x, mean, var, weight, bias, rows, cols, eps);
  }

  // ---- results for the host (read_back waits for the launches) ----
  int64_t count_correct(const float* logits, const int64_t* labels, int64_t rows, int64_t classes) override {
    if (rows == 0 || classes == 0) return 0;
    auto& s = host().acquire();
    const int64_t* device_labels = host().labels(s, labels, rows);
    auto* partials = static_cast<unsigned long long*>(host().partials(s));
    auto launch = host().launcher();
    launch_count_correct(launch, logits, device_labels, rows, classes, partials, partials + kMaxPartials);
    unsigned long long correct = 0;
    host().read_back(&correct, partials + kMaxPartials);
    host().release(s);
    return int64_t(correct);
  }
  float max_abs_diff(const float* a, const float* b, int64_t n) override {
    auto& s = host().acquire();
    auto* partials = static_cast<float*>(host().partials(s));
    float* result = partials + 2 * kMaxPartials;  // the 8-byte result slot
    auto launch = host().launcher();
    launch_reduce(launch, LoadAbsDiff{a, b}, NanAwareMax{}, n, partials, result);
    float worst = 0.0f;
    host().read_back(&worst, result);
    host().release(s);
    return worst;
  }

 private:
  Host& host() { return static_cast<Host&>(*this); }

  // kernel(args...) over n elements; nothing, not even the launcher, for n ≤ 0.
  template <typename... Params, typename... Args>
  void elementwise(void (*kernel)(Params...), int64_t n, Args... args) {
    if (n <= 0) return;
    auto launch = host().launcher();
    launch_elementwise(launch, kernel, n, args...);
  }

  // f(launch, partials) for a column sum over (rows, cols), cols ≥ 1, with
  // column_sum_partials(rows, cols) floats of scratch (null when one chunk
  // needs none); `op` names the call when the columns exceed a grid.
  template <typename F>
  void column_pass(const char* op, int64_t rows, int64_t cols, F f) {
    DPT_CHECK(column_tiles(cols) <= 2147483647, op << " on " << host().where() << ": " << cols
                                                   << " columns exceed a grid's 2147483647 blocks of " << kColumnTile);
    int64_t scratch = column_sum_partials(rows, cols);
    if (scratch == 0) {  // one pass: no scratch
      auto launch = host().launcher();
      f(launch, nullptr);
      return;
    }
    auto& s = host().acquire();
    float* partials = host().column_partials(s, scratch);
    auto launch = host().launcher();
    f(launch, partials);
    host().release(s);
  }

  // kernel(args...) one block a row (launch_rows); nothing for an empty matrix.
  template <typename... Params, typename... Args>
  void rowwise(void (*kernel)(Params...), int64_t rows, int64_t cols, Args... args) {
    if (rows <= 0 || cols <= 0) return;
    auto launch = host().launcher();
    launch_rows(launch, kernel, rows, cols, args...);
  }

  // *out = combine over load(0 .. n), two launches through the partials.
  template <typename Load, typename Combine>
  void reduce(Load load, Combine combine, int64_t n, float* out) {
    auto& s = host().acquire();
    auto launch = host().launcher();
    launch_reduce(launch, load, combine, n, static_cast<float*>(host().partials(s)), out);
    host().release(s);
  }
};

}  // namespace DPT_CUDA_BUILD
}  // namespace dpt::cuda
