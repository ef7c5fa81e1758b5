/// @file ops.h
/// @brief The math: differentiable ops (each with its backward next to it in
/// ops.cpp) and a few in-place kernels for optimizers and communication.
///
/// Shapes follow PyTorch: a batch of B samples with D features is (B, D); a
/// Linear layer's weight is (out, in) and computes y = x · Wᵀ + b. Every op
/// runs on its inputs' device through the device line (kernels.h): on host
/// memory (host, simulated cpu:k) GEMMs run on Eigen, single-threaded (ranks
/// are the parallelism); on cuda:k on cuBLAS, queued on the calling thread's
/// stream, with the rest as CUDA kernels. Inputs must share a device; class
/// labels are always a host std::vector.
///
/// Left out: broadcasting (a bias is added by `linear` and `layer_norm`), strided views,
/// in-place ops on tensors that autograd is tracking.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/tensor.h"

namespace dpt {

// ----------------------------------------------------------------------------
// differentiable ops (record a Node when an input requires grad)

/// a (M, K) · b (K, N) → (M, N).
Tensor matmul(const Tensor& a, const Tensor& b);
/// x (B, in), weight (out, in), bias (out) or undefined → x · weightᵀ + bias, (B, out).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
/// Elementwise a + b (same shape).
Tensor add(const Tensor& a, const Tensor& b);
/// Elementwise a * b (same shape).
Tensor mul(const Tensor& a, const Tensor& b);
/// s · a.
Tensor scale(const Tensor& a, float s);
/// max(x, 0) elementwise.
Tensor relu(const Tensor& x);
/// Sum of all elements → scalar.
Tensor sum(const Tensor& x);
/// Mean of all elements → scalar.
Tensor mean(const Tensor& x);
/// logits (B, C), labels B class indices in [0, C) → mean over the batch of
/// −log softmax(logits)[label], a scalar.
Tensor softmax_cross_entropy(const Tensor& logits, const std::vector<int64_t>& labels);
/// pred and target of the same shape → mean of (pred − target)², a scalar.
/// `target` is treated as a constant.
Tensor mse_loss(const Tensor& pred, const Tensor& target);

/// x's elements under a new shape (same numel): a view, like Tensor::reshape,
/// that autograd follows (the gradient is reshaped back). Tensor::reshape is
/// the plain view, outside the graph.
Tensor reshape(const Tensor& x, const Shape& shape);

// ---- a transformer's ops (chapter 14; GPT as nanoGPT writes it) ----

/// a (G, M, K) · b (G, K, N) → (G, M, N), G independent products (attention's
/// batch × heads), times alpha; op(x) = xᵀ of each matrix when the flag is set,
/// as gemm. Both inputs 3-D with the same G.
Tensor batched_matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                      float alpha = 1.0f);
/// table (V, C), tokens (N, host, each in [0, V)) → (N, C), row i = table[tokens[i]].
/// The gradient adds dout's rows into the table's rows they came from.
Tensor embedding(const Tensor& table, const std::vector<int64_t>& tokens);
/// x (…, C) normalized over its last axis (biased variance, ε inside the
/// square root), then · weight (C) + bias (C): PyTorch's LayerNorm.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);
/// GELU, GPT-2's tanh form (PyTorch's gelu(approximate="tanh")), elementwise.
Tensor gelu(const Tensor& x);
/// Softmax over the last axis. causal: x is (…, T, T) and entry (i, j) with
/// j > i is masked (probability exactly 0): row i spreads over columns 0 … i.
Tensor softmax(const Tensor& x, bool causal = false);
/// x (A, B, C, D) → (A, C, B, D), a copy: (batch, time, heads, head size) to
/// (batch, heads, time, head size) and back.
Tensor swap_axes_12(const Tensor& x);
/// x (R, N) → its columns [begin, begin + count), (R, count), a copy; the
/// gradient lands in those columns (q, k and v out of one (R, 3C) product).
Tensor columns(const Tensor& x, int64_t begin, int64_t count);

// ----------------------------------------------------------------------------
// batch normalization (batch_norm.cpp; kernels.h's batch-norm loops on any device)

/// Per-column statistics of a batch of rows: mean (C), biased variance (C)
/// (Σ (x − mean)² / count) and the number of rows they are over.
struct BatchMoments {
  Tensor mean;        ///< (C)
  Tensor var;         ///< (C), biased: divided by count
  int64_t count = 0;  ///< rows the statistics cover
};

/// x (B, C) → its BatchMoments over its B rows (not recorded by autograd).
BatchMoments batch_moments(const Tensor& x);

/// Which rows batch_norm's statistics are over. The default (no BatchStatistics
/// given) is x's own rows; chapter 03's SyncBatchNorm makes them every rank's.
/// Both calls are made by every rank of a group alike (forward, then backward).
class BatchStatistics {
 public:
  virtual ~BatchStatistics() = default;
  /// Given this caller's moments (over x's rows), returns the moments of the
  /// whole batch the layer normalizes by.
  virtual BatchMoments combine(const BatchMoments& local) = 0;
  /// Given this caller's Σ_rows dy and Σ_rows dy ⊙ x̂ (C each), makes them the
  /// sums over the same whole batch, in place.
  virtual void combine_gradient_sums(Tensor& sum_dy, Tensor& sum_dy_xhat) = 0;
};

/// A BatchNorm layer's running statistics, updated by every training-mode
/// batch_norm: mean ← (1 − momentum)·mean + momentum·batch mean, and var the
/// same with the batch's *unbiased* variance (× N/(N−1)), as PyTorch.
struct BatchNormRunning {
  Tensor mean;             ///< (C), starts at 0
  Tensor var;              ///< (C), starts at 1
  float momentum = 0.1f;   ///< PyTorch's default
};

/// Training mode. x (B, C), weight (C), bias (C) → y (B, C),
/// y = (x − μ) / √(σ² + eps) · weight + bias, μ and σ² (biased) per column over
/// the batch (`across`'s combine, or x's rows when null; at least 2 rows).
/// Updates `running` when given. Gradients for x, weight and bias.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f,
                  BatchNormRunning* running = nullptr, BatchStatistics* across = nullptr);
/// Evaluation mode: y = (x − running.mean) / √(running.var + eps) · weight + bias,
/// shapes as batch_norm. Not recorded by autograd.
Tensor batch_norm_inference(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const BatchNormRunning& running, float eps = 1e-5f);

// ----------------------------------------------------------------------------
// in-place kernels (never recorded by autograd)

/// c = alpha · op(a) · op(b) + beta · c, op(x) = xᵀ when the flag is set.
/// op(a) is (M, K), op(b) is (K, N), c is (M, N).
void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
          float alpha = 1.0f, float beta = 0.0f);
/// y += alpha · x (same numel).
void axpy_(Tensor& y, float alpha, const Tensor& x);
/// t *= s.
void scale_(Tensor& t, float s);
/// t = value everywhere.
void fill_(Tensor& t, float value);

// ----------------------------------------------------------------------------
// non-differentiable helpers

/// Fraction of rows of logits (B, C) whose argmax equals the label.
double accuracy(const Tensor& logits, const std::vector<int64_t>& labels);
/// Largest |a_i − b_i| (same numel); NaN when any difference is NaN (a NaN is
/// the largest difference, never 0). On two different devices, both are
/// copied to the host first (a GPU result against its CPU twin).
float max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace dpt
