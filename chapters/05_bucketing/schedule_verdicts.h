/// @file schedule_verdicts.h
/// @brief Chapter 05's verdicts on the buckets' schedule (provided, not a
/// hole), judged from the record the engine kept of every step (BucketStep),
/// never from your holes' own state. Chapter 05 and chapter 14 print them.
#pragma once

#include <vector>

#include "bucketed_training.h"
#include "ch05.h"
#include "dpt/launch.h"
#include "dpt/verdict.h"

namespace dpt::ch05 {

/// Collective: the schedule the sync recorded (`steps`, every step of every
/// rank, on `layout`), judged on rank 0: layout order, launch order, launches
/// before ready, buckets held back (or, under --no-overlap, launched early).
void add_schedule_verdicts(Context& ctx, const std::vector<Bucket>& layout, const std::vector<BucketStep>& steps,
                           bool overlap, Verdicts& v);

}  // namespace dpt::ch05
