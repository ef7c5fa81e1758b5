// test_optim.cpp — optimizer steps against values computed by hand from the
// update rules (PyTorch's torch.optim semantics), two steps each so state matters.
#include "support/catch.h"
#include <cmath>

#include "dpt/optim.h"

using namespace dpt;

namespace {
Tensor param(float value) { return Tensor::from_vector({1}, {value}, Device::host()).set_requires_grad(true); }
void set_grad(Tensor& p, float g) { p.set_grad(Tensor::from_vector({1}, {g}, Device::host())); }
}  // namespace

TEST_CASE("SGD: p -= lr * g", "[optim]") {
  Tensor p = param(1.0f);
  SGD sgd({p}, 0.1f);
  set_grad(p, 2.0f);
  sgd.step();  // 1 − 0.1·2 = 0.8
  CHECK(p.item() == Approx(0.8f).epsilon(1e-6));
  CHECK(sgd.state_bytes() == 0);
}

TEST_CASE("SGD with momentum keeps a velocity (v = g on the first step)", "[optim]") {
  Tensor p = param(1.0f);
  SGD sgd({p}, 0.1f, 0.9f);
  set_grad(p, 1.0f);
  sgd.step();  // v = 1,            p = 1 − 0.1 = 0.9
  CHECK(p.item() == Approx(0.9f).epsilon(1e-6));
  set_grad(p, 0.5f);
  sgd.step();  // v = 0.9·1 + 0.5 = 1.4, p = 0.9 − 0.14 = 0.76
  CHECK(p.item() == Approx(0.76f).epsilon(1e-6));
  CHECK(sgd.state_bytes() == 4);  // one float of velocity per parameter element
}

TEST_CASE("SGD weight decay adds lambda * p to the gradient", "[optim]") {
  Tensor p = param(2.0f);
  SGD sgd({p}, 0.1f, 0.0f, 0.5f);
  set_grad(p, 1.0f);
  sgd.step();  // g' = 1 + 0.5·2 = 2, p = 2 − 0.2 = 1.8
  CHECK(p.item() == Approx(1.8f).epsilon(1e-6));
}

TEST_CASE("Adam: bias-corrected moments, two steps", "[optim]") {
  Tensor p = param(1.0f);
  Adam adam({p}, 0.01f);
  set_grad(p, 0.5f);
  adam.step();
  // Step 1: m = 0.05, v = 0.00025; m̂ = 0.5, v̂ = 0.25 → p = 1 − 0.01·0.5/(0.5+1e-8)
  double p1 = 1.0 - 0.01 * 0.5 / (0.5 + 1e-8);
  CHECK(p.item() == Approx(p1).epsilon(1e-6));
  set_grad(p, -1.0f);
  adam.step();
  double m = 0.9 * 0.05 + 0.1 * -1.0, v = 0.999 * 0.00025 + 0.001 * 1.0;
  double m_hat = m / (1 - 0.81), v_hat = v / (1 - 0.999 * 0.999);
  CHECK(p.item() == Approx(p1 - 0.01 * m_hat / (std::sqrt(v_hat) + 1e-8)).epsilon(1e-5));
  CHECK(adam.state_bytes() == 8);  // m and v: two floats per element
}

TEST_CASE("AdamW decays the weight directly, not through the gradient", "[optim]") {
  Tensor p = param(1.0f);
  Adam adamw({p}, 0.1f, 0.9f, 0.999f, 1e-8f, 0.5f, true);
  set_grad(p, 0.0f);
  adamw.step();  // p·(1 − 0.1·0.5) = 0.95; the zero gradient moves nothing else
  CHECK(p.item() == Approx(0.95f).epsilon(1e-6));
}

TEST_CASE("a parameter without a gradient is skipped", "[optim]") {
  Tensor p = param(1.0f);
  SGD sgd({p}, 0.1f);
  sgd.step();
  CHECK(p.item() == 1.0f);
}

TEST_CASE("optimizer state is counted on the parameter's device", "[optim][device]") {
  Device& dev = Device::cpu(41);
  Tensor p = Tensor::zeros({1000}, dev).set_requires_grad(true);
  p.set_grad(Tensor::zeros({1000}, dev));
  std::size_t before = dev.current_bytes();
  Adam adam({p}, 0.01f);
  adam.step();
  CHECK(dev.current_bytes() - before == 2 * 1000 * sizeof(float));
}

TEST_CASE("make_optimizer rejects an unknown name", "[optim]") {
  CHECK_THROWS_WITH(make_optimizer("lion", {}, 0.1f),
                    contains_text("expected sgd, momentum, adam, adamw, lars or lamb"));
}
