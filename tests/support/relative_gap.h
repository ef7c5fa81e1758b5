// relative_gap.h — max |a − b| / max |b| of a float result against a double
// oracle; NaN when the sizes differ or an entry is NaN (never a pass).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace dpt_test {

inline double relative_gap(const std::vector<float>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::nan("");
  double gap = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - b[i]);
    if (std::isnan(d)) return d;
    gap = std::max(gap, d), scale = std::max(scale, std::fabs(b[i]));
  }
  return gap / scale;
}

/// The same against a float oracle (another float computation of the same values).
inline double relative_gap(const std::vector<float>& a, const std::vector<float>& b) {
  return relative_gap(a, std::vector<double>(b.begin(), b.end()));
}
}  // namespace dpt_test
