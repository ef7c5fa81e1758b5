/// @file kernels.h
/// @brief The device line: the raw loops every op and optimizer runs, once for
/// host memory (Eigen and plain loops) and once for a GPU (CUDA kernels and
/// cuBLAS). Autograd, nn and optim sit above it and never see which.
///
/// Pointers are to the memory of the device the kernels were picked for
/// (`kernels_for(device)`); all arrays are contiguous, row-major float32. A
/// "scalar" argument given as a pointer (`const float* dloss`) is one float in
/// that device's memory, so a backward pass never stops to copy a number to
/// the host. The per-element math both sides run is written once, in
/// kernel_math.h, as host-device functions: the CPU tests pin it, and the GPU
/// tests compare the CUDA kernels with their CPU twins. Class labels are the
/// exception: they are host memory (a std::vector's data), which the GPU side
/// copies to a buffer of its own before launching.
///
/// On a GPU, kernels are queued on the calling thread's current stream
/// (gpu.h) and return before they finish; the functions that return a value to
/// the host (`count_correct`, `max_abs_diff`) wait for it.
#pragma once

#include <cmath>
#include <cstdint>

#include "dpt/half.h"  // Half, math::RoundingCounts

namespace dpt {

class Device;

/// Hyper-parameters of one Adam/AdamW step (PyTorch semantics).
struct AdamStep {
  float lr = 1e-3f;            ///< learning rate
  float beta1 = 0.9f;          ///< first-moment decay
  float beta2 = 0.999f;        ///< second-moment decay
  float eps = 1e-8f;           ///< added to sqrt(v̂)
  float weight_decay = 0.0f;   ///< L2 (Adam) or decoupled (AdamW) decay
  bool decoupled = false;      ///< AdamW: decay the weight, not the gradient
  float correction1 = 1.0f;    ///< 1 − beta1^t
  float correction2 = 1.0f;    ///< 1 − beta2^t

  /// Sets the bias corrections for step `t` (1 on the first step).
  AdamStep& at_step(int64_t t) {
    correction1 = 1.0f - std::pow(beta1, float(t));
    correction2 = 1.0f - std::pow(beta2, float(t));
    return *this;
  }
};

/// Hyper-parameters of one LARS step on a layer (see kernel_math.h's lars_*).
struct LarsStep {
  float lr = 1.0f;                  ///< global learning rate γ
  float momentum = 0.9f;            ///< μ
  float weight_decay = 0.0f;        ///< λ, inside the trust ratio and the step
  float trust_coefficient = 1e-3f;  ///< η
  float eps = 1e-8f;                ///< added to the ratio's denominator
};

/// One device kind's loops. Get one with `kernels_for(device)`.
class Kernels {
 public:
  virtual ~Kernels() = default;

  // ---- BLAS ----
  /// c (m, n) = alpha · op(a) · op(b) + beta · c; op(a) is (m, k) — a is (k, m)
  /// when `transpose_a` — and op(b) is (k, n) — b is (n, k) when `transpose_b`.
  /// With beta = 0, c is only written (a NaN already in c does not survive).
  virtual void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, const float* b, float beta, float* c) = 0;
  /// y += alpha · x, n elements.
  virtual void axpy(float* y, float alpha, const float* x, int64_t n) = 0;
  /// x *= s, n elements.
  virtual void scale(float* x, float s, int64_t n) = 0;
  /// x /= d, n elements (a division: x · (1/d) differs in the last bit).
  virtual void divide(float* x, float d, int64_t n) = 0;
  /// x = value, n elements.
  virtual void fill(float* x, float value, int64_t n) = 0;

