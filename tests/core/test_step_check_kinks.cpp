// test_step_check_kinks.cpp — the step check against a run that sums in
// another order, as cuBLAS does at a rank's batch size: a ReLU input planted
// within rounding of 0 flips between the two, which the check must allow, and
// every planted mistake must still fail it.
//
// The "other run" is this file's own serial MLP pass (plain loops, every sum
// in reverse order), sharing no code with the check (dpt's ops and
// dpt/kink_allowance.h).
#include "support/catch.h"
#include <cmath>
#include <vector>

#include "dpt/data.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/kink_allowance.h"
#include "dpt/step_check.h"

using namespace dpt;

namespace {
using Rows = std::vector<std::vector<float>>;  // [sample][unit]

struct SerialPass {
  std::vector<Rows> z;      // per layer: pre-activations (B, out)
  std::vector<float> grad;  // of the mean cross-entropy, parameters() order
};

float at(const Tensor& t, int64_t i) { return t.to_vector()[std::size_t(i)]; }

// Forward and backward of `model` on `batch`, every sum from its last term to its first.
SerialPass reverse_order_pass(const MLP& model, const Batch& batch) {
  const auto& layers = model.layers();
  const std::size_t L = layers.size(), B = batch.y.size();
  const std::vector<float> xs = batch.x.to_vector();
  std::vector<Rows> inputs(L);
  SerialPass pass;
  Rows a(B, std::vector<float>(xs.size() / B));
  for (std::size_t s = 0; s < B; ++s)
    for (std::size_t j = 0; j < a[s].size(); ++j) a[s][j] = xs[s * a[s].size() + j];
  for (std::size_t l = 0; l < L; ++l) {
    const std::vector<float> w = layers[l].weight.to_vector(), b = layers[l].bias.to_vector();
    const std::size_t out = b.size(), in = a[0].size();
    inputs[l] = a;
    Rows z(B, std::vector<float>(out));
    for (std::size_t s = 0; s < B; ++s)
      for (std::size_t o = 0; o < out; ++o) {
        float sum = 0;
        for (std::size_t j = in; j-- > 0;) sum += w[o * in + j] * a[s][j];
        z[s][o] = sum + b[o];
      }
    pass.z.push_back(z);
    if (l + 1 < L)
      for (auto& row : z)
        for (float& v : row) v = v > 0 ? v : 0.0f;
    a = z;
  }
  Rows dz = pass.z.back();
  for (std::size_t s = 0; s < B; ++s) {
    float top = dz[s][0], total = 0;
    for (float v : dz[s]) top = std::max(top, v);
    for (float& v : dz[s]) total += (v = std::exp(v - top));
    for (float& v : dz[s]) v /= total;
    dz[s][std::size_t(batch.y[s])] -= 1.0f;
    for (float& v : dz[s]) v /= float(B);
  }
  std::vector<std::vector<float>> parts(2 * L);
  for (std::size_t l = L; l-- > 0;) {
    const std::vector<float> w = layers[l].weight.to_vector();
    const std::size_t out = dz[0].size(), in = inputs[l][0].size();
    for (std::size_t o = 0; o < out; ++o) {
      for (std::size_t j = 0; j < in; ++j) {
        float sum = 0;
        for (std::size_t s = B; s-- > 0;) sum += dz[s][o] * inputs[l][s][j];
        parts[2 * l].push_back(sum);
      }
    }
    for (std::size_t o = 0; o < out; ++o) {
      float sum = 0;
      for (std::size_t s = B; s-- > 0;) sum += dz[s][o];
      parts[2 * l + 1].push_back(sum);
    }
    if (l == 0) break;
    Rows below(B, std::vector<float>(in));
    for (std::size_t s = 0; s < B; ++s)
      for (std::size_t j = 0; j < in; ++j) {
        float sum = 0;
        for (std::size_t o = out; o-- > 0;) sum += dz[s][o] * w[o * in + j];
        below[s][j] = pass.z[l - 1][s][j] > 0 ? sum : 0.0f;
      }
    dz = below;
  }
  for (auto& part : parts) pass.grad.insert(pass.grad.end(), part.begin(), part.end());
  return pass;
}

// dpt's own pre-activation of `unit` in layer `layer` for sample `sample`.
float dpt_preactivation(const MLP& model, const Batch& batch, std::size_t layer, int64_t sample, int64_t unit) {
  Tensor h = batch.x;
  for (std::size_t l = 0; l < layer; ++l) h = relu(model.layers()[l].forward(h));
  Tensor z = model.layers()[layer].forward(h);
  return at(z, sample * z.size(1) + unit);
}

// Moves `unit`'s bias until dpt and the reverse-order pass disagree on the sign
// of its pre-activation for `sample`: a ReLU on its kink. False if no bias does.
bool plant_kink(MLP& model, const Batch& batch, std::size_t layer, int64_t sample, int64_t unit) {
  float* bias = model.parameters()[2 * layer + 1].data() + unit;
  const double w_dot_a = double(reverse_order_pass(model, batch).z[layer][std::size_t(sample)][std::size_t(unit)]) -
                         double(*bias);
  const float centre = float(-w_dot_a);  // z ≈ 0: try the floats nearest it, alternately below and above
  for (int m = 0; m < 200; ++m) {
    float b = centre;
    for (int i = 0; i < (m + 1) / 2; ++i) b = std::nextafter(b, m % 2 ? 1e9f : -1e9f);
    *bias = b;
    const float ours = dpt_preactivation(model, batch, layer, sample, unit);
    const float theirs = reverse_order_pass(model, batch).z[layer][std::size_t(sample)][std::size_t(unit)];
    if (ours != 0 && theirs != 0 && (ours > 0) != (theirs > 0)) return true;
  }
  return false;
}

// A batch whose inputs span four decades, so sums in two orders differ.
Batch wide_batch(int64_t rows, int64_t features, uint64_t seed) {
  Rng rng(seed);
  Batch batch{Tensor::zeros({rows, features}, Device::host()), {}};
  float* x = batch.x.data();
  for (int64_t i = 0; i < rows * features; ++i) x[i] = float(rng.normal() * std::pow(10.0, 4.0 * rng.uniform() - 2.0));
  for (int64_t i = 0; i < rows; ++i) batch.y.push_back(i % 4);
  return batch;
}

struct KinkedProblem {
  MLP model;
  Batch batch;
};

// A 48-12-12-4 MLP on 8 samples with a kink planted in each hidden layer.
KinkedProblem kinked_problem() {
  Rng rng(7);
  KinkedProblem p{MLP({48, 12, 12, 4}, Device::host(), rng), wide_batch(8, 48, 11)};
  REQUIRE(plant_kink(p.model, p.batch, 0, 2, 5));
  REQUIRE(plant_kink(p.model, p.batch, 1, 6, 3));
  return p;
}
}  // namespace

