/// @file pipeline_clock.h
/// @brief Chapter 13's clock (provided): the stages' schedules replayed as a
/// discrete-event simulation, as chapter 08 replays messages — each op starts
/// once the op before it on its stage has ended and its input exists (F m on
/// stage s: F m ended on s−1; B m: B m ended on s+1, or F m on the last
/// stage), and lasts what `seconds` says (measured, or --stage-ms). From the
/// timeline: the bubble, each stage's busy time, the Gantt chart (SVG) and a
/// Chrome trace of the same spans.
///
/// Left out: time on the wire (activations are small next to a layer's
/// compute here; --link affects the threads backend's messages, not this
/// clock) and a send that blocks its stage (the clock lets a stage hand on its
/// result and go on, as a non-blocking send would).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ch13.h"

namespace dpt::ch13 {

/// One op where the clock placed it, seconds from the step's start.
struct Placed {
  Op op;             ///< which op
  double start = 0;  ///< when it started
  double end = 0;    ///< when it ended
};
/// timeline[s]: stage s's ops in the order it ran them.
using Timeline = std::vector<std::vector<Placed>>;
/// Seconds op `op` takes on stage `stage`.
using OpSeconds = std::function<double(int stage, const Op& op)>;

/// Replays `schedules[s]`, stage s's ops in order. Throws dpt::Error naming
/// every stage that waits and what for when the schedules cannot all finish.
Timeline replay_pipeline(const std::vector<std::vector<Op>>& schedules, const OpSeconds& seconds);
/// When the last op ends.
double makespan(const Timeline& timeline);
/// Seconds stage s spends computing.
double busy_seconds(const Timeline& timeline, int stage);
/// The idle fraction: 1 − Σ_s busy_s / (P · makespan).
double bubble_fraction(const Timeline& timeline);
/// (P − 1) / (M + P − 1): the bubble of equal stages, GPipe's or 1F1B's.
double bubble_formula(int stages, int micro_batches);
/// The stage with the most busy seconds (the lowest index on a tie).
int slowest_stage(const Timeline& timeline);

/// Writes one Gantt chart per labelled timeline, stacked, as SVG: a row per
/// stage, a box per op (forwards blue, backwards orange, the micro-batch's
/// number inside), idle time blank. Same time scale for all. At each row's
/// end, the stage's peak micro-batches in flight (forwarded, not yet
/// backwarded) against `bounds[k][s]`, timeline k's bound for stage s: "peak
/// 4 (≤ 4)", red when over. `bounds` empty: the peaks alone.
void write_gantt_svg(const std::string& path, const std::string& title,
                     const std::vector<std::pair<std::string, Timeline>>& timelines,
                     const std::vector<std::vector<int>>& bounds = {});
/// The most micro-batches stage `stage` of `timeline` held in flight at once.
int peak_in_flight(const Timeline& timeline, int stage);
/// The same spans as a Chrome trace (ui.perfetto.dev): one process per
/// labelled timeline, one track per stage.
void write_gantt_trace(const std::string& path, const std::vector<std::pair<std::string, Timeline>>& timelines);

}  // namespace dpt::ch13