  // ---- elementwise (out may alias an input) ----
  /// out = a + b.
  virtual void add(float* out, const float* a, const float* b, int64_t n) = 0;
  /// out = a − b.
  virtual void sub(float* out, const float* a, const float* b, int64_t n) = 0;
  /// out = a ⊙ b.
  virtual void mul(float* out, const float* a, const float* b, int64_t n) = 0;
  /// out = s · a.
  virtual void scaled_copy(float* out, const float* a, float s, int64_t n) = 0;
  /// out = a · f with f = (*scalar) · multiplier / divisor (kernel_math.h's
  /// scalar_factor), `scalar` one float on the device; out must not overlap it.
  virtual void scale_by_scalar(float* out, const float* a, const float* scalar, float multiplier,
                               float divisor, int64_t n) = 0;
  /// out = (*scalar) · multiplier / divisor everywhere; out must not overlap `scalar`.
  virtual void fill_from_scalar(float* out, const float* scalar, float multiplier, float divisor,
                                int64_t n) = 0;
  /// out = max(x, 0).
  virtual void relu(float* out, const float* x, int64_t n) = 0;
  /// dx = dout where x > 0, else 0 (relu'(0) = 0, as PyTorch).
  virtual void relu_backward(float* dx, const float* x, const float* dout, int64_t n) = 0;

