// test_optim_layerwise.cpp — LARS and LAMB against their formulas written out
// here, serially, in double (You, Gitman & Ginsburg 2017; You et al. 2019),
// over several steps, on a 2-D weight (its own trust ratio and weight decay)
// and a 1-D bias (neither: plain momentum SGD / plain Adam), and at the zero
// norms where the ratio falls back to 1. torch.optim has no LARS or LAMB, so
// there is no PyTorch cross-check; the oracle is the papers' rule with the
// conventions optim.h states (timm's and Apex's).
//
// Tolerance, argued once: the values are of order 1 and each element passes
// through ~20 float operations a step (a few more through the layer's norm,
// a sum of 12 squares), each off by at most 2⁻²⁴ ≈ 6e-8 relative; over 5
// steps that stays below 1e-5 absolute. Every planted mistake (no ratio, the
// ratio or the decay on the bias, λ left out of LARS's denominator, no bias
// correction) moves some element by more than 1e-4.
#include <cmath>
#include <vector>

#include "dpt/optim_layerwise.h"
#include "support/catch.h"
#include "support/l2_norm.h"

using namespace dpt;

namespace {

constexpr double kTolerance = 1e-5;
constexpr int kSteps = 5;

using Values = std::vector<double>;

// A parameter of `shape`, values in about [-1, 1] from a seed.
Tensor make_param(const Shape& shape, double seed) {
  std::vector<float> values(std::size_t(shape_numel(shape)));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = float(std::cos(seed + 0.9 * double(i)));
  return Tensor::from_vector(shape, values, Device::host()).set_requires_grad(true);
}

// Step t's gradient for a parameter of n elements (floats, given alike to the
// optimizer and the oracle), `scale` its size.
std::vector<float> gradient(std::size_t n, int t, double seed, double scale) {
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = float(scale * std::sin(seed + 1.3 * double(i) + 0.7 * double(t)));
  return g;
}

Values as_double(const std::vector<float>& f) { return Values(f.begin(), f.end()); }


double max_diff(const Tensor& got, const Values& want) {
  std::vector<float> g = got.to_vector();
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(double(g[i]) - want[i]));
  return std::isnan(worst) ? INFINITY : worst;
}

// ----------------------------------------------------------------------------
// the oracles: one parameter, one step, in double

struct LarsRule {
  double lr, momentum, weight_decay, trust, eps;
};

// LARS: ρ = η‖w‖/(‖g‖ + λ‖w‖ + ε) on a matrix (1 at a zero norm), 1 on a
// vector, whose λ is 0; d = ρ(g + λw); v = d at first, else μv + d; w −= lr·v.
void lars_oracle(Values& w, Values& v, const Values& g, bool matrix, const LarsRule& r, bool first) {
  double ratio = 1, decay = matrix ? r.weight_decay : 0;
  double wn = dpt_test::l2_norm(w), gn = dpt_test::l2_norm(g);
  if (matrix && wn > 0 && gn > 0) ratio = r.trust * wn / (gn + r.weight_decay * wn + r.eps);
  for (std::size_t i = 0; i < w.size(); ++i) {
    double d = ratio * (g[i] + decay * w[i]);
    v[i] = first ? d : r.momentum * v[i] + d;
    w[i] -= r.lr * v[i];
  }
}

struct LambRule {
  double lr, beta1, beta2, eps, weight_decay;
};

// LAMB at step t (from 1): Adam's m̂, v̂; u = m̂/(√v̂ + ε) + λw (λ = 0 on a
// vector); ρ = ‖w‖/‖u‖ on a matrix (1 at a zero norm), 1 on a vector; w −= lr·ρ·u.
void lamb_oracle(Values& w, Values& m, Values& v, const Values& g, bool matrix, const LambRule& r, int t) {
  double decay = matrix ? r.weight_decay : 0;
  Values u(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    m[i] = r.beta1 * m[i] + (1 - r.beta1) * g[i];
    v[i] = r.beta2 * v[i] + (1 - r.beta2) * g[i] * g[i];
    double m_hat = m[i] / (1 - std::pow(r.beta1, t)), v_hat = v[i] / (1 - std::pow(r.beta2, t));
    u[i] = m_hat / (std::sqrt(v_hat) + r.eps) + decay * w[i];
  }
  double wn = dpt_test::l2_norm(w), un = dpt_test::l2_norm(u);
  double ratio = matrix && wn > 0 && un > 0 ? wn / un : 1;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] -= r.lr * ratio * u[i];
}

