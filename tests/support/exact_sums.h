// exact_sums.h — inputs whose sum over ranks is exact in float in any order:
// rank r's element i is a distinct integer, and any sum over 16 ranks of them
// is exactly representable, so a collective's result can be compared with ==.
#pragma once

#include <cstdint>

namespace dpt_test {

/// Rank r's element i: distinct per rank and element, an integer below 2^14.
inline float input(int rank, int64_t i) { return float((rank + 1) * 1000 + i % 997); }

/// The sum over `world` ranks of element i, in double (exact).
inline double serial_sum(int world, int64_t i) {
  double s = 0;
  for (int r = 0; r < world; ++r) s += input(r, i);
  return s;
}

}  // namespace dpt_test
