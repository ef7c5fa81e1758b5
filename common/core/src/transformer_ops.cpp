// transformer_ops.cpp — the differentiable ops a GPT needs (chapter 14), each
// forward next to its backward closure, as in ops.cpp: batched products for
// attention, the token embedding, layer norm, GELU, a causal softmax, the head
// swap and column blocks.
//
// Shapes are stated above each op. This file checks them, builds the graph and
// calls kernels.h's loops on the tensors' device; it never reads a device
// pointer (token ids are host memory, checked here before any kernel runs).
// An op that needs its own output in the backward (softmax) keeps a view of
// it, not the output's handle: the handle carries the graph node, and a node
// holding its own output would never be freed.
#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/kernels.h"
#include "dpt/ops.h"
#include "op_checks.h"

namespace dpt {

namespace {
// Rows of x when its last axis is the row: numel / C.
int64_t rows_of(const Tensor& x) { return x.numel() / x.size(-1); }
}  // namespace

// ----------------------------------------------------------------------------
// batched_matmul: c_g = α · op(a_g) · op(b_g) for each g < G, op(a_g) (M, K),
// op(b_g) (K, N), c (G, M, N).
//   d op(a) = α · dc · op(b)ᵀ,  d op(b) = α · op(a)ᵀ · dc,
// each written straight into a's or b's stored layout (transposed when it is).

Tensor batched_matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, float alpha) {
  DPT_CHECK(a.dim() == 3 && b.dim() == 3, "batched_matmul: a and b must be 3-D (G, rows, cols), got a "
                                              << shape_str(a.shape()) << " and b " << shape_str(b.shape()));
  check_same_device("batched_matmul", a, b);
  int64_t g = a.size(0);
  int64_t m = transpose_a ? a.size(2) : a.size(1), k = transpose_a ? a.size(1) : a.size(2);
  int64_t kb = transpose_b ? b.size(2) : b.size(1), n = transpose_b ? b.size(1) : b.size(2);
  DPT_CHECK(b.size(0) == g, "batched_matmul: a holds " << g << " matrices, b " << b.size(0));
  DPT_CHECK(k == kb, "batched_matmul: op(a) is (" << m << ", " << k << "), op(b) is (" << kb << ", " << n
                                                  << "): inner sizes differ");
  Tensor c = Tensor::empty({g, m, n}, a.device());
  K(a).gemm_batched(transpose_a, transpose_b, m, n, k, alpha, a.data(), m * k, b.data(), k * n, 0.0f, c.data(),
                    m * n, g);
  return record(c, "batched_matmul", {a, b},
                [a, transpose_a, b, transpose_b, alpha, g, m, n, k](const Tensor& dc) -> std::vector<Tensor> {
                  Tensor da, db;
                  if (a.requires_grad()) {
                    da = Tensor::empty(a.shape(), a.device());
                    if (!transpose_a)  // da (M, K) = α · dc · op(b)ᵀ
                      K(a).gemm_batched(false, !transpose_b, m, k, n, alpha, dc.data(), m * n, b.data(), k * n,
                                        0.0f, da.data(), m * k, g);
                    else  // a is (K, M): da = α · op(b) · dcᵀ
                      K(a).gemm_batched(transpose_b, true, k, m, n, alpha, b.data(), k * n, dc.data(), m * n,
                                        0.0f, da.data(), m * k, g);
                  }
                  if (b.requires_grad()) {
                    db = Tensor::empty(b.shape(), b.device());
                    if (!transpose_b)  // db (K, N) = α · op(a)ᵀ · dc
                      K(b).gemm_batched(!transpose_a, false, k, n, m, alpha, a.data(), m * k, dc.data(), m * n,
                                        0.0f, db.data(), k * n, g);
                    else  // b is (N, K): db = α · dcᵀ · op(a)
                      K(b).gemm_batched(true, transpose_a, n, k, m, alpha, dc.data(), m * n, a.data(), m * k,
                                        0.0f, db.data(), k * n, g);
                  }
                  return {da, db};
                });
}

// ----------------------------------------------------------------------------
// embedding: table (V, C), tokens (N) → out (N, C), out_i = table[tokens_i].
//   dtable[v] = Σ over i with tokens_i = v of dout_i (a repeated token adds up)

Tensor embedding(const Tensor& table, const std::vector<int64_t>& tokens) {
  check_2d("embedding", "table", table);
  int64_t vocab = table.size(0), width = table.size(1), n = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; i < n; ++i)  // the kernel reads table[tokens[i]]: check on the host first
    DPT_CHECK(tokens[i] >= 0 && tokens[i] < vocab, "embedding: token " << tokens[i] << " at index " << i
                                                                       << " is outside the table's rows [0, "
                                                                       << vocab << ")");
  Tensor out = Tensor::empty({n, width}, table.device());
  K(table).embedding(out.data(), table.data(), tokens.data(), n, width);
  return record(out, "embedding", {table}, [table, tokens, n, width](const Tensor& dout) -> std::vector<Tensor> {
    Tensor dtable = Tensor::zeros(table.shape(), table.device());
    K(table).embedding_backward(dtable.data(), dout.data(), tokens.data(), n, width);
    return {dtable};
  });
}