// A 3×4 weight and a 4-element bias, trained kSteps steps by `opt` and by
// `oracle(w, g, matrix, t)` (t from 1); the two must agree after every step.
template <typename Oracle>
void check_against_oracle(Optimizer& opt, Tensor& weight, Tensor& bias, double grad_scale, Oracle oracle) {
  Values w = as_double(weight.to_vector()), b = as_double(bias.to_vector());
  for (int t = 1; t <= kSteps; ++t) {
    std::vector<float> gw = gradient(12, t, 0.3, grad_scale), gb = gradient(4, t, 2.1, grad_scale);
    weight.set_grad(Tensor::from_vector({3, 4}, gw, Device::host()));
    bias.set_grad(Tensor::from_vector({4}, gb, Device::host()));
    opt.step();
    oracle(w, as_double(gw), true, t);
    oracle(b, as_double(gb), false, t);
    INFO("after step " << t);
    CHECK(max_diff(weight, w) <= kTolerance);
    CHECK(max_diff(bias, b) <= kTolerance);
  }
}

}  // namespace

// ----------------------------------------------------------------------------
// LARS

TEST_CASE("LARS follows the trust-ratio rule on a matrix and plain momentum on a bias, 5 steps", "[optim]") {
  const LarsRule rule{2.0, 0.9, 0.1, 0.02, 1e-8};
  Tensor weight = make_param({3, 4}, 0.5), bias = make_param({4}, 1.7);
  LARS lars({weight, bias}, float(rule.lr), float(rule.momentum), float(rule.weight_decay), float(rule.trust),
            float(rule.eps));
  Values vw(12), vb(4);
  check_against_oracle(lars, weight, bias, 1.0, [&](Values& w, const Values& g, bool matrix, int t) {
    lars_oracle(w, matrix ? vw : vb, g, matrix, rule, t == 1);
  });
  CHECK(lars.state_bytes() == 16 * sizeof(float));  // one velocity float per element
}

TEST_CASE("make_optimizer(\"lars\") is LARS with mu 0.9, eta 0.001, eps 1e-8 and no weight decay", "[optim]") {
  const LarsRule rule{5.0, 0.9, 0.0, 1e-3, 1e-8};
  Tensor weight = make_param({3, 4}, 0.2), bias = make_param({4}, 1.1);
  auto lars = make_optimizer("lars", {weight, bias}, float(rule.lr));
  CHECK(lars->name() == "lars");
  Values vw(12), vb(4);
  check_against_oracle(*lars, weight, bias, 0.5, [&](Values& w, const Values& g, bool matrix, int t) {
    lars_oracle(w, matrix ? vw : vb, g, matrix, rule, t == 1);
  });
}

TEST_CASE("LARS moves a layer by lr * eta of its norm whatever the gradient's scale", "[optim]") {
  // λ = 0, first step: Δw = lr·η‖w‖·g/(‖g‖ + ε), so ‖Δw‖ = lr·η‖w‖ to ε/‖g‖.
  for (double scale : {1e-3, 1.0, 1e3}) {
    Tensor weight = make_param({3, 4}, 0.4);
    Values before = as_double(weight.to_vector());
    LARS lars({weight}, 10.0f);
    weight.set_grad(Tensor::from_vector({3, 4}, gradient(12, 1, 0.3, scale), Device::host()));
    lars.step();
    Values step = as_double(weight.to_vector());
    for (std::size_t i = 0; i < step.size(); ++i) step[i] -= before[i];
    INFO("gradient scale " << scale);
    CHECK(std::fabs(dpt_test::l2_norm(step) / (10.0 * 1e-3 * dpt_test::l2_norm(before)) - 1.0) <= 1e-4);
  }
}

TEST_CASE("LARS at a zero norm: the ratio is 1, so a zero weight takes the plain step and a zero "
          "gradient only the decay",
          "[optim]") {
  const double lr = 0.5, decay = 0.1;
  SECTION("zero weight") {
    Tensor weight = Tensor::zeros({3, 4}, Device::host()).set_requires_grad(true);
    LARS lars({weight}, float(lr), 0.9f, float(decay));
    std::vector<float> g = gradient(12, 1, 0.3, 1.0);
    weight.set_grad(Tensor::from_vector({3, 4}, g, Device::host()));
    lars.step();  // ρ = 1, d = g + λ·0: w = −lr·g
    Values want(12);
    for (std::size_t i = 0; i < 12; ++i) want[i] = -lr * g[i];
    CHECK(max_diff(weight, want) <= kTolerance);
  }
  SECTION("zero gradient") {
    Tensor weight = make_param({3, 4}, 0.6);
    Values want = as_double(weight.to_vector());
    LARS lars({weight}, float(lr), 0.9f, float(decay));
    weight.set_grad(Tensor::zeros({3, 4}, Device::host()));
    lars.step();  // ρ = 1, d = λw: w·(1 − lr·λ)
    for (double& x : want) x *= 1 - lr * decay;
    CHECK(max_diff(weight, want) <= kTolerance);
  }
}

// ----------------------------------------------------------------------------
// LAMB

