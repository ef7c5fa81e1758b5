// transformer_row_checks.h — the specs of the row-wise transformer loops
// (layer norm, the causal softmax, their backwards), run like
// transformer_checks.h on the emulator and on cuda:0, against double-precision
// serial rows written here.
//
// Each row's sums are trees on the device, so each result is held to its
// formula's rounding bound: a sum of k terms within γ(k)·Σ|terms|
// (kernel_checks::float_sum_error_bound), carried through the formula below
// it, plus u = 2⁻²⁴ per float operation after it, all times 2 for the
// higher-order terms the bounds leave out. What they cannot pass: a term
// dropped or counted twice (a whole term, ≥ 1e-3 of these rows' sums, against
// bounds near 1e-6), a masked entry that is not exactly 0, a masked x read.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "support/transformer_checks.h"

namespace dpt_test::transformer_checks {

// ----------------------------------------------------------------------------
// layer norm

/// (rows, cols) to try: one column (its variance 0), one row, rows longer than
/// a block of 256 threads, more rows than the row plan's 1024 blocks.
inline std::vector<std::pair<int64_t, int64_t>> layer_norm_shapes(const Side& side) {
  std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {5, 1}, {1, 1000}, {7, 300}, {33, 128}};
  if (side.sizes != Sizes::small) shapes.push_back({1027, 3});
  if (side.sizes == Sizes::gpu) shapes.push_back({5000, 768});
  return shapes;
}

