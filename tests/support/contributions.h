// contributions.h — inputs whose sums say who contributed how often.
//
// Rank r contributes 8^r to every element. Integers add exactly in any order
// (below 2^24: up to 8 ranks), so a sum read in base 8 says how many times
// each rank's contribution reached an element: a failed all-reduce test can
// say "rank 1 missing, rank 0 twice" instead of printing two numbers.
#pragma once

#include <cstdint>
#include <string>

namespace dpt_test {

/// Rank `rank`'s value in every element: 8^rank (rank < 8).
inline float contribution(int rank) { return float(1 << (3 * rank)); }

/// The same at every element index: the fill a ch08 collective test hands its runner.
inline float contribution_everywhere(int rank, int64_t) { return contribution(rank); }

/// The sum with every one of `world` ranks counted once.
inline float all_once(int world) {
  float sum = 0;
  for (int r = 0; r < world; ++r) sum += contribution(r);
  return sum;
}

/// "ranks 0,2 once; rank 1 2 times; rank 3 missing" for a sum of contributions.
inline std::string contributions(float value, int world) {
  auto digits = static_cast<int64_t>(value);
  std::string once, other;
  for (int r = 0; r < world; ++r, digits /= 8) {
    int64_t times = digits % 8;
    if (times == 1) once += (once.empty() ? "" : ",") + std::to_string(r);
    else other += std::string(other.empty() ? "" : "; ") + "rank " + std::to_string(r) + " " +
                  (times == 0 ? "missing" : std::to_string(times) + " times");
  }
  return (once.empty() ? "no rank once" : "ranks " + once + " once") + (other.empty() ? "" : "; " + other);
}

}  // namespace dpt_test
