// cpu_transformer_kernels.cpp — the host loops of a transformer's ops (chapter
// 14): embedding, layer norm, GELU, a causal softmax, the head swap and the
// column copy. kernels.h states each contract; the CUDA kernels are tested against
// these.
//
// Every loop walks memory row by row, in the order it is stored. Row
// reductions (a mean, a max, a dot product) go through Eigen arrays, which
// vectorise them (a plain float reduction would not vectorise without
// -ffast-math); elementwise formulas are kernel_math.h's, as on the GPU.
// Everything accumulates in float, as PyTorch's CPU kernels do: rows here are
// a model's width or a context (10²–10³ entries), where float sums lose
// ~√n·6e-8 relative, far below what any test or the cross-check resolves.
//
// Left out: threads (ranks are the parallelism), the batched GEMM (a loop of
// Eigen GEMMs, in cpu_kernels.cpp).
#include "cpu_transformer_kernels.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>

#include "dpt/kernel_math.h"

namespace dpt::cpu {

namespace {
using Row = Eigen::Map<Eigen::ArrayXf>;
using ConstRow = Eigen::Map<const Eigen::ArrayXf>;
}  // namespace

// ----------------------------------------------------------------------------
// embedding: out (n, cols) row i = table row tokens[i]

void embedding(float* out, const float* table, const int64_t* tokens, int64_t n, int64_t cols) {
  for (int64_t i = 0; i < n; ++i) std::copy_n(table + tokens[i] * cols, cols, out + i * cols);
}

// In the order of i, so a token that repeats sums its rows in one fixed order.
void embedding_backward(float* dtable, const float* dout, const int64_t* tokens, int64_t n, int64_t cols) {
  for (int64_t i = 0; i < n; ++i) {
    float* row = dtable + tokens[i] * cols;
    const float* g = dout + i * cols;
    for (int64_t j = 0; j < cols; ++j) row[j] += g[j];
  }
}

// ----------------------------------------------------------------------------
// layer norm, per row x (cols):
//   μ = mean(x), σ² = mean((x − μ)²) (biased), rstd = 1/√(σ² + ε)
//   n̂ = (x − μ)·rstd,  out = n̂·weight + bias
// Backward with g = dout·weight (what reaches n̂):
//   dx = rstd·(g − mean(g) − n̂·mean(g·n̂))   — the two means are what the
//   row's shared μ and σ contribute; dweight = Σ_rows dout·n̂, dbias = Σ_rows dout.

void layer_norm(float* out, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                int64_t rows, int64_t cols, float eps) {
  ConstRow w(weight, cols), b(bias, cols);
  for (int64_t r = 0; r < rows; ++r) {
    ConstRow xr(x + r * cols, cols);
    float mu = xr.mean();
    float var = (xr - mu).square().mean();  // two passes: no cancellation of E[x²] − μ²
    float rs = 1.0f / std::sqrt(var + eps);
    Row(out + r * cols, cols) = (xr - mu) * rs * w + b;
    mean[r] = mu;
    rstd[r] = rs;
  }
}

void layer_norm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                         const float* mean, const float* rstd, const float* weight, int64_t rows, int64_t cols) {
  ConstRow w(weight, cols);
  if (dweight) Row(dweight, cols).setZero();
  if (dbias) Row(dbias, cols).setZero();
  for (int64_t r = 0; r < rows; ++r) {
    ConstRow xr(x + r * cols, cols), dr(dout + r * cols, cols);
    auto norm = (xr - mean[r]) * rstd[r];
    auto g = dr * w;
    float g_mean = g.mean();
    float g_norm_mean = (g * norm).mean();
    Row(dx + r * cols, cols) = rstd[r] * (g - g_mean - norm * g_norm_mean);
    if (dweight) Row(dweight, cols) += dr * norm;
    if (dbias) Row(dbias, cols) += dr;
  }
}

// ----------------------------------------------------------------------------
// GELU, a block at a time: kernel_math.h's argument and finish, plain loops
// that vectorise, around Eigen's vectorised tanh of the block (tanhf per
// element would cost ~30× more: GELU would outweigh a GPT's GEMMs)

namespace {
constexpr int64_t kGeluBlock = 256;  // 1 KiB of tanh values: stays in L1

// t[i] = tanh(u(x[i])) for i < n ≤ kGeluBlock.
void gelu_tanh(float* t, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) t[i] = math::gelu_tanh_argument(x[i]);
  Row(t, n) = Row(t, n).tanh();
}
}  // namespace

void gelu(float* out, const float* x, int64_t n) {
  float t[kGeluBlock];
  for (int64_t start = 0; start < n; start += kGeluBlock) {
    int64_t m = std::min(kGeluBlock, n - start);
    gelu_tanh(t, x + start, m);
    for (int64_t i = 0; i < m; ++i) out[start + i] = math::gelu_from_tanh(x[start + i], t[i]);
  }
}

void gelu_backward(float* dx, const float* x, const float* dout, int64_t n) {
  float t[kGeluBlock];
  for (int64_t start = 0; start < n; start += kGeluBlock) {
    int64_t m = std::min(kGeluBlock, n - start);
    gelu_tanh(t, x + start, m);
    for (int64_t i = 0; i < m; ++i) dx[start + i] = math::gelu_backward_from_tanh(x[start + i], t[i], dout[start + i]);
  }
}

// ----------------------------------------------------------------------------
// softmax by rows; with a causal period T, row r is query p = r mod T and
// sees columns [0, p] only (the rest exactly 0, never read: a −∞ or NaN
// there changes nothing)

void softmax(float* out, const float* x, int64_t rows, int64_t cols, int64_t causal_period) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t visible = causal_period > 0 ? std::min(r % causal_period + 1, cols) : cols;
    ConstRow xr(x + r * cols, visible);
    Row y(out + r * cols, cols);
    float max = xr.maxCoeff();  // over the visible entries: exp never overflows
    // exp over the whole row, masked entries as 0s, then set to 0: a full row
    // is whole vector registers, a ragged visible prefix would end in scalar exps.
    y.head(visible) = xr - max;
    y.tail(cols - visible) = 0.0f;
    y = y.exp();
    y.head(visible) /= y.head(visible).sum();
    y.tail(cols - visible) = 0.0f;
  }
}

// A masked entry has y = 0, so its dx is 0 (for a finite dy).
void softmax_backward(float* dx, const float* y, const float* dy, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    ConstRow yr(y + r * cols, cols), dyr(dy + r * cols, cols);
    float dot = (yr * dyr).sum();
    Row(dx + r * cols, cols) = yr * (dyr - dot);
  }
}

// ----------------------------------------------------------------------------
// reshuffles: whole runs of d (a head's size) or cols floats at a time

void swap_axes_12(float* out, const float* x, int64_t a, int64_t b, int64_t c, int64_t d) {
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k)  // x[i][j][k][:] → out[i][k][j][:]
        std::copy_n(x + ((i * b + j) * c + k) * d, d, out + ((i * c + k) * b + j) * d);
}

void copy_columns(float* out, int64_t out_stride, const float* x, int64_t x_stride, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) std::copy_n(x + r * x_stride, cols, out + r * out_stride);
}

}  // namespace dpt::cpu