  // ---- rows and columns ----
  /// y (rows, cols) += bias (cols) on every row.
  virtual void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) = 0;
  /// dbias (cols) = Σ over rows of dy (rows, cols).
  virtual void sum_rows(float* dbias, const float* dy, int64_t rows, int64_t cols) = 0;

  // ---- reductions to one float on the device ----
  /// *out = Σ x.
  virtual void sum(float* out, const float* x, int64_t n) = 0;
  /// *out = Σ x².
  virtual void sum_squares(float* out, const float* x, int64_t n) = 0;

  // ---- loss ----
  /// logits (rows, classes), labels (rows, host memory, each in [0, classes)):
  /// probs = softmax(logits) row-wise, *loss = mean over rows of −log probs[label].
  virtual void softmax_cross_entropy(float* probs, float* loss, const float* logits,
                                     const int64_t* labels, int64_t rows, int64_t classes) = 0;
  /// dlogits (rows, classes) = (probs − onehot(labels)) · (*dloss) / rows; labels
  /// on the host, as in the forward.
  virtual void softmax_cross_entropy_backward(float* dlogits, const float* probs, const int64_t* labels,
                                              const float* dloss, int64_t rows, int64_t classes) = 0;

  // ---- optimizers (one step over n elements, in place) ----
  /// p −= lr · (g + weight_decay · p).
  virtual void sgd_step(float* p, const float* g, float lr, float weight_decay, int64_t n) = 0;
  /// d = g + weight_decay · p; v = first ? d : momentum · v + d; p −= lr · v.
  virtual void momentum_step(float* p, float* v, const float* g, float lr, float momentum,
                             float weight_decay, bool first, int64_t n) = 0;
  /// One Adam/AdamW step on p with moments m, v (see AdamStep).
  virtual void adam_step(float* p, float* m, float* v, const float* g, const AdamStep& step,
                         int64_t n) = 0;

  // ---- layer-wise optimizers: `squares` is 2 floats on the device, the
  // layer's Σ p² then Σ g² (LARS) or Σ u² (LAMB), as sum_squares leaves them ----
  /// One LARS step on a layer of n elements: ratio = lars_trust_ratio(squares),
  /// then d = ratio · (g + λ p); v = first ? d : μ v + d; p −= lr · v.
  virtual void lars_step(float* p, float* v, const float* g, const float* squares, const LarsStep& step, bool first,
                         int64_t n) = 0;
  /// LAMB's first pass: Adam's moments m, v from g (step's betas, eps and
  /// corrections) and u = m̂ / (√v̂ + ε) + weight_decay · p; p is only read,
  /// step.lr and step.decoupled are unused.
  virtual void lamb_direction(float* u, float* m, float* v, const float* p, const float* g, const AdamStep& step,
                              int64_t n) = 0;
  /// LAMB's second pass: p −= lr · lamb_trust_ratio(squares) · u.
  virtual void lamb_apply(float* p, const float* u, const float* squares, float lr, int64_t n) = 0;

  // ---- 16-bit formats  // ---- 16-bit formats (dpt/half.h): values stay float32, each representable ----
  /// x (n) rounded to `format` in place, each element half_math.h's
  /// round_counting (so every device gives the same bits); with `counts`,
  /// what the rounding met is added to *counts (on a GPU that call waits).
  virtual void round_half(float* x, int64_t n, Half format, math::RoundingCounts* counts) = 0;
  /// c (m, n) = op(a) · op(b), shapes as gemm, with a and b rounded to
  /// `format`: 16-bit operands, products summed in fp32 (tensor cores on a
  /// GPU), c float32 and only written. Needs k ≥ 1.
  virtual void gemm_half(Half format, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                         const float* a, const float* b, float* c) = 0;

  // ---- a transformer's loops (chapter 14; ops.h's names) ----
  /// For i < batch: c_i (m, n) = alpha · op(a_i) · op(b_i) + beta · c_i with
  /// a_i = a + i·stride_a, b_i = b + i·stride_b, c_i = c + i·stride_c (shapes
  /// and flags as gemm). cuBLAS's strided-batched GEMM on a GPU.
  virtual void gemm_batched(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                            const float* a, int64_t stride_a, const float* b, int64_t stride_b, float beta,
                            float* c, int64_t stride_c, int64_t batch) = 0;
  /// out (n, cols): row i = table's row tokens[i] (tokens host memory, each
  /// in the table's range, checked by the caller).
  virtual void embedding(float* out, const float* table, const int64_t* tokens, int64_t n, int64_t cols) = 0;
  /// dtable (·, cols) += dout's row i at row tokens[i], for every i (a token
  /// that repeats adds up). Same bits on every call and every device: rows of
  /// one token are added in the order of i.
  virtual void embedding_backward(float* dtable, const float* dout, const int64_t* tokens, int64_t n,
                                  int64_t cols) = 0;
  /// Per row of x (rows, cols): mean μ, rstd = 1/sqrt(var + eps) (biased
  /// variance), out = (x − μ)·rstd·weight + bias. mean and rstd (rows) are
  /// written for the backward.
  virtual void layer_norm(float* out, float* mean, float* rstd, const float* x, const float* weight,
                          const float* bias, int64_t rows, int64_t cols, float eps) = 0;
  /// The backward of layer_norm: dx (rows, cols) written; dweight and dbias
  /// (cols) written, each may be null (not needed).
  virtual void layer_norm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                                   const float* mean, const float* rstd, const float* weight, int64_t rows,
                                   int64_t cols) = 0;
  /// out = GELU(x), GPT-2's tanh form: ½x(1 + tanh(√(2/π)(x + 0.044715x³))).
  virtual void gelu(float* out, const float* x, int64_t n) = 0;
  /// dx = dout · GELU'(x) (the tanh form's exact derivative).
  virtual void gelu_backward(float* dx, const float* x, const float* dout, int64_t n) = 0;
  /// out (rows, cols) = softmax of each row of x. With causal_period T > 0,
  /// row r is query position p = r mod T and sees only columns j ≤ p: the
  /// rest are exactly 0 (what a −∞ mask gives), whatever x holds there.
  virtual void softmax(float* out, const float* x, int64_t rows, int64_t cols, int64_t causal_period) = 0;
  /// dx = y ⊙ (dy − Σ_row(y ⊙ dy)), row by row (y = softmax's output; masked
  /// entries, y = 0, get 0).
  virtual void softmax_backward(float* dx, const float* y, const float* dy, int64_t rows, int64_t cols) = 0;
  /// out (a, c, b, d) = x (a, b, c, d) with axes 1 and 2 swapped: heads
  /// split (B, T, H, D) → (B, H, T, D) and joined back. out must not alias x.
  virtual void swap_axes_12(float* out, const float* x, int64_t a, int64_t b, int64_t c, int64_t d) = 0;
  /// A strided 2-D copy: for r < rows, out[r·out_stride + j] = x[r·x_stride + j],
  /// j < cols (a block of columns out of, or into, a wider matrix).
  virtual void copy_columns(float* out, int64_t out_stride, const float* x, int64_t x_stride, int64_t rows,
                            int64_t cols) = 0;

  // ---- batch normalization (ops.h's batch_norm): x (rows, cols), statistics per column ----
  /// mean (cols) = Σ_rows x / rows and var (cols) = Σ_rows (x − mean)² / rows
  /// (biased): two passes, so the variance sums non-negative terms and never
  /// cancels as Σx²/rows − mean² does when |mean| ≫ std. rows ≥ 1.
  virtual void batch_moments(float* mean, float* var, const float* x, int64_t rows, int64_t cols) = 0;
  /// inv_std (cols) = 1/√(var + eps) (kernel_math.h's batch_norm_inv_std); then
  /// xhat = (x − mean)·inv_std and y = xhat·weight + bias, both (rows, cols).
  virtual void batch_norm(float* y, float* xhat, float* inv_std, const float* x, const float* mean, const float* var,
                          const float* weight, const float* bias, int64_t rows, int64_t cols, float eps) = 0;
  /// running_mean and running_var (cols) ← running_average of themselves with
  /// mean and var·unbias (unbias = N/(N − 1): PyTorch keeps the unbiased variance).
  virtual void batch_norm_running(float* running_mean, float* running_var, const float* mean, const float* var,
                                  float momentum, float unbias, int64_t cols) = 0;
  /// sum_dy (cols) = Σ_rows dy and sum_dy_xhat (cols) = Σ_rows dy ⊙ xhat, dy and
  /// xhat (rows, cols); rows = 0 writes zeros.
  virtual void batch_norm_gradient_sums(float* sum_dy, float* sum_dy_xhat, const float* dy, const float* xhat,
                                        int64_t rows, int64_t cols) = 0;
  /// dx (rows, cols) = kernel_math.h's batch_norm_dx per element, from the
  /// column sums over the `count` rows the statistics are over (count ≥ rows).
  virtual void batch_norm_backward(float* dx, const float* dy, const float* xhat, const float* inv_std,
                                   const float* weight, const float* sum_dy, const float* sum_dy_xhat, int64_t count,
                                   int64_t rows, int64_t cols) = 0;
  /// Evaluation: y (rows, cols) = (x − mean)·batch_norm_inv_std(var, eps)·weight
  /// + bias, mean and var (cols) the running statistics.
  virtual void batch_norm_inference(float* y, const float* x, const float* mean, const float* var,
                                    const float* weight, const float* bias, int64_t rows, int64_t cols,
                                    float eps) = 0;

  // ---- results for the host (these wait for the device) ----
  /// Rows of logits (rows, classes) whose first largest entry is at the label
  /// (labels on the host; one outside [0, classes) never matches).
  virtual int64_t count_correct(const float* logits, const int64_t* labels, int64_t rows,
                                int64_t classes) = 0;
  /// max |a − b|; NaN when any difference is NaN (a NaN is never "equal").
  virtual float max_abs_diff(const float* a, const float* b, int64_t n) = 0;
  /// How many of x (n) are ±inf or NaN (half_math.h's is_inf_or_nan).
  virtual int64_t count_inf_or_nan(const float* x, int64_t n) = 0;
};

/// Lets cuBLAS round GEMM inputs to TF32 on tensor cores (sm_80+: ~8× the
/// fp32 rate, ~1e-3 relative error per product). Off by default, so a GPU run
/// matches the CPU to fp32 rounding; applies to GEMMs queued after the call,
/// on every thread. The CPU kernels ignore it.
void set_tf32(bool on);
/// Whether GEMMs on a GPU may use TF32 (see set_tf32); false unless set.
bool tf32();

/// The loops for memory on `device`: host and cpu:k share the CPU kernels;
/// cuda:k gets the CUDA kernels (an error naming the reason when this dpt has
/// no CUDA).
Kernels& kernels_for(const Device& device);
/// The CPU kernels (Eigen and plain loops over kernel_math.h).
Kernels& cpu_kernels();
/// The CUDA kernels for GPU `device` (kernel_math.h on the GPU, cuBLAS for
/// gemm), queued on the calling thread's current stream of that GPU.
Kernels& cuda_kernels(int device);

}  // namespace dpt
