// transformer_checks.h — the specs of a transformer's device loops (kernels.h,
// "a transformer's loops"), written once and run twice: on the CPU emulator of
// the GPU's kernel code by tests/core/test_transformer_kernels_emulated.cpp,
// and on cuda:0 by tests/gpu/test_gpu_transformer_kernels.cpp. Each check
// holds the side under test to a serial oracle written here in plain loops
// (double precision where there is arithmetic), sharing no code with it.
//
// Tolerances, argued once (u = 2⁻²⁴, a float's unit roundoff; γ(k) =
// kernel_checks::float_sum_error_bound(k), a float sum's error per Σ|terms|):
// - gathers and copies (embedding, swap, column copy) and the embedding
//   backward (the spec fixes its order of adds): bit for bit;
// - GELU: the tanh form is ~8 roundings deep and tanhf is within 2 ulp (CUDA's
//   documented bound; glibc's is tighter): ≤ 8u·|x| for GELU; its derivative's
//   x·(1 − t²)·u′ term loses t's error times |x|·u′(x), so 16u·(1 + |x|·(1 +
//   0.134x²)) · |dout| (see gelu_match_oracle);
// - row reductions (layer norm, softmax) sum in a tree, not serially: within γ
//   of the row's Σ|terms|, propagated through each formula (see each check).
//   A dropped or doubled term moves a result by a whole term, far outside.
#pragma once

#include <cmath>
#include <cstring>
#include <vector>

#include "dpt/kernels.h"
#include "dpt/nn.h"
#include "dpt/tensor.h"
#include "support/catch.h"
#include "support/kernel_checks.h"

namespace dpt_test::transformer_checks {

using kernel_checks::Side;
using kernel_checks::Sizes;

// ----------------------------------------------------------------------------
// inputs and outputs

constexpr double kU = 1.0 / 16777216.0;  // 2⁻²⁴

/// n values uniform in [low, high) from `seed`.
inline std::vector<float> uniform(int64_t n, uint64_t seed, float low = -1.0f, float high = 1.0f) {
  dpt::Rng rng(seed);
  std::vector<float> v(std::size_t(n > 0 ? n : 0));
  for (float& x : v) x = rng.uniform(low, high);
  return v;
}
/// values on the side's device.
inline dpt::Tensor on(const Side& side, const std::vector<float>& values) {
  return dpt::Tensor::from_vector({int64_t(values.size())}, values, side.device);
}
/// Entries i with |got − want| > tol (a NaN counts); INFO names the first.
inline int64_t off(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& tol) {
  int64_t count = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(double(got[i]) - want[i]) <= tol[i])) {
      if (count++ == 0) UNSCOPED_INFO("first at " << i << ": " << got[i] << " against " << want[i] << " ± " << tol[i]);
    }
  return count;
}
using kernel_checks::bits_off;

// ----------------------------------------------------------------------------
// gathers and copies: bit for bit

/// embedding: row i of out is the table's row tokens[i]; its backward adds
/// dout's rows into a table that already holds values, in the order of i, so
/// a serial float loop is its exact oracle. A 65-character vocabulary, rows
/// longer than a block, one row, one column, one token repeated throughout.
inline void embedding_matches_oracle(const Side& side) {
  const int64_t vocab = 65;
  struct Case { int64_t n, cols; bool one_token; };
  for (Case c : {Case{1, 1, false}, Case{7, 1, false}, Case{300, 5, false}, Case{3, 300, false},
                 Case{kernel_checks::pick<int64_t>(side, 768, 768, 50), 128, false}, Case{40, 9, true}}) {
    INFO(c.n << " tokens x " << c.cols << " columns" << (c.one_token ? ", one token repeated" : ""));
    dpt::Rng rng(c.n * 31 + c.cols);
    std::vector<int64_t> tokens(std::size_t(c.n));
    for (int64_t& t : tokens) t = c.one_token ? 64 : int64_t(rng.below(uint64_t(vocab)));
    tokens.front() = c.one_token ? 64 : 0;
    std::vector<float> table = uniform(vocab * c.cols, 1), dout = uniform(c.n * c.cols, 2);
    std::vector<float> want(std::size_t(c.n * c.cols)), dtable = uniform(vocab * c.cols, 3);
    dpt::Tensor out = on(side, std::vector<float>(want.size(), NAN)), table_on = on(side, table);
    dpt::Tensor dtable_on = on(side, dtable), dout_on = on(side, dout);
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t j = 0; j < c.cols; ++j) {
        want[std::size_t(i * c.cols + j)] = table[std::size_t(tokens[std::size_t(i)] * c.cols + j)];
        dtable[std::size_t(tokens[std::size_t(i)] * c.cols + j)] += dout[std::size_t(i * c.cols + j)];
      }
    side.kernels.embedding(out.data(), table_on.data(), tokens.data(), c.n, c.cols);
    CHECK(bits_off(out.to_vector(), want) == 0);
    side.kernels.embedding_backward(dtable_on.data(), dout_on.data(), tokens.data(), c.n, c.cols);
    CHECK(bits_off(dtable_on.to_vector(), dtable) == 0);
  }
}

