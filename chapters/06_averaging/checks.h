/// @file checks.h
/// @brief Chapter 06's verdicts on the tour (provided, not a hole): each run
/// against its schedule (tour.h), one device, the H = 1 identities, drift.
#pragma once

#include <vector>

#include "ch06_flags.h"
#include "dpt/lecture.h"
#include "tour.h"

namespace dpt::ch06 {

/// The settings the verdicts single out (all of them in the tour's list).
struct TourRuns {
  const Setting& grads_ref;  ///< gradient averaging, the flags' optimizer and steps
  const Setting& verified;   ///< gradient averaging over E steps, which one device replays
  const Setting* local;      ///< the flags' own setting when it runs local SGD (H > 1, ranks > 1), else null
};

/// Rank 0: adds the tour's verdicts. On one rank the H = 1 identities, Adam's
/// gap and the drift say they cannot fail.
void add_tour_verdicts(Lecture& lec, const std::vector<Setting>& settings, const TourRuns& runs, const Ch06Flags& f);

}  // namespace dpt::ch06
