// l2_norm.h — the Euclidean norm in double, the oracles' own (the layer-wise
// optimizers' trust ratios divide two of them).
#pragma once

#include <cmath>
#include <vector>

namespace dpt_test {

/// sqrt(Σ x_i²), summed in double in index order.
inline double l2_norm(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s);
}

}  // namespace dpt_test
