// test_ch01.cpp — chapter 01's sgd_update against a serial torch.optim.SGD
// that shares none of its code: plain SGD, the first step with momentum, the
// velocity carried between calls, a learning rate that changes, and the
// tensors it may and may not write.
//
// The two backward holes are in test_ch01_backward.cpp, the chapter's
// program in test_ch01_chapter.cpp.
#include "support/catch.h"
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "dpt/check.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "support/gradcheck.h"
#include "ch01.h"

using namespace dpt;
using dpt_test::random_tensor;

namespace {
// The oracle: torch.optim.SGD(momentum=μ, dampening=0, nesterov=False), written
// here in double from its documentation, sharing no code with the hole:
//     step 1: b = g;  later: b = μ·b + g;  p = p − lr·b.
struct TorchSgd {
  std::vector<double> p, b;
  double momentum;
  void step(const std::vector<float>& g, double lr) {
    if (b.empty()) b.assign(g.begin(), g.end());
    else for (std::size_t i = 0; i < p.size(); ++i) b[i] = momentum * b[i] + g[i];
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= lr * b[i];
  }
};

// Largest |param − oracle| relative to the largest step the oracle took so far
// plus float32 rounding of the weights: 1e-5 is ~100x the rounding of a few
// float updates, a wrong rule is off by a whole step (O(1) on this scale).
double error_vs(const Tensor& param, const TorchSgd& oracle, const std::vector<float>& start) {
  double worst = 0, moved = 0;
  for (std::size_t i = 0; i < oracle.p.size(); ++i) {
    worst = std::max(worst, std::fabs(double(param.data()[i]) - oracle.p[i]));
    moved = std::max(moved, std::fabs(oracle.p[i] - start[i]));
  }
  return worst / std::max(moved, 1e-30);
}

// Runs `steps` calls of sgd_update on one parameter with fresh random
// gradients and the learning rates `lrs` (cycled), and returns the first
// step (1-based) after which the parameter left the oracle; 0 if none did.
int first_step_off(float momentum, int steps, const std::vector<float>& lrs, uint64_t seed) {
  Rng rng(seed);
  Tensor p = random_tensor({4, 3}, rng), velocity;
  std::vector<float> start = p.to_vector();
  TorchSgd oracle{{start.begin(), start.end()}, {}, momentum};
  for (int k = 1; k <= steps; ++k) {
    Tensor g = random_tensor({4, 3}, rng);  // a new gradient tensor each step, as backward() makes
    float lr = lrs[std::size_t(k - 1) % lrs.size()];
    ch01::sgd_update(p, g, velocity, lr, momentum);
    oracle.step(g.to_vector(), lr);
    if (!(error_vs(p, oracle, start) <= 1e-5)) return k;
  }
  return 0;
}

// What went wrong, in words, from the first step that left the oracle.
std::string first_step_words(int off) {
  return off == 1 ? "already the first step is wrong: it must move p to p - lr*g, against the gradient (torch's "
                    "first velocity is the gradient itself: no dampening, no Nesterov look-ahead)"
                  : "";
}
}  // namespace

TEST_CASE("sgd_update: with momentum 0 moves each parameter by -lr times its gradient", "[ch01]") {
  Tensor p = Tensor::from_vector({2, 2}, {1.0f, -2.0f, 0.5f, 4.0f}, Device::host());
  Tensor g = Tensor::from_vector({2, 2}, {0.5f, 1.0f, -2.0f, 0.0f}, Device::host());
  Tensor velocity;
  ch01::sgd_update(p, g, velocity, 0.1f, 0.0f);
  // 1 − 0.1·0.5, −2 − 0.1·1, 0.5 + 0.1·2, 4 − 0: exact in float up to one rounding.
  std::vector<float> expected = {0.95f, -2.1f, 0.7f, 4.0f};
  for (int i = 0; i < 4; ++i) {
    INFO("element " << i << ": plain SGD (momentum 0) moves p to p - lr*g, against the gradient");
    CHECK(p.data()[i] == Approx(expected[i]).epsilon(1e-6));
  }
}

TEST_CASE("sgd_update: the first step with momentum matches torch's first step", "[ch01]") {
  int off = first_step_off(0.9f, 1, {0.1f}, 11);
  INFO("momentum 0.9: " << first_step_words(off));
  CHECK(off == 0);
}

TEST_CASE("sgd_update: the velocity carries over between calls (torch's SGD over six steps)", "[ch01]") {
  for (float momentum : {0.5f, 0.9f}) {
    int off = first_step_off(momentum, 6, {0.05f}, 12);
    INFO("momentum " << momentum << ": the parameter left torch's SGD after step " << off << " of 6; "
                     << (off == 1 ? first_step_words(off)
                                  : "the velocity must remember earlier gradients between calls, kept in `velocity` "
                                    "(not restarted each step, not weighted by 1 - momentum, no look-ahead)"));
    CHECK(off == 0);
  }
}

TEST_CASE("sgd_update: follows torch's SGD when the learning rate changes between calls", "[ch01]") {
  int off = first_step_off(0.9f, 6, {0.1f, 0.02f, 0.05f}, 13);
  INFO("with a learning rate that changes between calls the parameter left torch's SGD after step "
       << off << " of 6; " << (off == 1 ? first_step_words(off)
                                        : "what does torch's velocity accumulate: gradients, or steps already "
                                          "scaled by the learning rate of their call?"));
  CHECK(off == 0);
}

TEST_CASE("sgd_update: leaves every gradient untouched and updates in place", "[ch01]") {
  Rng rng(1);
  Tensor p = random_tensor({3, 5}, rng), velocity;
  Tensor alias = p;  // another handle on the same storage sees the update
  std::vector<Tensor> grads = {random_tensor({3, 5}, rng), random_tensor({3, 5}, rng), random_tensor({3, 5}, rng)};
  std::vector<std::vector<float>> before;
  for (auto& g : grads) before.push_back(g.to_vector());
  std::vector<float> p_before = p.to_vector();
  ch01::sgd_update(p, grads[0], velocity, 0.25f, 0.0f);
  {
    INFO("the update must write into the parameter's storage, so that every handle on it (the model's) sees it; "
         "`param` was made to point at other storage");
    REQUIRE(p.same(alias));
  }
  double worst = 0;
  for (int i = 0; i < 15; ++i) worst = std::max(worst, std::fabs(double(alias.data()[i]) - (p_before[i] - 0.25 * before[0][i])));
  {
    INFO("with momentum 0 the step is p - lr*g, against the gradient: largest difference " << worst);
    CHECK(worst <= 1e-6);
  }
  ch01::sgd_update(p, grads[1], velocity, 0.25f, 0.9f);
  ch01::sgd_update(p, grads[2], velocity, 0.25f, 0.9f);
  for (std::size_t k = 0; k < grads.size(); ++k) {
    INFO("the gradient of step " << k + 1 << " changed: gradients are only read; the velocity must own its "
         "storage (a copy), not be a handle on a gradient the caller owns");
    CHECK(grads[k].to_vector() == before[k]);
  }
}
