// diloco_check.cpp — harness, not on the chapter's reading path: the oracle
// the DiLoCo verdict compares the outer-step hole against (diloco_check.h).
// It holds the hole's answer, simulated serially in double.
#include "diloco_check.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ch10.h"

namespace dpt::ch10 {

double diloco_outer_error(Communicator& comm, const Diloco& d, uint64_t seed) {
  const std::size_t psi = 64;
  std::vector<float> before(psi, 0.5f), momentum(psi, 0.0f);
  std::vector<double> theta(psi, 0.5), buffer(psi, 0.0);
  auto moved = [&](int r, int t) {  // rank r's parameters after its inner steps of outer step t
    std::mt19937_64 generator(seed + uint64_t(1000 * t + r));
    std::normal_distribution<float> normal(0.0f, 0.1f);
    std::vector<float> x = before;
    for (float& v : x) v += normal(generator);
    return x;
  };
  double gap = 0, largest = 0;
  for (int t = 0; t < 3; ++t) {
    std::vector<double> mean(psi, 0);
    for (int r = 0; r < comm.size(); ++r) {
      const std::vector<float> x = moved(r, t);
      for (std::size_t i = 0; i < psi; ++i) mean[i] += double(x[i]) / comm.size();
    }
    for (std::size_t i = 0; i < psi; ++i) {  // SGD(nesterov=True) on the pseudo-gradient, from θ₀
      const double delta = theta[i] - mean[i];
      buffer[i] = d.outer_momentum * buffer[i] + delta;
      theta[i] -= d.outer_lr * (delta + d.outer_momentum * buffer[i]);
    }
    std::vector<float> params = moved(comm.rank(), t);
    try {
      diloco_outer_step(comm, params, before, momentum, d.outer_lr, d.outer_momentum);  // the hole
    } catch (const NotImplemented&) {
      return std::nan("");
    }
    for (std::size_t i = 0; i < psi; ++i) {
      const double diff = std::fabs(double(params[i]) - theta[i]);
      gap = std::isnan(diff) || std::isnan(gap) ? std::nan("") : std::max(gap, diff);
      largest = std::max(largest, std::fabs(theta[i]));
    }
    before = params;
    for (std::size_t i = 0; i < psi; ++i) theta[i] = params[i];  // the next step starts where the hole ended
  }
  return gap / largest;
}

}  // namespace dpt::ch10
