/// @file kernel_math.h
/// @brief The per-element math of the device line, written once: the CPU loops
/// (cpu_kernels.cpp) and the CUDA kernels (common/backends/cuda/) call these same
/// inline functions, so the two can differ only in summation order and in the
/// compiler's fused multiply-adds, never in the formula.
///
/// Each function is one element's (or one row's) worth of work and touches no
/// memory but what it is handed. Compiled by nvcc they are `__host__
/// __device__`; by the C++ compiler, plain inline functions.
///
/// Left out: the loops themselves, the GEMM (Eigen / cuBLAS), plain sums
/// (Eigen's vectorised order on the CPU, a tree on the GPU), and GELU's tanh
/// on the CPU: the CPU takes Eigen's vectorised tanh of a block of arguments
/// (within 5 ulp of tanhf, ~30× faster than calling tanhf per element) and
/// finishes with gelu_from_tanh; the GPU calls gelu, with tanhf.
#pragma once

#include <math.h>

#include <cstdint>

/// `__host__ __device__` under nvcc, nothing under the C++ compiler.
#ifdef __CUDACC__
#define DPT_HOST_DEVICE __host__ __device__
#else
#define DPT_HOST_DEVICE
#endif

namespace dpt::math {

// ----------------------------------------------------------------------------
// activations

/// max(x, 0) with std::max's tie and NaN rules: −0 stays −0, NaN stays NaN.
DPT_HOST_DEVICE inline float relu(float x) { return x < 0.0f ? 0.0f : x; }

/// d(relu)/dx · dout: the gradient passes where x > 0 (0 at exactly 0, as PyTorch).
DPT_HOST_DEVICE inline float relu_backward(float x, float dout) { return x > 0.0f ? dout : 0.0f; }

/// GELU's tanh argument u = √(2/π)(x + 0.044715x³) (GPT-2's tanh form).
DPT_HOST_DEVICE inline float gelu_tanh_argument(float x) {
  const float k = 0.7978845608028654f;  // √(2/π)
  return k * (x + 0.044715f * x * x * x);
}

/// GELU given t = tanh(u) of its argument: ½x(1 + t). Split from gelu so the
/// CPU can take tanh of a whole block at once (vectorised) around it.
DPT_HOST_DEVICE inline float gelu_from_tanh(float x, float t) { return 0.5f * x * (1.0f + t); }

/// d(gelu)/dx · dout given t = tanh(u): ½(1 + t) + ½x(1 − t²)·√(2/π)(1 + 3·0.044715x²).
DPT_HOST_DEVICE inline float gelu_backward_from_tanh(float x, float t, float dout) {
  const float k = 0.7978845608028654f;
  float du = k * (1.0f + 3.0f * 0.044715f * x * x);
  return dout * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
}

/// GELU, GPT-2's tanh form: ½x(1 + tanh(√(2/π)(x + 0.044715x³))).
DPT_HOST_DEVICE inline float gelu(float x) { return gelu_from_tanh(x, ::tanhf(gelu_tanh_argument(x))); }

/// d(gelu)/dx · dout for the tanh form (its exact derivative).
DPT_HOST_DEVICE inline float gelu_backward(float x, float dout) {
  return gelu_backward_from_tanh(x, ::tanhf(gelu_tanh_argument(x)), dout);
}

/// The factor (*scalar) · multiplier / divisor, in that order (what the ops
/// computed on the host as `dout.item() * m / d` before there were devices).
DPT_HOST_DEVICE inline float scalar_factor(float scalar, float multiplier, float divisor) {
  return scalar * multiplier / divisor;
}

// ----------------------------------------------------------------------------
// rows: argmax and softmax-cross-entropy

/// Index of the first largest entry of row[0 .. classes) (std::max_element's
/// rule: a later entry wins only when strictly larger). classes ≥ 1.
DPT_HOST_DEVICE inline int64_t row_argmax(const float* row, int64_t classes) {
  int64_t best = 0;
  for (int64_t c = 1; c < classes; ++c)
    if (row[best] < row[c]) best = c;
  return best;
}

/// One row of softmax-cross-entropy: probs[c] = softmax(row)[c] for c in
/// [0, classes), returns −log probs[label] = logsumexp(row) − row[label].
/// Subtracting the max keeps exp from overflowing; the sum and the logs are
/// in double so a row of 10⁵ classes loses nothing. label in [0, classes).
DPT_HOST_DEVICE inline double softmax_cross_entropy_row(float* probs, const float* row, int64_t classes,
                                                        int64_t label) {
  float max = row[row_argmax(row, classes)];
  double denom = 0.0;
  for (int64_t c = 0; c < classes; ++c) denom += ::exp(double(row[c] - max));
  for (int64_t c = 0; c < classes; ++c) probs[c] = float(::exp(double(row[c] - max)) / denom);
  return ::log(denom) + max - row[label];
}

/// d(loss)/d(logit) for one element: (prob − [c is the label]) · factor.
DPT_HOST_DEVICE inline float softmax_cross_entropy_grad(float prob, bool is_label, float factor) {
  return (is_label ? prob - 1.0f : prob) * factor;
}

// ----------------------------------------------------------------------------
// batch normalization (ops.h's batch_norm): one column's or one element's math

/// A column's scale 1 / √(var + eps).
DPT_HOST_DEVICE inline float batch_norm_inv_std(float var, float eps) { return 1.0f / ::sqrtf(var + eps); }

/// A running statistic after one batch: (1 − momentum)·running + momentum·batch.
DPT_HOST_DEVICE inline float running_average(float running, float batch, float momentum) {
  return (1.0f - momentum) * running + momentum * batch;
}

/// dx of one element: weight·inv_std·(dy − Σdy/N − x̂·Σ(dy·x̂)/N), N = count,
/// the rows the statistics are over (every rank's under SyncBatchNorm).
DPT_HOST_DEVICE inline float batch_norm_dx(float dy, float xhat, float weight, float inv_std, float sum_dy,
                                           float sum_dy_xhat, float count) {
  float centred = dy - sum_dy / count - xhat * sum_dy_xhat / count;
  return weight * inv_std * centred;
}

// ----------------------------------------------------------------------------
// NaN-aware maximum of |a − b|

/// |a − b|.
DPT_HOST_DEVICE inline float abs_diff(float a, float b) { return ::fabsf(a - b); }

/// The larger of two partial maxima, where a NaN beats everything, on either
/// side (so a NaN anywhere survives any reduction order; std::max would drop
/// one on the right). A NaN `worst` stays, as `d > NaN` is false.
DPT_HOST_DEVICE inline float nan_aware_max(float worst, float d) {
  if (d != d) return d;
  return d > worst ? d : worst;
}

// ----------------------------------------------------------------------------
// optimizer updates, one element in place (PyTorch's torch.optim arithmetic)

/// SGD: p ← p − lr · (g + λ p).
DPT_HOST_DEVICE inline void sgd_update(float& p, float g, float lr, float weight_decay) {
  p -= lr * (g + weight_decay * p);
}

/// SGD with momentum μ: d = g + λ p; v ← d on the first step, else μ v + d;
/// p ← p − lr · v.
DPT_HOST_DEVICE inline void momentum_update(float& p, float& v, float g, float lr, float momentum,
                                            float weight_decay, bool first) {
  float d = g + weight_decay * p;
  v = first ? d : momentum * v + d;
  p -= lr * v;
}

/// Adam (decoupled = false: λ p joins the gradient) or AdamW (decoupled: p is
/// scaled by 1 − lr λ first) with bias corrections c1 = 1 − β1ᵗ, c2 = 1 − β2ᵗ:
/// m ← β1 m + (1 − β1) d, v ← β2 v + (1 − β2) d², p ← p − lr m̂ / (√v̂ + ε).
DPT_HOST_DEVICE inline void adam_update(float& p, float& m, float& v, float g, float lr, float beta1,
                                        float beta2, float eps, float weight_decay, bool decoupled,
                                        float correction1, float correction2) {
  float d = g;
  if (decoupled) p *= 1.0f - lr * weight_decay;
  else d += weight_decay * p;
  m = beta1 * m + (1.0f - beta1) * d;
  v = beta2 * v + (1.0f - beta2) * d * d;
  float m_hat = m / correction1;
  float v_hat = v / correction2;
  p -= lr * m_hat / (::sqrtf(v_hat) + eps);
}

// ----------------------------------------------------------------------------
// layer-wise rates (LARS, LAMB): one layer's trust ratio from its squared
// norms, which sum_squares left in the device's memory, then one element's step

/// LARS's trust ratio η‖w‖ / (‖g‖ + λ‖w‖ + ε) from w_squares = Σ w² and
/// g_squares = Σ g² over one layer (You, Gitman & Ginsburg 2017, with ε as
/// timm's Lars and Apex's LARC add it); 1 where ‖w‖ = 0 or ‖g‖ = 0, as theirs:
/// a zero layer, or one with nothing to learn, takes the plain step.
DPT_HOST_DEVICE inline float lars_trust_ratio(float w_squares, float g_squares, float trust, float weight_decay,
                                              float eps) {
  if (!(w_squares > 0.0f) || !(g_squares > 0.0f)) return 1.0f;
  float w_norm = ::sqrtf(w_squares);
  return trust * w_norm / (::sqrtf(g_squares) + weight_decay * w_norm + eps);
}

/// LARS, one element: d = ratio · (g + λ p); v ← d on the first step, else
/// μ v + d; p ← p − lr · v (momentum_update with the layer's ratio on d).
DPT_HOST_DEVICE inline void lars_update(float& p, float& v, float g, float ratio, float lr, float momentum,
                                        float weight_decay, bool first) {
  float d = ratio * (g + weight_decay * p);
  v = first ? d : momentum * v + d;
  p -= lr * v;
}

/// LAMB's direction, one element: Adam's moments and bias corrections (as
/// adam_update), then u = m̂ / (√v̂ + ε) + λ p, the decay inside the update
/// (You et al. 2019, Algorithm 2). Returns u; p is not changed.
DPT_HOST_DEVICE inline float lamb_direction(float p, float& m, float& v, float g, float beta1, float beta2, float eps,
                                            float weight_decay, float correction1, float correction2) {
  m = beta1 * m + (1.0f - beta1) * g;
  v = beta2 * v + (1.0f - beta2) * g * g;
  float m_hat = m / correction1;
  float v_hat = v / correction2;
  return m_hat / (::sqrtf(v_hat) + eps) + weight_decay * p;
}

/// LAMB's trust ratio ‖p‖ / ‖u‖ from p_squares = Σ p² and u_squares = Σ u²
/// over one layer (φ the identity, unclipped, as Apex's FusedLAMB and timm's
/// Lamb); 1 where either norm is 0, as theirs.
DPT_HOST_DEVICE inline float lamb_trust_ratio(float p_squares, float u_squares) {
  if (!(p_squares > 0.0f) || !(u_squares > 0.0f)) return 1.0f;
  return ::sqrtf(p_squares) / ::sqrtf(u_squares);
}

}  // namespace dpt::math
