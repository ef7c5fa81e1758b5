/// @file checks.h
/// @brief Chapter 05's checks (provided, not a hole): your holes tried off the
/// training path (layouts against ch05.h's caps, mark_ready with shuffled
/// hooks, wait_and_unpack with a bucket that never launched), and the verdicts
/// on them and on training. The schedule's verdicts: schedule_verdicts.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bucketed_training.h"
#include "ch05.h"
#include "dpt/launch.h"
#include "dpt/nn.h"
#include "dpt/verdict.h"

namespace dpt::ch05 {

/// A layout against ch05.h's caps.
struct LayoutCheck {
  int over_cap = 0;            ///< buckets of several parameters over their cap
  int not_full = 0;            ///< buckets closed though the next parameter fitted
  std::string first_over;      ///< the first bucket over its cap, in words
  std::string first_not_full;  ///< the first bucket closed too early, in words
};

/// Your mark_ready with the hooks fired in shuffled orders.
struct ShuffledLaunches {
  int out_of_order = 0;  ///< launches that were not the next bucket index, over every shuffle
  int unready = 0;       ///< launches of a bucket with a parameter not yet marked ready
  int missing = 0;       ///< buckets never launched once every parameter was ready
};

/// What section 1 found, on this rank alone (no messages).
struct HoleChecks {
  LayoutCheck caps;           ///< the run's layout
  LayoutCheck exact;          ///< assign_buckets on sizes whose buckets reach their caps exactly
  ShuffledLaunches shuffled;  ///< 20 shuffled hook orders on the run's layout
  std::string unpacked;       ///< "" when wait_and_unpack reports a bucket that never launched as ch05.h asks
};

/// Tries your holes on `layout` (the run's, for `model` under `plan`), and
/// assign_buckets on a layout whose buckets reach their caps exactly.
HoleChecks check_holes(const std::vector<Bucket>& layout, const MLP& model, const BucketPlan& plan, Device& device,
                       uint64_t seed);

/// Rank 0: the verdicts on section 1's checks and on training (ring traffic
/// of S = `gradient_bytes` in buckets, finite loss, identical replicas).
void add_verdicts(Verdicts& v, const Context& ctx, const HoleChecks& h, const BucketedRun& run,
                  double gradient_bytes, double spread);

}  // namespace dpt::ch05
