// batch_norm_checks.h — the specs of batch normalization's device loops
// (kernels.h, "batch normalization"), written once and run twice: on the CPU
// emulator of the GPU's kernel code by
// tests/core/test_batch_norm_kernels_emulated.cpp, and on cuda:0 by
// tests/gpu/test_gpu_batch_norm.cpp. The oracle is the host path, the CPU
// kernels batch_norm.cpp runs on host memory: its column sums are in double,
// so each of its results is the exact value rounded once to float (within
// u·|value|, u = 2⁻²⁴), and it shares no summation with the GPU's trees.
//
// Tolerances, argued per result (γ(k) = kernel_checks::float_sum_error_bound:
// a float sum's error per Σ|terms|, in any order), each doubled for the
// higher-order terms the bounds leave out:
// - mean: a sum of `rows` terms, then a division: γ(rows)·Σ|x|/rows, plus 2u
//   of the value (the division's rounding and the host's);
// - var: Σ (x − μ̃)² from a mean μ̃ off by δ (the bound above) is
//   M2 + rows·δ² (the first-order term Σ(x − μ)·δ is 0), each term rounded
//   three times (the difference, the square, the sum): var within
//   (γ(rows) + 4u)·(var + δ²) + δ². Columns at 100 ± 0.1 are in the inputs:
//   there Σx²/rows − mean² would be off by ~γ(rows)·10⁴, the whole variance;
// - inv_std and xhat: one IEEE operation each on the same floats, so the same
//   bits (nvcc without --use_fast_math keeps sqrtf and / correctly rounded);
// - y = xhat·w + b, the running averages, dx, evaluation: a few roundings
//   each, which nvcc may fuse into FMAs: 2u to 8u of the sum of the
//   magnitudes of the terms (stated at each check);
// - Σ dy and Σ dy·xhat: γ(rows) (+u for the product) of Σ|terms|, plus u.
// What they cannot pass: a row dropped or counted twice (a term of ~1/rows of
// the column against bounds of ~1e-5 relative), a column read from its
// neighbour, a variance from Σx² − mean² on the offset columns.
#pragma once

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "dpt/kernels.h"
#include "dpt/nn.h"
#include "dpt/tensor.h"
#include "support/catch.h"
#include "support/kernel_checks.h"

namespace dpt_test::batch_norm_checks {

using kernel_checks::Side;
using kernel_checks::Sizes;

constexpr double kU = 1.0 / 16777216.0;  // 2⁻²⁴

// ----------------------------------------------------------------------------
// inputs and comparisons

/// (rows, cols) to try: one row (var 0), 33 and 37 columns (not a multiple of
/// the 32-column tile or the 256-thread block), 130 rows (two row chunks:
/// the two-pass column sums), one column over 4 chunks, past 4096 rows (64
/// chunks of more than 64 rows).
inline std::vector<std::pair<int64_t, int64_t>> shapes(const Side& side) {
  std::vector<std::pair<int64_t, int64_t>> s = {{1, 3}, {2, 33}, {7, 37}, {130, 40}};
  if (side.sizes != Sizes::small) s.insert(s.end(), {{300, 1}, {4100, 70}});  // threads (sanitizers): seconds
  if (side.sizes == Sizes::gpu) s.push_back({8192, 1000});
  return s;
}

/// x (rows, cols): column c is offset_c + spread_c·u, u uniform in [−1, 1),
/// offsets and spreads cycling through (0, 1), (100, 0.1) and (−3, 2).
inline std::vector<float> columns_with_offsets(int64_t rows, int64_t cols, uint64_t seed) {
  const float offset[3] = {0.0f, 100.0f, -3.0f}, spread[3] = {1.0f, 0.1f, 2.0f};
  dpt::Rng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) x[std::size_t(r * cols + c)] = offset[c % 3] + spread[c % 3] * rng.uniform(-1.0f, 1.0f);
  return x;
}
/// n values uniform in [low, high).
inline std::vector<float> uniform(int64_t n, uint64_t seed, float low = -1.0f, float high = 1.0f) {
  dpt::Rng rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = rng.uniform(low, high);
  return v;
}
/// values on the side's device.
inline dpt::Tensor on(const Side& side, const std::vector<float>& values) {
  return dpt::Tensor::from_vector({int64_t(values.size())}, values, side.device);
}
/// n NaNs on the side's device: an output the kernel must write.
inline dpt::Tensor unwritten(const Side& side, int64_t n) { return on(side, std::vector<float>(std::size_t(n), NAN)); }