TEST_CASE("LAMB follows the trust-ratio rule on a matrix and plain Adam on a bias, 5 steps", "[optim]") {
  const LambRule rule{0.05, 0.8, 0.99, 1e-6, 0.2};
  Tensor weight = make_param({3, 4}, 0.5), bias = make_param({4}, 1.7);
  LAMB lamb({weight, bias}, float(rule.lr), float(rule.beta1), float(rule.beta2), float(rule.eps),
            float(rule.weight_decay));
  Values mw(12), vw(12), mb(4), vb(4);
  check_against_oracle(lamb, weight, bias, 1.0, [&](Values& w, const Values& g, bool matrix, int t) {
    lamb_oracle(w, matrix ? mw : mb, matrix ? vw : vb, g, matrix, rule, t);
  });
  CHECK(lamb.state_bytes() == 2 * 16 * sizeof(float));  // m and v
}

TEST_CASE("make_optimizer(\"lamb\") is LAMB with betas 0.9, 0.999, eps 1e-6 and weight decay 0.01", "[optim]") {
  const LambRule rule{0.02, 0.9, 0.999, 1e-6, 0.01};
  Tensor weight = make_param({3, 4}, 0.2), bias = make_param({4}, 1.1);
  auto lamb = make_optimizer("lamb", {weight, bias}, float(rule.lr));
  CHECK(lamb->name() == "lamb");
  Values mw(12), vw(12), mb(4), vb(4);
  check_against_oracle(*lamb, weight, bias, 0.5, [&](Values& w, const Values& g, bool matrix, int t) {
    lamb_oracle(w, matrix ? mw : mb, matrix ? vw : vb, g, matrix, rule, t);
  });
}

TEST_CASE("LAMB at a zero norm: the ratio is 1, never 0/0", "[optim]") {
  SECTION("zero weight takes Adam's step") {
    Tensor weight = Tensor::zeros({3, 4}, Device::host()).set_requires_grad(true);
    LAMB lamb({weight}, 0.1f);
    std::vector<float> g = gradient(12, 1, 0.3, 1.0);
    weight.set_grad(Tensor::from_vector({3, 4}, g, Device::host()));
    lamb.step();  // t = 1: m̂ = g, v̂ = g², u = g/(|g| + ε); ρ = 1
    Values want(12);
    for (std::size_t i = 0; i < 12; ++i) want[i] = -0.1 * g[i] / (std::fabs(double(g[i])) + 1e-6);
    CHECK(max_diff(weight, want) <= kTolerance);
  }
  SECTION("zero gradient and no decay leave the weight as it was") {
    Tensor weight = make_param({3, 4}, 0.6);
    std::vector<float> before = weight.to_vector();
    LAMB lamb({weight}, 0.1f, 0.9f, 0.999f, 1e-6f, 0.0f);
    weight.set_grad(Tensor::zeros({3, 4}, Device::host()));
    lamb.step();  // u = 0: ‖w‖/‖u‖ would be ∞, and ∞·0 a NaN
    CHECK(weight.to_vector() == before);
  }
  SECTION("zero gradient with decay shrinks the layer by exactly 1 - lr") {
    Tensor weight = make_param({3, 4}, 0.6);
    Values want = as_double(weight.to_vector());
    LAMB lamb({weight}, 0.1f, 0.9f, 0.999f, 1e-6f, 0.3f);
    weight.set_grad(Tensor::zeros({3, 4}, Device::host()));
    lamb.step();  // u = λw, ρ = ‖w‖/(λ‖w‖): w − lr·w
    for (double& x : want) x *= 1 - 0.1;
    CHECK(max_diff(weight, want) <= kTolerance);
  }
}

TEST_CASE("LARS and LAMB hold their state on the parameters' device and free their scratch", "[optim][device]") {
  Device& dev = Device::cpu(42);
  Tensor p = Tensor::zeros({100, 10}, dev).set_requires_grad(true);
  p.set_grad(Tensor::full({100, 10}, 0.5f, dev));
  std::size_t before = dev.current_bytes();
  LARS lars({p}, 1.0f);
  lars.step();
  CHECK(dev.current_bytes() - before == 1000 * sizeof(float));  // the velocity; the norms are gone
  LAMB lamb({p}, 0.01f);
  lamb.step();
  CHECK(dev.current_bytes() - before == 3 * 1000 * sizeof(float));  // + m and v; u and the norms are gone
}

TEST_CASE("is_layer_adapted: matrices are, biases and scalars are not", "[optim]") {
  CHECK(is_layer_adapted(Tensor::zeros({3, 4}, Device::host())));
  CHECK(is_layer_adapted(Tensor::zeros({2, 3, 4}, Device::host())));
  CHECK_FALSE(is_layer_adapted(Tensor::zeros({4}, Device::host())));
  CHECK_FALSE(is_layer_adapted(Tensor::zeros({}, Device::host())));
}
