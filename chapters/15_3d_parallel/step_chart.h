/// @file step_chart.h
/// @brief Chapter 15's Gantt chart of one training step across the grid
/// (--gantt FILE.svg, --gantt-step S) and a straggler to read off it
/// (--slow-rank R, --slowdown X). Not a hole.
///
/// The training loop marks the step (begin_step, end_step) and its compute
/// (StepChart::Compute around forward and backward); the groups' own calls
/// are already spans, named by their group ("tp all_reduce", "dp
/// all_reduce": dpt::Grid names the groups), so TP and DP collectives are
/// told apart where they are made, not where the chapter calls them — the TP
/// ones happen inside the blocks, in the student's code. Every rank stores
/// the chosen step's spans (dpt/step_timeline.h); report_step_chart gathers
/// them to rank 0, which names the rank whose compute took longest and the
/// ranks that waited for it, and draws the chart (dpt/gantt.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/cli_fwd.h"
#include "dpt/gantt.h"
#include "dpt/launch.h"
#include "dpt/report.h"
#include "dpt/span.h"
#include "dpt/verdict.h"

namespace dpt::ch15 {

/// The values of the chart's and the straggler's flags.
struct StepChartFlags {
  std::string gantt;     ///< --gantt: the SVG to write ("" = none)
  int64_t step = -1;     ///< --gantt-step: the step recorded (-1: the last one --verify leaves alone)
  int slow_rank = -1;    ///< --slow-rank: this rank's forward and backward take --slowdown times as long (-1: none)
  double slowdown = 4;   ///< --slowdown
};

/// Registers --gantt, --gantt-step, --slow-rank and --slowdown on `app`.
void add_step_chart_flags(CLI::App& app, StepChartFlags& flags);

/// "" or the sentence, naming the flag, why the flags do not fit a run of
/// `world` ranks and `steps` steps (--slow-rank past the last rank,
/// --gantt-step past the last step).
std::string step_chart_problem(const StepChartFlags& flags, int world, int64_t steps);

/// One rank's side of the chart during training.
class StepChart {
 public:
  /// The chart of `steps` steps on `ctx`'s rank, as `flags` ask. Its default
  /// step is the last one that `verify` (which gathers the whole model on the
  /// first and last steps, for the step check) leaves alone, where there is one.
  StepChart(const StepChartFlags& flags, int64_t steps, bool verify, Context& ctx);

  /// Step `s` begins: when it is the chart's step, this rank stores its spans.
  void begin_step(int64_t s);
  /// Step `s`'s compute and exchanges are done: its spans become this rank's bars.
  void end_step(int64_t s);
  /// This rank's bars of the recorded step (empty before end_step of it).
  const std::vector<GanttSpan>& bars() const { return bars_; }
  /// The step recorded; -1 when there is none (no steps).
  int64_t step() const { return step_; }

  /// A compute span ("forward", "backward") from construction to end(). On
  /// --slow-rank it lasts --slowdown times its own compute (its time outside
  /// the communication inside it): the rank sleeps the difference at its end.
  class Compute {
   public:
    /// Starts the span `name` on `chart`'s rank now.
    Compute(StepChart& chart, const char* name);
    ~Compute() { end(); }
    Compute(const Compute&) = delete;
    Compute& operator=(const Compute&) = delete;
    /// Ends the span now (after the slow rank's sleep); later calls do nothing.
    void end();

   private:
    StepChart& chart_;
    TraceSpan span_;
    TraceClock::time_point start_;
    double comm_at_start_;
    bool open_ = true;
  };

 private:
  friend class Compute;
  Context& ctx_;
  int64_t step_;
  double slowdown_;  // 1 on every rank but --slow-rank
  TraceClock::time_point from_;
  std::vector<GanttSpan> bars_;
};

/// Collective over the world, after training: gathers every rank's bars to
/// rank 0, which prints who computed longest and who waited for it, judges
/// it against --slow-rank (a verdict that can fail; "cannot fail" without
/// one), and writes --gantt. `stage_of_rank`: each world rank's pipeline
/// stage (the chart's row groups). Nothing when no step was recorded.
void report_step_chart(Context& ctx, const StepChart& chart, const StepChartFlags& flags,
                       const std::vector<int>& stage_of_rank, const std::string& layout, Verdicts& v,
                       const Narrator& say);

}  // namespace dpt::ch15
