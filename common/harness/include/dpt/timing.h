/// @file timing.h
/// @brief Timing a collective the way nccl-tests does: every rank in step, and
/// a call is done when its *slowest* rank is. Shared by chapter 04's timing
/// table and bench/bench_allreduce.
///
///     double t = dpt::time_window(ctx.comm, [&] { ring_all_reduce(...); }, 10);  // seconds per call
///
/// Left out: warm-up policy and repetitions (the caller decides; median() helps).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dpt/comm.h"

namespace dpt {

/// Collective: the largest of every rank's `value`, the same on every rank (an
/// all_gather, then a max; a NaN anywhere gives NaN). Of per-rank seconds, it
/// is the slowest rank's time. Float precision (the all_gather is float32).
double max_over_ranks(Communicator& comm, double value);

/// Collective: seconds per call of `calls` calls of `fn` on every rank at once,
/// from the first rank's start to the last rank's end. Each rank times from its
/// exit of a first barrier to its exit of a second one, and the slowest rank's
/// time counts (without the second barrier a rank scheduled late would time
/// only its own share). `calls` >= 1 and equal on every rank.
double time_window(Communicator& comm, const std::function<void()>& fn, int64_t calls);

/// The median of `values` (the upper one of an even count); NaN when empty.
double median(std::vector<double> values);

}  // namespace dpt
