/// @file break_even.h
/// @brief When compressing pays (provided, not a hole): each compressor's
/// own work, measured, against the wire time its bytes save.
///
/// Compressor c turns a rank's wire bytes per step from W_none into W_c (a
/// ratio W_none / W_c) at the price of t_c seconds of its own work (compress
/// + decompress: its reduce on a world of one rank, where nothing crosses a
/// wire). On a link of bandwidth β it saves (W_none − W_c) / β seconds, so it
/// pays below the break-even link speed
///     β* = (W_none − W_c) / t_c.
/// The step's sync time at the simulated link adds what the link costs:
///     T_c = t_c + W_c / β + m_c α
/// with α the link's latency and m_c the messages a rank sends one after
/// another (a ring all-reduce 2(n−1), a ring all-gather n−1, PowerSGD two
/// all-reduces per matrix and one for the vectors), beside T_none.
///
/// Left out: compute that overlaps the sync, fp16/bf16's per-hop additions on
/// the ring ((n−1)/n · Ψ more conversions), congestion; latency in β* (it
/// favours the compressors that send fewer messages). t_c is thread CPU
/// time, so a loaded machine slows it less than it slows a wall clock.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compressed_training.h"
#include "compressor.h"
#include "dpt/lecture.h"

namespace dpt::ch10 {

/// Thread CPU seconds of one `compressor.reduce` of a copy of `gradient` on a
/// world of one rank: the median of `repeats` calls after one warm-up call.
/// Throws what reduce throws (dpt::NotImplemented for an unwritten hole).
double reduce_seconds(Compressor& compressor, const std::vector<float>& gradient, int repeats);

/// Thread CPU seconds of one memcpy of `gradient` (same windows as reduce_seconds).
double memcpy_seconds(const std::vector<float>& gradient, int repeats);

/// Thread CPU seconds per call of `body`: the median of `repeats` windows of
/// `calls` calls each, after one warm-up call. Time the scheduler gives to
/// other threads does not count, so a loaded machine inflates it little.
double cpu_seconds_per_call(const std::function<void()>& body, int repeats, int calls = 1);

/// Messages one rank sends one after another per step under `spec` (see the file comment).
int64_t sequential_messages(const std::string& spec, const std::vector<Shape>& shapes, int world);

/// Rank 0: measures every compressor of `settings` (error feedback aside) on
/// a random gradient of `shapes` and prints the break-even table: wire bytes
/// and ratio, compress + decompress throughput against memcpy, the link speed
/// below which compressing pays, and the sync time per step at the run's link
/// (or, with none given, 10 Gbit/s Ethernet) beside `none`'s. On one rank
/// nothing is sent: it says so in a line. Other ranks return at once.
void print_break_even(Lecture& lec, const std::vector<Shape>& shapes, const std::vector<Setting>& settings);

}  // namespace dpt::ch10
