/// @file gantt.h
/// @brief A Gantt chart of one step across ranks, as SVG text: one row per
/// rank, rows grouped under their pipeline stage, a bar per span of
/// compute (forward, backward) or communication (TP, DP collectives, PP
/// sends) in its kind's colour, a legend, a time axis in milliseconds.
///
///     dpt::GanttChart chart{"ch15: step 29 on 4 ranks", {0, 0, 0, 0}};
///     chart.spans.push_back({0, 0.010, 0.012, dpt::GanttKind::Forward, "forward"});
///     chart.spans.push_back({0, 0.012, 0.013, dpt::GanttKind::TpCollective, "tp all_reduce"});
///     dpt::write_output_file("step.svg", dpt::svg(chart));
///
/// The bars of one rank must not overlap (a nested span splits its parent:
/// step_timeline.h's innermost_bars makes them so from a Tracer's spans).
/// Every bar is `<rect class="bar" data-rank=R data-kind=KIND
/// data-start-ms=… data-end-ms=…>`, every row `<g class="row" data-rank=R
/// data-stage=S>`, every stage `<g class="stage" data-stage=S>`, so a test
/// reads the chart back. Left out: arrows between ranks, zoom.
#pragma once

#include <string>
#include <vector>

namespace dpt {

/// What a bar is; each kind has its colour and legend entry.
enum class GanttKind { Forward, Backward, Compute, TpCollective, DpCollective, PpTransfer, Comm };

/// The kind's short name, as in `data-kind` and the legend: "forward",
/// "backward", "compute", "tp", "dp", "pp", "comm".
const char* gantt_kind_name(GanttKind kind);
/// True for forward, backward and other compute; false for communication.
bool is_compute(GanttKind kind);

/// One bar: a rank was busy with `kind` from `start` to `end`.
struct GanttSpan {
  int rank = 0;            ///< its row, 0 <= rank < the chart's ranks
  double start = 0;        ///< seconds on a clock the ranks share
  double end = 0;          ///< seconds, >= start
  GanttKind kind = GanttKind::Compute;  ///< what the bar was: its colour and legend entry
  std::string label;       ///< the bar's title (hover text): "tp all_reduce"
};

/// A chart: one row per rank, grouped by stage.
struct GanttChart {
  std::string title;              ///< above the rows
  std::vector<int> stage_of_rank; ///< rank r's pipeline stage (its row group); its size is the ranks
  std::vector<GanttSpan> spans = {};   ///< the bars; one rank's must not overlap
  std::vector<std::string> rank_notes = {};  ///< optional: text after rank r's row ("slowest compute")
  std::string note = {};          ///< a line under the time axis
};

/// The chart as a standalone SVG document. Time runs from the earliest
/// bar's start (0 ms) to the latest bar's end. A bar on a rank outside the
/// chart, a bar that ends before it starts, or two bars of one rank that
/// overlap is a dpt::Error naming it.
std::string svg(const GanttChart& chart);

}  // namespace dpt