/// swap_axes_12: out (a, c, b, d)[i, k, j, l] = x (a, b, c, d)[i, j, k, l].
inline void swap_matches_oracle(const Side& side) {
  using Dims = std::vector<int64_t>;
  for (Dims s : {Dims{1, 1, 1, 1}, Dims{2, 3, 5, 7}, Dims{3, 1, 4, 1}, Dims{2, 300, 3, 2}, Dims{12, 64, 4, 32}}) {
    const int64_t a = s[0], b = s[1], c = s[2], d = s[3];
    INFO("(" << a << ", " << b << ", " << c << ", " << d << ")");
    std::vector<float> x = uniform(a * b * c * d, 4), want(x.size());
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        for (int64_t k = 0; k < c; ++k)
          for (int64_t l = 0; l < d; ++l)
            want[std::size_t(((i * c + k) * b + j) * d + l)] = x[std::size_t(((i * b + j) * c + k) * d + l)];
    dpt::Tensor out = on(side, std::vector<float>(x.size(), NAN)), x_on = on(side, x);
    side.kernels.swap_axes_12(out.data(), x_on.data(), a, b, c, d);
    CHECK(bits_off(out.to_vector(), want) == 0);
  }
}

/// copy_columns: the (rows, cols) block moves, both ways (out of a wider
/// matrix, into one), and nothing outside the block is written.
inline void copy_columns_matches_oracle(const Side& side) {
  struct Case { int64_t rows, cols, out_stride, x_stride, out_at, x_at; };
  for (Case c : {Case{1, 1, 1, 1, 0, 0}, Case{5, 1, 3, 3, 2, 0}, Case{7, 3, 9, 3, 6, 0}, Case{7, 3, 3, 9, 0, 3},
                 Case{300, 40, 40, 120, 0, 80}, Case{2, 300, 900, 300, 300, 0}}) {
    INFO(c.rows << " x " << c.cols << " from stride " << c.x_stride << " + " << c.x_at << " to stride "
                << c.out_stride << " + " << c.out_at);
    std::vector<float> x = uniform(c.rows * c.x_stride, 5), out = uniform(c.rows * c.out_stride, 6);
    dpt::Tensor out_on = on(side, out), x_on = on(side, x);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.cols; ++j)
        out[std::size_t(r * c.out_stride + c.out_at + j)] = x[std::size_t(r * c.x_stride + c.x_at + j)];
    side.kernels.copy_columns(out_on.data() + c.out_at, c.out_stride, x_on.data() + c.x_at, c.x_stride, c.rows,
                              c.cols);
    CHECK(bits_off(out_on.to_vector(), out) == 0);
  }
}

// ----------------------------------------------------------------------------
// GELU: within its roundings of the tanh form in double

inline void gelu_match_oracle(const Side& side, int64_t n) {
  INFO(n << " elements");
  std::vector<float> x = uniform(n, 7, -6.0f, 6.0f), dout = uniform(n, 8);
  x[0] = 0.0f;
  std::vector<double> want(x.size()), tol(x.size()), dwant(x.size()), dtol(x.size());
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
  for (std::size_t i = 0; i < x.size(); ++i) {
    double v = x[i], t = std::tanh(k * (v + c * v * v * v)), du = k * (1 + 3 * c * v * v);
    want[i] = 0.5 * v * (1 + t);
    tol[i] = 8 * kU * std::fabs(v);
    dwant[i] = dout[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * du);
    dtol[i] = 16 * kU * (1 + std::fabs(v) * (1 + 3 * c * v * v)) * std::fabs(dout[i]);
  }
  dpt::Tensor x_on = on(side, x), dout_on = on(side, dout), out = on(side, std::vector<float>(x.size(), NAN));
  side.kernels.gelu(out.data(), x_on.data(), n);
  CHECK(off(out.to_vector(), want, tol) == 0);
  side.kernels.gelu_backward(out.data(), x_on.data(), dout_on.data(), n);
  CHECK(off(out.to_vector(), dwant, dtol) == 0);
}

}  // namespace dpt_test::transformer_checks
