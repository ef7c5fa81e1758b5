/// @file step_timeline.h
/// @brief One step's timeline across the ranks, for a Gantt chart
/// (gantt.h): a rank's recorded spans made into bars, every rank's bars
/// gathered to rank 0, and who was slow and who waited for it.
///
///     const auto from = TraceClock::now();
///     ctx.trace.start_storing();
///     ... one step: compute spans ("forward", "backward"), and the named
///         groups' calls ("tp all_reduce", "dp all_reduce") ...
///     ctx.trace.stop_storing();
///     auto mine = step_bars(ctx.trace, ctx.rank, from, TraceClock::now());
///     auto all = gather_bars(ctx.comm, mine);            // rank 0: every rank's
///     StepWaits w = step_waits(all, ctx.world);           // w.slowest, w.wait[r]
///
/// The ranks' clocks agree as trace.h says (threads: one clock; mpirun: a
/// barrier at launch). Left out: the async lane (spans of a progress thread
/// overlap the rank's own and are not drawn).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dpt/gantt.h"
#include "dpt/span.h"

namespace dpt {

class Communicator;
class Tracer;

/// The bar kind of a span named `name` in `category`, or nothing when it
/// is not drawn. "compute": "forward", "backward", else other compute;
/// "comm": by the group's name in front of the call (Communicator::name):
/// "tp …", "dp …", "pp …", else other communication.
std::optional<GanttKind> gantt_kind(const std::string& name, const std::string& category);

/// The bars of one rank's spans, which nest as a thread's spans do: every
/// instant belongs to the innermost span covering it, so a collective
/// inside backward splits backward's bar in two. The bars cover what the
/// spans covered and do not overlap; a span that overlaps its parent's end
/// (not nested) is cut at it.
std::vector<GanttSpan> innermost_bars(const std::vector<GanttSpan>& nested);

/// This rank's bars between `from` and `to`: the spans `tracer` stored on
/// the rank's own thread (lane 0) of a drawn kind, made innermost_bars.
std::vector<GanttSpan> step_bars(const Tracer& tracer, int rank, TraceClock::time_point from, TraceClock::time_point to);

/// Collective over `comm`: every rank's bars on rank 0 (their `rank`
/// fields as given), nothing on the others. Labels are cut to 31 bytes.
std::vector<GanttSpan> gather_bars(Communicator& comm, const std::vector<GanttSpan>& mine);

/// Who held the step up, from the bars of `ranks` ranks.
struct StepWaits {
  std::vector<double> compute;  ///< per rank: seconds in compute bars
  std::vector<double> comm;     ///< per rank: seconds in communication bars
  int slowest = -1;             ///< the rank whose compute took longest (-1: no compute bars)
  /// Per rank: seconds its collectives took beyond the slowest rank's
  /// (0 for it, never below 0): the slowest rank arrives last at each
  /// exchange, so its time there is the transfer alone, and another rank's
  /// excess is its wait.
  std::vector<double> wait;
};

/// StepWaits of `bars` (ranks 0 … ranks-1).
StepWaits step_waits(const std::vector<GanttSpan>& bars, int ranks);

}  // namespace dpt
