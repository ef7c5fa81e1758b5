// weights_gap.h — how far apart two weights files are: the largest |a − b|
// over every tensor, the two files holding the same names and shapes.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dpt/checkpoint.h"

namespace dpt_test {

/// max |a − b| over every entry of every tensor; infinity when the files hold
/// different names or shapes (never a pass).
inline double weights_gap(const std::string& a, const std::string& b) {
  const dpt::SafeTensorsFile fa = dpt::read_safetensors(a), fb = dpt::read_safetensors(b);
  if (fa.tensors.size() != fb.tensors.size()) return INFINITY;
  double gap = 0;
  for (const auto& [name, t] : fa.tensors) {
    auto other = fb.tensors.find(name);
    if (other == fb.tensors.end() || other->second.shape != t.shape) return INFINITY;
    const std::vector<float> x = t.floats(), y = other->second.floats();
    for (std::size_t i = 0; i < x.size(); ++i) gap = std::max(gap, double(std::fabs(x[i] - y[i])));
  }
  return gap;
}

}  // namespace dpt_test