// ----------------------------------------------------------------------------
// layer_norm: x (…, C) as rows of C; per row n̂ = (x − μ)/√(σ² + ε), out = n̂·w + b.
//   dx = rstd·(g − mean(g) − n̂·mean(g·n̂)) with g = dout·w (the kernel's),
//   dw = Σ_rows dout·n̂, db = Σ_rows dout

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  DPT_CHECK(x.dim() >= 1 && x.size(-1) > 0, "layer_norm: x needs a last axis to normalize, got "
                                                << shape_str(x.shape()));
  int64_t width = x.size(-1), rows = rows_of(x);
  DPT_CHECK(weight.defined() && bias.defined(), "layer_norm: needs both a weight and a bias of size " << width);
  DPT_CHECK(weight.shape() == Shape{width} && bias.shape() == Shape{width},
            "layer_norm: weight " << shape_str(weight.shape()) << " and bias " << shape_str(bias.shape())
                                  << " must both be " << shape_str({width}) << ", x's last size");
  DPT_CHECK(eps > 0.0f, "layer_norm: eps must be positive, got " << eps);
  check_same_device("layer_norm", x, weight);
  check_same_device("layer_norm", x, bias);
  Tensor out = Tensor::empty(x.shape(), x.device());
  Tensor mean = Tensor::empty({rows}, x.device()), rstd = Tensor::empty({rows}, x.device());
  K(x).layer_norm(out.data(), mean.data(), rstd.data(), x.data(), weight.data(), bias.data(), rows, width, eps);
  return record(out, "layer_norm", {x, weight, bias},
                [x, weight, bias, mean, rstd, rows, width](const Tensor& dout) -> std::vector<Tensor> {
                  Tensor dx = Tensor::empty(x.shape(), x.device()), dweight, dbias;
                  if (weight.requires_grad()) dweight = Tensor::empty(weight.shape(), weight.device());
                  if (bias.requires_grad()) dbias = Tensor::empty(bias.shape(), bias.device());
                  K(x).layer_norm_backward(dx.data(), dweight.defined() ? dweight.data() : nullptr,
                                           dbias.defined() ? dbias.data() : nullptr, dout.data(), x.data(),
                                           mean.data(), rstd.data(), weight.data(), rows, width);
                  return {x.requires_grad() ? dx : Tensor(), dweight, dbias};
                });
}

// ----------------------------------------------------------------------------
// gelu (tanh form), elementwise; dx = dout · gelu'(x)

Tensor gelu(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.device());
  K(x).gelu(out.data(), x.data(), x.numel());
  return record(out, "gelu", {x}, [x](const Tensor& dout) -> std::vector<Tensor> {
    Tensor dx = Tensor::empty(x.shape(), x.device());
    K(x).gelu_backward(dx.data(), x.data(), dout.data(), x.numel());
    return {dx};
  });
}

// ----------------------------------------------------------------------------
// softmax over the last axis; causal: x (…, T, T), query i sees keys j ≤ i.
//   dx = y ⊙ (dy − Σ_row y ⊙ dy); masked entries (y = 0) get 0

Tensor softmax(const Tensor& x, bool causal) {
  DPT_CHECK(x.dim() >= 1 && x.size(-1) > 0, "softmax: x needs a non-empty last axis, got " << shape_str(x.shape()));
  int64_t cols = x.size(-1), rows = rows_of(x);
  if (causal)
    DPT_CHECK(x.dim() >= 2 && x.size(-2) == cols, "softmax: a causal mask needs scores (…, T, T), query by key, "
                                                  "got " << shape_str(x.shape()));
  Tensor y = Tensor::empty(x.shape(), x.device());
  K(x).softmax(y.data(), x.data(), rows, cols, causal ? cols : 0);
  Tensor saved = y.reshape(y.shape());  // a view: the closure must not hold y's own handle
  return record(y, "softmax", {x}, [saved, rows, cols](const Tensor& dy) -> std::vector<Tensor> {
    Tensor dx = Tensor::empty(saved.shape(), saved.device());
    K(saved).softmax_backward(dx.data(), saved.data(), dy.data(), rows, cols);
    return {dx};
  });
}

// ----------------------------------------------------------------------------
// swap_axes_12: x (A, B, C, D) → (A, C, B, D); the backward swaps dout back

Tensor swap_axes_12(const Tensor& x) {
  DPT_CHECK(x.dim() == 4, "swap_axes_12: x must be 4-D (batch, time, heads, head size), got "
                              << shape_str(x.shape()));
  int64_t a = x.size(0), b = x.size(1), c = x.size(2), d = x.size(3);
  Tensor out = Tensor::empty({a, c, b, d}, x.device());
  K(x).swap_axes_12(out.data(), x.data(), a, b, c, d);
  return record(out, "swap_axes_12", {x}, [x, a, b, c, d](const Tensor& dout) -> std::vector<Tensor> {
    Tensor dx = Tensor::empty(x.shape(), x.device());
    K(x).swap_axes_12(dx.data(), dout.data(), a, c, b, d);
    return {dx};
  });
}

// ----------------------------------------------------------------------------
// columns: x (R, N) → its columns [begin, begin + count), (R, count);
// dx is zero but for those columns, which hold dout

Tensor columns(const Tensor& x, int64_t begin, int64_t count) {
  check_2d("columns", "x", x);
  int64_t rows = x.size(0), width = x.size(1);
  DPT_CHECK(begin >= 0 && count >= 0 && begin + count <= width,
            "columns: [" << begin << ", " << begin + count << ") is outside x's " << width << " columns");
  Tensor out = Tensor::empty({rows, count}, x.device());
  K(x).copy_columns(out.data(), count, x.data() + begin, width, rows, count);
  return record(out, "columns", {x}, [x, begin, rows, width, count](const Tensor& dout) -> std::vector<Tensor> {
    Tensor dx = Tensor::zeros(x.shape(), x.device());
    K(x).copy_columns(dx.data() + begin, width, dout.data(), count, rows, count);
    return {dx};
  });
}

}  // namespace dpt
