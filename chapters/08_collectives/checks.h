// checks.h — chapter 08's checks on the live world: exact sums for every
// algorithm, and what the traffic log says each one sent to whom.
#pragma once

#include <string>
#include <vector>

#include "dpt/launch.h"

namespace dpt::ch08 {

/// One algorithm's sums on this world: the largest error relative to the
/// serial sum, over every rank, element and count tried.
struct SumCheck {
  std::string name;     ///< the algorithm
  bool written = true;  ///< false: a hole not written yet (`why` says which)
  std::string why;      ///< the NotImplemented message, when not written
  double error = 0;     ///< largest relative error over ranks, elements and counts
};

/// Collective: every algorithm of algorithm_names() on integer inputs, counts
/// 1, 7 and 1001 (shorter than, and not divisible by, the world).
std::vector<SumCheck> check_sums(Context& ctx, int nodes);

/// Collective: the two phases of halving-doubling alone, on the world's first
/// p = power_of_two_below(n) ranks (the rest wait): halving_reduce_scatter
/// (`error`: floats of a member's own block that are not its sum over the p
/// members) and doubling_all_gather (floats that are not their owner's final
/// value), worst over ranks. Checked before the all-reduces built on them, so
/// a fault in a part is named in the part's words.
std::vector<SumCheck> check_phases(Context& ctx);

/// Rank 0: halving_doubling_all_reduce on threads worlds of their own, 3, 6
/// and 7 ranks (1, 2 and 3 extra ranks), whatever this run's world: "" when
/// every rank ends with the exact sum and the traffic keeps the fold's
/// contract (halving_doubling_pattern_problem), else the first problem in
/// words (a hole not written yet: its message). A world that is a power of
/// two has no extra rank to fold.
std::string fold_problem();

/// What the traffic log saw during one all-reduce of `count` floats.
struct TrafficSeen {
  std::vector<std::vector<int64_t>> matrix;  ///< bytes [src][dst]
  int64_t total = 0;                         ///< all bytes sent
  int64_t busiest_across = 0;                ///< the most bytes one rank sent to other nodes
  std::string stray_across;                  ///< "" or "3 -> 4" when ranks of different local index talk across nodes
};

/// Collective: runs `name` once and reads the gathered traffic log.
TrafficSeen traffic_of(Context& ctx, const std::string& name, int nodes, int64_t count);

/// Bytes all ranks send in one all-reduce of `bytes` on n ranks, counted on
/// paper from each algorithm's steps.
double theory_total_bytes(const std::string& name, int n, int nodes, double bytes);

/// "" when the traffic matrix keeps halving-doubling's contract: each of the
/// first p = power_of_two_below(n) ranks exchanges (both ways) with log2 p of
/// the others, no two extra ranks talk, each extra talks to one of the first
/// p only, and none of them hosts two extras; else the first break, in words.
std::string halving_doubling_pattern_problem(const std::vector<std::vector<int64_t>>& matrix);

}  // namespace dpt::ch08
