// diloco_check.cpp — harness, not on the chapter's reading path: the law the
// DiLoCo verdict holds the outer-step hole to (diloco_check.h). The two
// trajectories it compares with are the core's dpt::SGD, which shares no code
// with the hole.
#include "diloco_check.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ch10.h"
#include "dpt/holes.h"
#include "dpt/optim.h"

namespace dpt::ch10 {

namespace {
double largest_abs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, double(std::fabs(v)));
  return m;
}
}  // namespace

double diloco_outer_error(Communicator& comm, const Diloco& d, uint64_t seed) {
  const int64_t psi = 64;
  const std::vector<float> start(psi, 0.5f);
  auto noise = [&](int r, int t) {  // how far rank r's inner steps of outer step t went
    std::mt19937_64 generator(seed + uint64_t(1000 * t + r));
    std::normal_distribution<float> normal(0.0f, 0.1f);
    std::vector<float> x(psi);
    for (float& v : x) v = normal(generator);
    return x;
  };
  Tensor plain = Tensor::from_vector({psi}, start, Device::host()), heavy = plain.clone();
  SGD sgd({plain}, d.outer_lr), momentum_sgd({heavy}, d.outer_lr, d.outer_momentum);
  std::vector<float> before = start, buffer(psi, 0.0f);
  double gap = 0;
  for (int t = 0; t < 3; ++t) {
    std::vector<double> mean_noise(psi, 0);  // Δ = θ₀ − mean_r (θ₀ + noise_r) = −mean_r noise_r
    for (int r = 0; r < comm.size(); ++r) {
      const std::vector<float> x = noise(r, t);
      for (int64_t i = 0; i < psi; ++i) mean_noise[std::size_t(i)] += double(x[std::size_t(i)]) / comm.size();
    }
    std::vector<float> delta(psi);
    for (int64_t i = 0; i < psi; ++i) delta[std::size_t(i)] = float(-mean_noise[std::size_t(i)]);
    for (Tensor* w : {&plain, &heavy}) w->set_grad(Tensor::from_vector({psi}, delta, Device::host()));
    sgd.step(), momentum_sgd.step();

    std::vector<float> params = noise(comm.rank(), t);
    for (int64_t i = 0; i < psi; ++i) params[std::size_t(i)] += before[std::size_t(i)];
    if (!unwritten_hole(comm, [&] { diloco_outer_step(comm, params, before, buffer, d.outer_lr, d.outer_momentum); })
             .empty())  // the hole, not written yet
      return std::nan("");
    const float* s = plain.data();
    const float* h = heavy.data();
    std::vector<float> law(psi);
    for (int64_t i = 0; i < psi; ++i) law[std::size_t(i)] = s[i] + d.outer_momentum * (h[i] - start[std::size_t(i)]);
    const double scale = largest_abs(law);
    for (int64_t i = 0; i < psi; ++i) {
      const double diff = std::fabs(double(params[std::size_t(i)]) - law[std::size_t(i)]) / scale;
      gap = std::isnan(diff) || std::isnan(gap) ? std::nan("") : std::max(gap, diff);
    }
    before = params;
  }
  return gap;
}

}  // namespace dpt::ch10
