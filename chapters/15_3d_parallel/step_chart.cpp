// step_chart.cpp — one step drawn across the grid, and the straggler read
// off it (step_chart.h).
#include "step_chart.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <thread>

#include "dpt/options.h"
#include "dpt/output_file.h"
#include "dpt/step_timeline.h"

namespace dpt::ch15 {

void add_step_chart_flags(CLI::App& app, StepChartFlags& f) {
  add_output(app, "--gantt", f.gantt, "SVG: a Gantt chart of one step on every rank, TP and DP collectives marked");
  app.add_option("--gantt-step", f.step, "The step the chart draws and the straggler line reads (default: the last one --verify does not gather)")
      ->check(integer_in(0, 1000000000));
  app.add_option("--slow-rank", f.slow_rank, "A straggler: this rank's forward and backward take --slowdown times as long")
      ->check(integer_in(0, kMaxRanks));
  app.add_option("--slowdown", f.slowdown, "How many times as long the slow rank computes")
      ->check(number_in(1, 1000))->capture_default_str();
}

std::string step_chart_problem(const StepChartFlags& f, int world, int64_t steps) {
  if (f.slow_rank >= world)
    return str("--slow-rank ", f.slow_rank, " is not a rank of this run: its ranks are 0 to ", world - 1);
  if (f.step >= 0 && f.step >= steps)
    return str("--gantt-step ", f.step, " is past the last step: --steps ", steps, " runs steps 0 to ", steps - 1);
  return "";
}

// ----------------------------------------------------------------------------
// during training

StepChart::StepChart(const StepChartFlags& f, int64_t steps, bool verify, Context& ctx)
    : ctx_(ctx), step_(steps <= 0 ? -1 : f.step >= 0 ? f.step : verify && steps >= 3 ? steps - 2 : steps - 1),
      slowdown_(ctx.rank == f.slow_rank ? f.slowdown : 1.0) {}

void StepChart::begin_step(int64_t s) {
  if (s != step_) return;
  from_ = TraceClock::now();
  ctx_.trace.start_storing();
}

void StepChart::end_step(int64_t s) {
  if (s != step_) return;
  ctx_.trace.stop_storing();
  bars_ = step_bars(ctx_.trace, ctx_.rank, from_, TraceClock::now());
}

StepChart::Compute::Compute(StepChart& chart, const char* name)
    : chart_(chart), span_(&chart.ctx_.trace, name, "compute"), start_(TraceClock::now()),
      comm_at_start_(chart.ctx_.trace.seconds("comm")) {}

void StepChart::Compute::end() {
  if (!open_) return;
  open_ = false;
  if (chart_.slowdown_ > 1) {  // the straggler: (X − 1) times its own compute more, inside the span
    const double elapsed = std::chrono::duration<double>(TraceClock::now() - start_).count();
    const double own = std::max(0.0, elapsed - (chart_.ctx_.trace.seconds("comm") - comm_at_start_));
    std::this_thread::sleep_for(std::chrono::duration<double>((chart_.slowdown_ - 1) * own));
  }
  span_.end();
}

// ----------------------------------------------------------------------------
// after training: rank 0 reads and draws

namespace {
std::string chart_ms(double seconds) { return fixed(seconds * 1e3, 1) + " ms"; }

// "rank 2's compute took longest (…); ranks 3, 0, 1 waited …": the lecture's line.
std::string straggler_line(const StepWaits& w, int64_t step) {
  std::vector<int> others;
  double least = 1e300, most = 0;
  for (int r = 0; r < int(w.compute.size()); ++r)
    if (r != w.slowest) {
      others.push_back(r);
      least = std::min(least, w.compute[std::size_t(r)]), most = std::max(most, w.compute[std::size_t(r)]);
    }
  std::sort(others.begin(), others.end(), [&w](int a, int b) { return w.wait[std::size_t(a)] > w.wait[std::size_t(b)]; });
  std::string line = str("step ", step, ": rank ", w.slowest, "'s compute took longest, ",
                         chart_ms(w.compute[std::size_t(w.slowest)]));
  if (others.empty()) return line;
  line += str(" (the others ", fixed(least * 1e3, 1), " to ", chart_ms(most), ");\nwaiting for it in their collectives: ");
  for (std::size_t i = 0; i < others.size(); ++i)
    line += str(i ? ", " : "", "rank ", others[i], " ", chart_ms(w.wait[std::size_t(others[i])]));
  return line;
}
}  // namespace

void report_step_chart(Context& ctx, const StepChart& chart, const StepChartFlags& f,
                       const std::vector<int>& stage_of_rank, const std::string& layout, Verdicts& v,
                       const Narrator& say) {
  if (chart.step() < 0) return;  // no steps: the same on every rank
  const std::vector<GanttSpan> all = gather_bars(ctx.comm, chart.bars());
  if (!ctx.is_root()) return;
  const StepWaits w = step_waits(all, ctx.world);
  if (w.slowest < 0) return;
  say.say(straggler_line(w, chart.step()));
  const std::string named = "the charted step's longest compute is --slow-rank's";
  if (f.slow_rank < 0) {
    say.say("(no --slow-rank: the spread is this machine's noise; --slow-rank 1 makes rank 1 a straggler"
            + std::string(f.gantt.empty() ? ", --gantt FILE.svg draws the step)" : ")"));
    v.cannot_fail(named, "without --slow-rank (try --slow-rank 1)");
  } else if (ctx.world == 1) {
    v.cannot_fail(named, on_one_rank(4));
  } else {
    v.holds(named, w.slowest == f.slow_rank,
            str("rank ", w.slowest, " computed longest (", chart_ms(w.compute[std::size_t(w.slowest)]),
                "); --slow-rank ", f.slow_rank, " computed ", chart_ms(w.compute[std::size_t(f.slow_rank)])));
  }
  if (f.gantt.empty()) return;
  GanttChart drawn{str("ch15: step ", chart.step(), " on ", layout,
                       f.slow_rank >= 0 ? str(", rank ", f.slow_rank, " computing ", fmt(f.slowdown), "x as long") : ""),
                   stage_of_rank};
  drawn.spans = all;
  for (int r = 0; r < ctx.world; ++r)
    drawn.rank_notes.push_back(str("compute ", chart_ms(w.compute[std::size_t(r)]),
                                   r == w.slowest ? ": the slowest" : ", waited " + chart_ms(w.wait[std::size_t(r)])));
  drawn.note = "grey: the rank is outside every span (waiting on no call, or between them); waits show as long collectives";
  write_output_file(f.gantt, svg(drawn));
  say.say("Gantt chart of step " + std::to_string(chart.step()) + ": " + f.gantt);
}

}  // namespace dpt::ch15