TEST_CASE("step check: a run summing in another order passes where its ReLUs flip on their kinks", "[core]") {
  KinkedProblem p = kinked_problem();
  const std::vector<float> other = reverse_order_pass(p.model, p.batch).grad;
  const StepComparison c = compare_step_gradient(p.model, p.batch, other);
  INFO("without the allowance " << c.raw_difference << ", beyond it " << c.difference << ", " << c.kink_units
                                << " kinks in " << c.kink_samples << " samples");
  // The flips move the gradient by a sample's share (1/8), far above rounding:
  // the check without the allowance raises a false alarm...
  CHECK(c.raw_difference > 100 * kStepGradientTolerance);
  CHECK(c.kink_units >= 2);
  CHECK(c.kink_samples >= 2);
  // ...and with it, what is left is rounding (≤ ~1e-6 on 48 terms).
  CHECK(c.difference <= kStepGradientTolerance / 10);
}

TEST_CASE("step check: a kink's allowance covers only its unit and the layers below, never the last", "[core]") {
  KinkedProblem p = kinked_problem();
  const KinkAllowance k = kink_allowance(p.model, p.batch);
  const std::vector<Tensor> params = p.model.parameters();
  REQUIRE(k.bound.size() == std::size_t(48 * 12 + 12 + 12 * 12 + 12 + 12 * 4 + 4));
  const std::size_t last = k.bound.size() - (12 * 4 + 4);
  for (std::size_t i = last; i < k.bound.size(); ++i) CHECK(k.bound[i] == 0.0f);
  // The kinked unit 5 of layer 0: its weight row and bias may move.
  CHECK(k.bound[5 * 48 + 7] > 0.0f);
  CHECK(k.bound[48 * 12 + 5] > 0.0f);
  // Layer 1's kink (unit 3): its row of fc1.weight may move.
  CHECK(k.bound[48 * 12 + 12 + 3 * 12 + 1] > 0.0f);
}

TEST_CASE("step check: every planted mistake still fails beyond the kinks' allowance", "[core]") {
  KinkedProblem p = kinked_problem();
  const std::vector<float> good = reverse_order_pass(p.model, p.batch).grad;
  auto fails = [&](const std::vector<float>& synced, const char* what) {
    const StepComparison c = compare_step_gradient(p.model, p.batch, synced);
    INFO(what << ": beyond the allowance " << c.difference);
    CHECK(c.difference > 10 * kStepGradientTolerance);
  };
  std::vector<float> twice = good;
  for (float& g : twice) g *= 2.0f;
  fails(twice, "a sum for a mean (2 ranks)");
  for (int quarter = 0; quarter < 4; ++quarter) {  // a ring chunk of 4 never arrived
    std::vector<float> dropped = good;
    const std::size_t n = good.size() / 4;
    for (std::size_t i = quarter * n; i < (quarter + 1) * n; ++i) dropped[i] = 0.0f;
    fails(dropped, "a dropped chunk");
  }
  // the last rank's 2 samples never counted, still divided by 8
  Batch six{Tensor::zeros({6, 48}, Device::host()), {}};
  for (int64_t i = 0; i < 6 * 48; ++i) six.x.data()[i] = p.batch.x.to_vector()[std::size_t(i)];
  for (int64_t i = 0; i < 6; ++i) six.y.push_back(p.batch.y[std::size_t(i)]);
  std::vector<float> missing = reverse_order_pass(p.model, six).grad;
  for (float& g : missing) g *= 6.0f / 8.0f;
  fails(missing, "a dropped shard");
  fails(reverse_order_pass(p.model, wide_batch(8, 48, 12)).grad, "a stale gradient (another step's batch)");
}
