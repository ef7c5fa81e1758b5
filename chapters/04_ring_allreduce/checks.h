/// @file checks.h
/// @brief Chapter 04's checks (provided, not a hole): your ring's phases and
/// its all-reduce against serial sums (section 2), and the verdicts and
/// summary rows of the training run (section 5). Each verdict is computed
/// from what was measured, against what ch04.h's contracts say.
#pragma once

#include <cstdint>

#include "dpt/data_parallel.h"
#include "dpt/launch.h"
#include "dpt/report.h"
#include "dpt/lecture.h"
#include "dpt/verdict.h"

namespace dpt::ch04 {

/// Collective. Section 2: each phase alone on small integer inputs (their
/// sums are exact in any order), then ring_all_reduce with Sum and Avg on
/// `count` floats; prints the errors on rank 0 and adds their verdicts. A
/// broken phase is named in its own words, and the all-reduce's verdicts
/// then say that they follow from it (the all-reduce is built from both).
void check_sums(Context& ctx, const Narrator& say, int64_t count, Verdicts& v);

/// Rank 0. Section 5: the training run's traffic, finite loss, identical
/// replicas (`spread`), and the summary rows; S = `gradient_bytes`.
void add_training_checks(Lecture& lec, const DataParallelRun& run, double gradient_bytes, double spread);

}  // namespace dpt::ch04
