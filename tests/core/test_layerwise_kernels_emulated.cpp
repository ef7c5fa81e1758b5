// test_layerwise_kernels_emulated.cpp — LARS's and LAMB's GPU kernels
// (cuda_elementwise.cuh's lars_kernel, lamb_direction_kernel and
// lamb_apply_kernel, with cuda_reductions.cuh's Σ x² for the layer's norms)
// on the CPU emulator, driven as optim_layerwise.cpp drives them on a layer,
// against the papers' rules written out here serially in double. The twin
// check (kernel_checks.h's layerwise_optimizers_match_cpu) holds the same
// kernels to the CPU's, which shares kernel_math.h's formulas with them; this
// one shares nothing with them but the rule.
//
// Tolerance, argued: the layer's squared norms are float tree sums of n = 1001
// terms, within γ(n) = kernel_checks::float_sum_error_bound(n) ≈ 1.5e-5 of
// Σ x² (all terms positive: relative); a norm is a square root (half that),
// a trust ratio one or two of them, a division and a few roundings: within
// γ(n) + 8u. Three steps carry each ratio's error into the velocity (LARS) or
// apply it once a step (LAMB), so the update p − p₀ is within 3·(γ(n) + 8u)
// of its size (≤ 5e-5), plus p's own rounding, u·|p| a step, which is 3u·|p|
// over updates of ≥ 0.1·|p| here (≤ 2e-6): 1e-4 relative (normwise) covers
// both. Measured: ~2e-6 (LARS) and ~3e-6 (LAMB). What fails it: λ left out of
// LARS's denominator (~10 % of the ratio here), a norm not square-rooted,
// the two norms swapped, the ratio on the wrong side, a missing bias
// correction (×10 on LAMB's first step).
#include <cmath>
#include <vector>

#include "dpt/device.h"
#include "dpt/kernels.h"
#include "support/catch.h"
#include "support/l2_norm.h"
#include "support/emulated_kernels.h"

namespace {

constexpr int64_t kN = 1001;  // one layer: past a 256-thread block, not a multiple of it
constexpr int kKernelSteps = 3;
constexpr double kKernelTolerance = 1e-4;

using Values = std::vector<double>;

std::vector<float> wave(double seed, double scale) {
  std::vector<float> v(static_cast<std::size_t>(kN));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(scale * std::cos(seed + 0.9 * double(i)));
  return v;
}
// max |(got − start) − (want − start)| / max |want − start|: the update's error.
double update_error(const std::vector<float>& got, const Values& want, const std::vector<float>& start) {
  double worst = 0, size = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
    size = std::max(size, std::fabs(want[i] - double(start[i])));
  }
  return std::isnan(worst) || size == 0 ? INFINITY : worst / size;
}

}  // namespace

TEST_CASE("emulated cuda LARS on a layer, norms then step, follows the trust-ratio rule over 3 steps",
          "[emulator][optim]") {
  dpt::Kernels& k = dpt_test::emulated_cuda_kernels();
  const dpt::LarsStep s{2.0f, 0.9f, 0.1f, 0.02f, 1e-8f};
  for (double scale : {1.0, 0.0}) {  // a layer, and a zero layer (ratio 1)
    INFO("weights of size " << scale);
    std::vector<float> p = wave(0.3, scale), start = p, v(p.size(), NAN), squares(2, NAN);
    Values w(p.begin(), p.end()), vel(p.size());
    for (int t = 1; t <= kKernelSteps; ++t) {
      std::vector<float> g = wave(1.7 * t, 0.5);
      k.sum_squares(squares.data(), p.data(), kN);  // optim_layerwise.cpp's order
      k.sum_squares(squares.data() + 1, g.data(), kN);
      k.lars_step(p.data(), v.data(), g.data(), squares.data(), s, t == 1, kN);
      // η‖w‖ / (‖g‖ + λ‖w‖ + ε), 1 at a zero norm; d = ratio·(g + λw); v = d or μv + d; w −= lr·v
      Values gd(g.begin(), g.end());
      double wn = dpt_test::l2_norm(w), gn = dpt_test::l2_norm(gd);
      double ratio = wn > 0 && gn > 0 ? s.trust_coefficient * wn / (gn + s.weight_decay * wn + s.eps) : 1.0;
      for (std::size_t i = 0; i < w.size(); ++i) {
        double d = ratio * (gd[i] + s.weight_decay * w[i]);
        vel[i] = t == 1 ? d : s.momentum * vel[i] + d;
        w[i] -= s.lr * vel[i];
      }
    }
    CHECK(update_error(p, w, start) <= kKernelTolerance);
  }
}

TEST_CASE("emulated cuda LAMB on a layer, direction, norms then apply, follows its rule over 3 steps",
          "[emulator][optim]") {
  dpt::Kernels& k = dpt_test::emulated_cuda_kernels();
  const double lr = 0.05, beta1 = 0.9, beta2 = 0.999, eps = 1e-6, decay = 0.1;
  for (double scale : {1.0, 0.0}) {  // a layer, and a zero layer (ratio 1)
    INFO("weights of size " << scale);
    std::vector<float> p = wave(0.5, scale), start = p, m(p.size(), 0.0f), v(p.size(), 0.0f), u(p.size(), NAN);
    std::vector<float> squares(2, NAN);
    Values w(p.begin(), p.end()), mo(p.size(), 0.0), ve(p.size(), 0.0), ud(p.size());
    for (int t = 1; t <= kKernelSteps; ++t) {
      std::vector<float> g = wave(2.1 * t, 0.5);
      dpt::AdamStep step = dpt::AdamStep{float(lr), float(beta1), float(beta2), float(eps), float(decay), false}.at_step(t);
      k.lamb_direction(u.data(), m.data(), v.data(), p.data(), g.data(), step, kN);  // optim_layerwise.cpp's order
      k.sum_squares(squares.data(), p.data(), kN);
      k.sum_squares(squares.data() + 1, u.data(), kN);
      k.lamb_apply(p.data(), u.data(), squares.data(), float(lr), kN);
      // Adam's m̂, v̂; u = m̂/(√v̂ + ε) + λw; w −= lr·(‖w‖/‖u‖)·u, 1 at a zero norm
      for (std::size_t i = 0; i < w.size(); ++i) {
        mo[i] = beta1 * mo[i] + (1 - beta1) * g[i];
        ve[i] = beta2 * ve[i] + (1 - beta2) * double(g[i]) * g[i];
        double m_hat = mo[i] / (1 - std::pow(beta1, t)), v_hat = ve[i] / (1 - std::pow(beta2, t));
        ud[i] = m_hat / (std::sqrt(v_hat) + eps) + decay * w[i];
      }
      double wn = dpt_test::l2_norm(w), un = dpt_test::l2_norm(ud), ratio = wn > 0 && un > 0 ? wn / un : 1.0;
      for (std::size_t i = 0; i < w.size(); ++i) w[i] -= lr * ratio * ud[i];
    }
    CHECK(update_error(p, w, start) <= kKernelTolerance);
  }
}