/// Entries with |got − want| > tol[i] (a NaN counts); INFO names the first.
inline int64_t off(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& tol) {
  int64_t count = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(double(got[i]) - double(want[i])) <= tol[i])) {
      if (count++ == 0) UNSCOPED_INFO("first at " << i << ": " << got[i] << " against " << want[i] << " ± " << tol[i]);
    }
  return got.size() == want.size() ? count : count + 1;
}
using kernel_checks::bits_off;

/// Per column: Σ_rows |term(r, c)|.
template <typename Term>
std::vector<double> column_abs_sums(int64_t rows, int64_t cols, Term term) {
  std::vector<double> s(std::size_t(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) s[std::size_t(c)] += std::fabs(double(term(r, c)));
  return s;
}

// ----------------------------------------------------------------------------
// the checks

/// batch_moments: mean and biased variance per column against the host path.
inline void moments_match_host(const Side& side) {
  dpt::Kernels& host = dpt::cpu_kernels();
  for (auto [rows, cols] : shapes(side)) {
    INFO(rows << " x " << cols);
    std::vector<float> x = columns_with_offsets(rows, cols, 31), mean(static_cast<std::size_t>(cols)), var(mean.size());
    host.batch_moments(mean.data(), var.data(), x.data(), rows, cols);
    dpt::Tensor x_on = on(side, x), mean_on = unwritten(side, cols), var_on = unwritten(side, cols);
    side.kernels.batch_moments(mean_on.data(), var_on.data(), x_on.data(), rows, cols);

    const double g = kernel_checks::float_sum_error_bound(rows);
    std::vector<double> abs_x = column_abs_sums(rows, cols, [&](int64_t r, int64_t c) { return x[std::size_t(r * cols + c)]; });
    std::vector<double> mean_tol(mean.size()), var_tol(mean.size());
    for (std::size_t c = 0; c < mean.size(); ++c) {
      double delta = g * abs_x[c] / double(rows) + 2 * kU * std::fabs(mean[c]);
      mean_tol[c] = 2 * delta;
      var_tol[c] = 2 * ((g + 4 * kU) * (var[c] + delta * delta) + delta * delta + kU * var[c]);
    }
    CHECK(off(mean_on.to_vector(), mean, mean_tol) == 0);
    CHECK(off(var_on.to_vector(), var, var_tol) == 0);
    if (rows == 1) {  // one row: the mean is the row, the variance exactly 0 (training refuses it: batch_norm's rule)
      CHECK(bits_off(mean_on.to_vector(), x) == 0);
      CHECK(bits_off(var_on.to_vector(), std::vector<float>(std::size_t(cols), 0.0f)) == 0);
    }
  }
}

/// batch_norm (normalize and affine) and batch_norm_running, from the same
/// float mean and var on both sides.
inline void forward_matches_host(const Side& side) {
  dpt::Kernels& host = dpt::cpu_kernels();
  const float eps = 1e-5f, momentum = 0.1f;
  for (auto [rows, cols] : shapes(side)) {
    INFO(rows << " x " << cols);
    std::vector<float> x = columns_with_offsets(rows, cols, 32), w = uniform(cols, 33, 0.5f, 1.5f), b = uniform(cols, 34);
    std::vector<float> mean(static_cast<std::size_t>(cols)), var(mean.size());
    host.batch_moments(mean.data(), var.data(), x.data(), rows, cols);
    std::vector<float> y(x.size()), xhat(x.size()), inv_std(mean.size());
    host.batch_norm(y.data(), xhat.data(), inv_std.data(), x.data(), mean.data(), var.data(), w.data(), b.data(), rows,
                    cols, eps);
    dpt::Tensor x_on = on(side, x), w_on = on(side, w), b_on = on(side, b), mean_on = on(side, mean), var_on = on(side, var);
    dpt::Tensor y_on = unwritten(side, rows * cols), xhat_on = unwritten(side, rows * cols), inv_on = unwritten(side, cols);
    side.kernels.batch_norm(y_on.data(), xhat_on.data(), inv_on.data(), x_on.data(), mean_on.data(), var_on.data(),
                            w_on.data(), b_on.data(), rows, cols, eps);
    CHECK(bits_off(inv_on.to_vector(), inv_std) == 0);
    CHECK(bits_off(xhat_on.to_vector(), xhat) == 0);
    std::vector<double> y_tol(y.size());  // one product and one sum: 2u of their magnitudes
    for (std::size_t i = 0; i < y.size(); ++i)
      y_tol[i] = 2 * kU * (std::fabs(xhat[i] * w[i % std::size_t(cols)]) + std::fabs(b[i % std::size_t(cols)]));
    CHECK(off(y_on.to_vector(), y, y_tol) == 0);

    if (rows < 2) continue;  // no unbiased variance of one row (batch_norm refuses it before)
    std::vector<float> running_mean = uniform(cols, 35), running_var = uniform(cols, 36, 0.5f, 2.0f);
    dpt::Tensor rm_on = on(side, running_mean), rv_on = on(side, running_var);
    const float unbias = float(rows) / float(rows - 1);
    std::vector<double> rm_tol(mean.size()), rv_tol(mean.size());  // (1 − m)·r + m·v: 4u of the terms
    for (std::size_t c = 0; c < mean.size(); ++c) {
      rm_tol[c] = 4 * kU * (std::fabs((1 - momentum) * running_mean[c]) + std::fabs(momentum * mean[c]));
      rv_tol[c] = 4 * kU * (std::fabs((1 - momentum) * running_var[c]) + std::fabs(momentum * var[c] * unbias));
    }
    host.batch_norm_running(running_mean.data(), running_var.data(), mean.data(), var.data(), momentum, unbias, cols);
    side.kernels.batch_norm_running(rm_on.data(), rv_on.data(), mean_on.data(), var_on.data(), momentum, unbias, cols);
    CHECK(off(rm_on.to_vector(), running_mean, rm_tol) == 0);
    CHECK(off(rv_on.to_vector(), running_var, rv_tol) == 0);
  }
}

/// batch_norm_gradient_sums and batch_norm_backward, from the same xhat and
/// inv_std; count > rows too (SyncBatchNorm's sums over every rank's rows).
inline void backward_matches_host(const Side& side) {
  dpt::Kernels& host = dpt::cpu_kernels();
  for (auto [rows, cols] : shapes(side)) {
    INFO(rows << " x " << cols);
    std::vector<float> dy = uniform(rows * cols, 41), xhat = uniform(rows * cols, 42, -2.0f, 2.0f);
    std::vector<float> w = uniform(cols, 43, 0.5f, 1.5f), inv_std = uniform(cols, 44, 0.5f, 3.0f);
    std::vector<float> s1(static_cast<std::size_t>(cols)), s2(s1.size());
    host.batch_norm_gradient_sums(s1.data(), s2.data(), dy.data(), xhat.data(), rows, cols);
    dpt::Tensor dy_on = on(side, dy), xhat_on = on(side, xhat), s1_on = unwritten(side, cols), s2_on = unwritten(side, cols);
    side.kernels.batch_norm_gradient_sums(s1_on.data(), s2_on.data(), dy_on.data(), xhat_on.data(), rows, cols);
    const double g = kernel_checks::float_sum_error_bound(rows);
    std::vector<double> a1 = column_abs_sums(rows, cols, [&](int64_t r, int64_t c) { return dy[std::size_t(r * cols + c)]; });
    std::vector<double> a2 = column_abs_sums(rows, cols, [&](int64_t r, int64_t c) {
      return double(dy[std::size_t(r * cols + c)]) * xhat[std::size_t(r * cols + c)];
    });
    std::vector<double> t1(s1.size()), t2(s1.size());
    for (std::size_t c = 0; c < s1.size(); ++c) {
      t1[c] = 2 * (g * a1[c] + kU * std::fabs(s1[c]));
      t2[c] = 2 * ((g + kU) * a2[c] + kU * std::fabs(s2[c]));
    }
    CHECK(off(s1_on.to_vector(), s1, t1) == 0);
    CHECK(off(s2_on.to_vector(), s2, t2) == 0);

    dpt::Tensor w_on = on(side, w), inv_on = on(side, inv_std), s1_same = on(side, s1), s2_same = on(side, s2);
    for (int64_t count : {rows, 4 * rows}) {
      INFO("statistics over " << count << " rows");
      std::vector<float> dx(dy.size());
      host.batch_norm_backward(dx.data(), dy.data(), xhat.data(), inv_std.data(), w.data(), s1.data(), s2.data(), count,
                               rows, cols);
      dpt::Tensor dx_on = unwritten(side, rows * cols);
      side.kernels.batch_norm_backward(dx_on.data(), dy_on.data(), xhat_on.data(), inv_on.data(), w_on.data(),
                                       s1_same.data(), s2_same.data(), count, rows, cols);
      std::vector<double> tol(dx.size());  // ~7 roundings, some fusable: 8u of the terms' magnitudes
      for (std::size_t i = 0; i < dx.size(); ++i) {
        std::size_t c = i % std::size_t(cols);
        tol[i] = 8 * kU * std::fabs(w[c] * inv_std[c]) *
                 (std::fabs(dy[i]) + std::fabs(s1[c] / float(count)) + std::fabs(xhat[i] * s2[c] / float(count)));
      }
      CHECK(off(dx_on.to_vector(), dx, tol) == 0);
    }
  }
}

/// batch_norm_inference from running statistics, one row included.
inline void inference_matches_host(const Side& side) {
  dpt::Kernels& host = dpt::cpu_kernels();
  const float eps = 1e-5f;
  for (auto [rows, cols] : shapes(side)) {
    INFO(rows << " x " << cols);
    std::vector<float> x = columns_with_offsets(rows, cols, 51), w = uniform(cols, 52, 0.5f, 1.5f), b = uniform(cols, 53);
    std::vector<float> mean = uniform(cols, 54, -1.0f, 1.0f), var = uniform(cols, 55, 0.0f, 4.0f), y(x.size());
    for (std::size_t c = 0; c < mean.size(); ++c) mean[c] += c % 3 == 1 ? 100.0f : 0.0f;  // x's offsets
    host.batch_norm_inference(y.data(), x.data(), mean.data(), var.data(), w.data(), b.data(), rows, cols, eps);
    dpt::Tensor y_on = unwritten(side, rows * cols);
    side.kernels.batch_norm_inference(y_on.data(), on(side, x).data(), on(side, mean).data(), on(side, var).data(),
                                      on(side, w).data(), on(side, b).data(), rows, cols, eps);
    std::vector<double> tol(y.size());  // 6 roundings, some fusable: 8u of the terms' magnitudes
    for (std::size_t i = 0; i < y.size(); ++i) {
      std::size_t c = i % std::size_t(cols);
      tol[i] = 8 * kU * (std::fabs((x[i] - mean[c]) * w[c]) / std::sqrt(var[c] + eps) + std::fabs(b[c]));
    }
    CHECK(off(y_on.to_vector(), y, tol) == 0);
  }
}

}  // namespace dpt_test::batch_norm_checks