/// Forward: mean, rstd and out against the double row; backward: dx, dweight
/// and dbias against the double backward from the same (float) mean and rstd.
inline void layer_norm_matches_oracle(const Side& side) {
  const float eps = 1e-5f;
  for (auto [rows, cols] : layer_norm_shapes(side)) {
    INFO(rows << " x " << cols);
    std::vector<float> x = uniform(rows * cols, 9, -2.0f, 2.0f), w = uniform(cols, 10, 0.5f, 1.5f);
    std::vector<float> b = uniform(cols, 11), dout = uniform(rows * cols, 12);
    std::vector<double> mean(static_cast<std::size_t>(rows)), rstd(mean.size()), mean_tol(mean.size()), rstd_tol(mean.size());
    std::vector<double> out(x.size()), out_tol(x.size()), dx(x.size()), dx_tol(x.size());
    std::vector<double> dw(static_cast<std::size_t>(cols)), dw_tol(dw.size()), db(dw.size()), db_tol(dw.size());
    const double g_cols = kernel_checks::float_sum_error_bound(cols), g_rows = kernel_checks::float_sum_error_bound(rows);
    std::vector<float> mean_f(mean.size()), rstd_f(mean.size());
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * cols;
      double sum = 0, abs_sum = 0, squares = 0;
      for (int64_t j = 0; j < cols; ++j) sum += row[j], abs_sum += std::fabs(row[j]);
      const double mu = sum / double(cols), big_m = abs_sum / double(cols);
      for (int64_t j = 0; j < cols; ++j) squares += (row[j] - mu) * (row[j] - mu);
      const double s = 1.0 / std::sqrt(squares / double(cols) + double(eps));
      mean[std::size_t(r)] = mu, rstd[std::size_t(r)] = s;
      mean_tol[std::size_t(r)] = 2 * (g_cols * big_m + kU * std::fabs(mu));
      rstd_tol[std::size_t(r)] = 2 * (g_cols + 8 * kU) * s;
      mean_f[std::size_t(r)] = float(mu), rstd_f[std::size_t(r)] = float(s);
      for (int64_t j = 0; j < cols; ++j) {
        double xhat = (row[j] - mu) * s;
        out[std::size_t(r * cols + j)] = xhat * w[std::size_t(j)] + b[std::size_t(j)];
        out_tol[std::size_t(r * cols + j)] = 2 * (w[std::size_t(j)] * (s * (g_cols * big_m + kU * std::fabs(mu)) +
                                                                        std::fabs(xhat) * (g_cols + 12 * kU)) +
                                                  2 * kU * std::fabs(b[std::size_t(j)]));
      }
      // the backward, from the float mean and rstd the forward hands it
      const double fmu = mean_f[std::size_t(r)], fs = rstd_f[std::size_t(r)];
      double g_sum = 0, gx_sum = 0, g_abs = 0, gx_abs = 0;
      for (int64_t j = 0; j < cols; ++j) {
        double g = double(dout[std::size_t(r * cols + j)]) * w[std::size_t(j)], xhat = (row[j] - fmu) * fs;
        g_sum += g, gx_sum += g * xhat, g_abs += std::fabs(g), gx_abs += std::fabs(g * xhat);
      }
      for (int64_t j = 0; j < cols; ++j) {
        const std::size_t i = std::size_t(r * cols + j);
        double g = double(dout[i]) * w[std::size_t(j)], xhat = (row[j] - fmu) * fs;
        dx[i] = fs * (g - g_sum / double(cols) - xhat * gx_sum / double(cols));
        dx_tol[i] = 2 * fs * (g_cols + 8 * kU) * (std::fabs(g) + (g_abs + std::fabs(xhat) * gx_abs) / double(cols));
        dw[std::size_t(j)] += dout[i] * xhat, dw_tol[std::size_t(j)] += std::fabs(dout[i] * xhat);
        db[std::size_t(j)] += dout[i], db_tol[std::size_t(j)] += std::fabs(dout[i]);
      }
    }
    for (std::size_t j = 0; j < dw.size(); ++j) dw_tol[j] *= 2 * (g_rows + 6 * kU), db_tol[j] *= 2 * g_rows;

    dpt::Tensor x_on = on(side, x), w_on = on(side, w), b_on = on(side, b), dout_on = on(side, dout);
    dpt::Tensor out_on = on(side, std::vector<float>(x.size(), NAN)), mean_on = on(side, std::vector<float>(mean.size(), NAN));
    dpt::Tensor rstd_on = on(side, std::vector<float>(mean.size(), NAN));
    side.kernels.layer_norm(out_on.data(), mean_on.data(), rstd_on.data(), x_on.data(), w_on.data(), b_on.data(), rows,
                            cols, eps);
    CHECK(off(mean_on.to_vector(), mean, mean_tol) == 0);
    CHECK(off(rstd_on.to_vector(), rstd, rstd_tol) == 0);
    CHECK(off(out_on.to_vector(), out, out_tol) == 0);

    dpt::Tensor fmean = on(side, mean_f), frstd = on(side, rstd_f), dx_on = on(side, std::vector<float>(x.size(), NAN));
    dpt::Tensor dw_on = on(side, std::vector<float>(dw.size(), NAN)), db_on = on(side, std::vector<float>(dw.size(), NAN));
    side.kernels.layer_norm_backward(dx_on.data(), dw_on.data(), db_on.data(), dout_on.data(), x_on.data(),
                                     fmean.data(), frstd.data(), w_on.data(), rows, cols);
    CHECK(off(dx_on.to_vector(), dx, dx_tol) == 0);
    CHECK(off(dw_on.to_vector(), dw, dw_tol) == 0);
    CHECK(off(db_on.to_vector(), db, db_tol) == 0);
    // without dweight and dbias (not needed): dx alone, the same
    dx_on = on(side, std::vector<float>(x.size(), NAN));
    side.kernels.layer_norm_backward(dx_on.data(), nullptr, nullptr, dout_on.data(), x_on.data(), fmean.data(),
                                     frstd.data(), w_on.data(), rows, cols);
    CHECK(off(dx_on.to_vector(), dx, dx_tol) == 0);
  }
  // no rows: dweight and dbias are empty sums, 0
  dpt::Tensor dw_on = on(side, {NAN, NAN, NAN}), db_on = on(side, {NAN, NAN, NAN});
  side.kernels.layer_norm_backward(nullptr, dw_on.data(), db_on.data(), nullptr, nullptr, nullptr, nullptr, nullptr, 0, 3);
  CHECK(bits_off(dw_on.to_vector(), {0.0f, 0.0f, 0.0f}) == 0);
  CHECK(bits_off(db_on.to_vector(), {0.0f, 0.0f, 0.0f}) == 0);
}

// ----------------------------------------------------------------------------
// softmax

