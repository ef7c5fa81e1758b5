// gradcheck.h — finite-difference oracle shared by the tests.
//
// The oracle shares no code with autograd: it only evaluates the forward
// function, nudging one element at a time by ±eps (central differences).
//
// Tolerance, argued: values are float32 (relative rounding u ≈ 6e-8) and the
// test losses are O(1)…O(100), so rounding in f(x±eps) contributes about
// |f|·u/eps ≈ 100·6e-8/1e-2 ≈ 6e-4 to the estimate; truncation adds
// eps²/6·|f'''| ≈ 2e-5·|f'''|. The test functions are built so gradient
// entries are O(1) (random weights r in  Σ r·op(x)), so a 1e-2·max(1,|g|)
// bound is ~10× above the noise and ~100× below any real mistake (a missing
// 1/B, a transpose, a dropped term change entries by O(1)).
#pragma once

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "dpt/autograd.h"
#include "dpt/nn.h"  // Rng
#include "dpt/ops.h"
#include "dpt/tensor.h"

namespace dpt_test {

/// Central-difference gradient of scalar `f` with respect to `x` (no autograd).
inline std::vector<float> numeric_gradient(const std::function<dpt::Tensor()>& f, dpt::Tensor x,
                                           float eps = 1e-2f) {
  dpt::NoGradGuard no_grad;
  std::vector<float> grad(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) {
    float saved = x.data()[i];
    x.data()[i] = saved + eps;
    double up = f().item();
    x.data()[i] = saved - eps;
    double down = f().item();
    x.data()[i] = saved;
    grad[i] = float((up - down) / (2.0 * eps));
  }
  return grad;
}

/// Largest |analytic − numeric| / max(1, |numeric|) over all elements.
inline double max_relative_error(const std::vector<float>& analytic, const std::vector<float>& numeric) {
  double worst = 0;
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    double scale = std::max(1.0, double(std::abs(numeric[i])));
    worst = std::max(worst, std::abs(double(analytic[i]) - double(numeric[i])) / scale);
  }
  return worst;
}

/// backward() of `loss` once with every input a leaf that requires grad, then
/// each input's gradient against finite differences: entry k is input k's
/// max_relative_error (infinity when backward gave it no gradient).
inline std::vector<double> gradient_errors(const std::function<dpt::Tensor()>& loss,
                                           std::vector<dpt::Tensor> inputs) {
  for (auto& in : inputs) {
    in.set_requires_grad(true);
    in.zero_grad();
  }
  loss().backward();
  std::vector<double> errors;
  for (auto& in : inputs) {
    if (!in.grad().defined()) {
      errors.push_back(std::numeric_limits<double>::infinity());
      continue;
    }
    errors.push_back(max_relative_error(in.grad().to_vector(), numeric_gradient(loss, in)));
  }
  return errors;
}

/// A tensor of normal(0,1)·scale values with |v| ≥ margin (away from ReLU's kink).
inline dpt::Tensor random_tensor(const dpt::Shape& shape, dpt::Rng& rng, float scale = 1.0f,
                                 float margin = 0.0f) {
  dpt::Tensor t = dpt::Tensor::empty(shape, dpt::Device::host());
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = rng.normal() * scale;
    if (std::abs(v) < margin) v = v < 0 ? -margin : margin;
    t.data()[i] = v;
  }
  return t;
}

}  // namespace dpt_test