struct SoftmaxCase {
  int64_t rows, cols, period;  ///< period 0: no mask
};
/// No mask and causal; one column, one row, rows longer than a block, a
/// period of 1 (each row sees column 0 only), rows shorter than the period,
/// more rows than the row plan's 1024 blocks.
inline std::vector<SoftmaxCase> softmax_cases(const Side& side) {
  std::vector<SoftmaxCase> cases = {{1, 1, 0}, {1, 1000, 0}, {5, 300, 0}, {21, 7, 7},  {6, 5, 1},
                                    {10, 3, 5}, {2 * 40, 40, 40}, {1, 1, 1}};
  if (side.sizes != Sizes::small) cases.push_back({300, 300, 300}), cases.push_back({342 * 3, 3, 3});
  if (side.sizes == Sizes::gpu) cases.push_back({2 * 300, 300, 300}), cases.push_back({12 * 4 * 64, 64, 64});
  return cases;
}

/// softmax (masked x holds NaN and ∞, never read) and its backward against
/// the double rows; masked outputs and their gradients exactly 0.
inline void softmax_matches_oracle(const Side& side) {
  for (SoftmaxCase c : softmax_cases(side)) {
    INFO(c.rows << " x " << c.cols << (c.period > 0 ? ", causal with period " : ", no mask") << c.period);
    std::vector<float> x = uniform(c.rows * c.cols, 13, -4.0f, 4.0f), dy = uniform(c.rows * c.cols, 14);
    std::vector<double> y(x.size()), tol(x.size()), dx(x.size()), dx_tol(x.size());
    std::vector<float> y_f(x.size());
    std::vector<bool> masked(x.size());
    for (int64_t r = 0; r < c.rows; ++r) {
      const int64_t seen = c.period > 0 ? std::min(c.cols, r % c.period + 1) : c.cols;
      const std::size_t at = std::size_t(r * c.cols);
      double top = -INFINITY, sum = 0, spread = 0;
      for (int64_t j = seen; j < c.cols; ++j) x[at + std::size_t(j)] = j % 2 ? NAN : INFINITY, masked[at + std::size_t(j)] = true;
      for (int64_t j = 0; j < seen; ++j) top = std::max(top, double(x[at + std::size_t(j)]));
      for (int64_t j = 0; j < seen; ++j) sum += std::exp(x[at + std::size_t(j)] - top), spread = std::max(spread, top - x[at + std::size_t(j)]);
      const double g = kernel_checks::float_sum_error_bound(seen);
      double dot = 0, dot_abs = 0;
      for (int64_t j = 0; j < seen; ++j) {
        const std::size_t i = at + std::size_t(j);
        y[i] = std::exp(x[i] - top) / sum;
        tol[i] = 2 * (g + 9 * kU + kU * (top - x[i] + spread)) * y[i];
        y_f[i] = float(y[i]);
        dot += double(y_f[i]) * dy[i], dot_abs += std::fabs(double(y_f[i]) * dy[i]);
      }
      for (int64_t j = 0; j < seen; ++j) {
        const std::size_t i = at + std::size_t(j);
        dx[i] = y_f[i] * (dy[i] - dot);
        dx_tol[i] = 2 * std::fabs(y_f[i]) * ((g + 2 * kU) * dot_abs + 2 * kU * (std::fabs(dy[i]) + std::fabs(dot)));
      }
    }
    dpt::Tensor x_on = on(side, x), out = on(side, std::vector<float>(x.size(), NAN));
    side.kernels.softmax(out.data(), x_on.data(), c.rows, c.cols, c.period);
    std::vector<float> got = out.to_vector();
    int64_t masked_nonzero = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (masked[i]) masked_nonzero += !(got[i] == 0.0f), got[i] = 0.0f;  // y and tol are 0 there
    CHECK(masked_nonzero == 0);
    CHECK(off(got, y, tol) == 0);

    dpt::Tensor y_on = on(side, y_f), dy_on = on(side, dy), dx_on = on(side, std::vector<float>(x.size(), NAN));
    side.kernels.softmax_backward(dx_on.data(), y_on.data(), dy_on.data(), c.rows, c.cols);
    CHECK(off(dx_on.to_vector(), dx, dx_tol) == 0);  // masked: y = 0, so dx exactly 0 (tol 0)
  }
}

}  // namespace dpt_test::transformer_checks
