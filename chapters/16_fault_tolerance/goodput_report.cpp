// goodput_report.cpp — the goodput sweep's table, chart and verdicts
// (goodput.h). C* comes from the measured checkpoint cost and the planned
// MTBF, never from the goodput curve it is judged against.
#include <algorithm>
#include <cmath>

#include "dpt/data_parallel.h"
#include "dpt/line_chart.h"
#include "dpt/output_file.h"
#include "goodput.h"

namespace dpt::ch16 {

namespace {

// How far the measured best may sit from C*. Young's waste per unit of work
// is δ/C + C/(2·MTBF); at C = k·C* it is (k + 1/k)/2 times the least: 1.25×
// at k = 2 (a few % of goodput, within the noise of ~10 failures' random
// losses and a shared machine's clock), 1.45× at k = 2.5, 2.1× at k = 4. So
// on the default ×2 grid the neighbours of C* may win; two points off may not.
constexpr double kGoodputFactor = 2.5;
// Young's first order needs δ ≪ MTBF; at δ = MTBF/2 its C* = MTBF, where
// failures during a checkpoint (the sweep lets them hit; the first-order
// formula leaves them out) are common. Past that share the formula is no
// guide, and its verdicts cannot fail.
constexpr double kGoodputMaxCostShare = 0.5;

std::string goodput_interval_list(const std::vector<GoodputRow>& rows) {
  std::string out;
  for (const GoodputRow& r : rows) out += (out.empty() ? "" : ",") + std::to_string(r.interval);
  return out;
}

}  // namespace

void report_goodput(Lecture& lec, const GoodputFlags& f, const std::vector<GoodputRow>& rows, double step_s,
                    double checkpoint_s) {
  // The sweep's mean costs: a step slot, a checkpoint (δ), a recovery (R).
  double recovery_s = 0;
  int64_t failures = 0;
  for (const GoodputRow& r : rows) recovery_s += r.recovery_s, failures += r.failures;
  recovery_s = failures ? recovery_s / double(failures) : 0;
  // Each run's time at those mean costs: its counts (slots, checkpoints,
  // failures: what the interval decided) priced alike for every C.
  std::vector<double> costed(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    costed[i] = double(rows[i].committed) /
                (double(rows[i].executed) * step_s + (double(rows[i].checkpoints) + rows[i].lost_share) * checkpoint_s +
                 double(rows[i].failures) * recovery_s);  // a write cut short: the share it wrote
  Table table("goodput against the checkpoint interval C",
              {"C", "sealed", "writes lost", "failures", "lost steps", "checkpoint s", "recovery s", "restore bytes",
               "wall s", "steps/wall-s", "steps/s at mean costs"});
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const GoodputRow& r = rows[i];
    table.add_row({std::to_string(r.interval), std::to_string(r.checkpoints), std::to_string(r.writes_lost),
                   std::to_string(r.failures),
                   std::to_string(r.lost), fixed(r.checkpoint_s, 4), fixed(r.recovery_s, 4),
                   std::to_string(r.restore_bytes), fixed(r.wall_s, 3), fixed(r.goodput, 1), fixed(costed[i], 1)});
  }
  lec.say.say(table.str());
  lec.say.say("  steps/wall-s: useful steps per second as the clock saw them. A run here lasts tens of ms, and on a\n"
              "  shared machine one preempted thread costs a whole scheduler slice: the last column prices every\n"
              "  run's counts (slots computed, checkpoints, failures) at the sweep's mean costs, the same for every\n"
              "  C, so that C alone moves it; the verdicts read that column. sealed: whole checkpoints; writes lost:\n"
              "  writes a failure cut short (counted in failures too): the job restarted from the sealed one before.");

  // Young/Daly, in seconds, then in steps: C* = √(2 · δ · MTBF).
  const double mtbf_s = f.mtbf_steps * step_s;
  const double c_star = std::sqrt(2 * checkpoint_s * mtbf_s) / step_s;
  const std::size_t best_at = std::size_t(std::max_element(costed.begin(), costed.end()) - costed.begin());
  const GoodputRow* best = &rows[best_at];
  lec.say.section("2. Young and Daly: C* = √(2 · checkpoint cost · MTBF)");
  lec.say.say(str("  measured: a step slot ", fmt(1e3 * step_s, 4), " ms, a checkpoint ", fmt(1e3 * checkpoint_s, 4),
                  " ms (δ), a recovery ", fmt(1e3 * recovery_s, 4), " ms; planned MTBF ", fmt(f.mtbf_steps, 4),
                  " steps = ", fmt(1e3 * mtbf_s, 4), " ms\n", "  C* = √(2 · ", fmt(1e3 * checkpoint_s, 4), " ms · ",
                  fmt(1e3 * mtbf_s, 4), " ms) = ", fmt(1e3 * c_star * step_s, 4), " ms = ", fixed(c_star, 2),
                  " steps; the best C at mean costs: ", best->interval));
  lec.summary.add_row({"Young/Daly C*", fixed(c_star, 2) + " steps"});
  lec.summary.add_row({"best C at mean costs", std::to_string(best->interval) + " (" + fixed(costed[best_at], 1) + " useful steps/s)"});

  if (!f.plot.empty()) {
    LineChart chart;
    chart.title = "ch16: goodput against the checkpoint interval";
    chart.x_label = "checkpoint interval C (steps)";
    chart.y_label = "useful steps per second";
    chart.log_x = true;
    ChartSeries priced{"at mean costs", "#4a7fb0", {}, false, true};
    ChartSeries wall{"wall clock", "#b07a4a", {}, true, true};
    for (std::size_t i = 0; i < rows.size(); ++i) {
      priced.points.push_back({double(rows[i].interval), costed[i]});
      wall.points.push_back({double(rows[i].interval), rows[i].goodput});
    }
    chart.series.push_back(priced);
    chart.series.push_back(wall);
    ChartBand young;  // Young/Daly's optimum, from the measured δ: a threshold line, not a measurement
    young.x_hi = c_star;
    young.label = "C* = " + fixed(c_star, 2);
    chart.bands.push_back(young);
    chart.note = str("a failure every ", fmt(f.mtbf_steps, 3), " steps on average; C* = √(2·δ·MTBF) from the measured δ");
    write_output_file(f.plot, svg(chart));
  }

  Verdicts& v = lec.verdicts;
  const std::string grid = "--intervals " + goodput_interval_list(rows);
  const bool formula_holds = checkpoint_s <= kGoodputMaxCostShare * mtbf_s;
  int64_t writes_cut = 0;
  for (const GoodputRow& r : rows) writes_cut += r.writes_lost;
  const std::string unsealed = writes_cut ? "when no checkpoint was sealed: a failure cut every write short (try a larger --mtbf)"
                                          : "when no checkpoint was written (every C ≥ --goodput-steps)";
  if (checkpoint_s <= 0) {  // no δ measured: no C*
    v.cannot_fail("the best C near Young/Daly's C*", unsealed);
  } else if (rows.size() < 2) {
    v.cannot_fail("the best C near Young/Daly's C*", "with one interval (try --intervals 1,2,4,8,16)");
  } else if (!formula_holds) {
    v.cannot_fail("the best C near Young/Daly's C*", str("when a checkpoint costs ", fmt(checkpoint_s / mtbf_s, 2),
                                                         " MTBF: the formula assumes δ ≪ MTBF (try a larger --mtbf)"));
  } else {
    const double off = std::max(double(best->interval) / c_star, c_star / double(best->interval));
    v.at_most(str("the best C (", best->interval, ") within ×", fmt(kGoodputFactor, 2), " of C* = ", fixed(c_star, 2),
                  ": the factor"), off, kGoodputFactor,
              "Young's waste at k·C* is (k + 1/k)/2 × the least: near C* the curve is flat, further off it is not");
  }
  if (rows.size() < 3) {
    v.cannot_fail("goodput falls off on both sides of the best C", "with fewer than 3 intervals (try --intervals 1,2,4,8,16)");
  } else if (checkpoint_s <= 0) {
    v.cannot_fail("goodput falls off on both sides of the best C", unsealed);
  } else if (!formula_holds) {
    v.cannot_fail("goodput falls off on both sides of the best C", "when δ is not ≪ MTBF (see above)");
  } else if (checkpoint_s > 0 && c_star > double(rows.front().interval) && c_star < double(rows.back().interval)) {
    v.holds("goodput falls off on both sides of the best C (the grid spans C*)",
            best->interval != rows.front().interval && best->interval != rows.back().interval &&
                costed[best_at] > costed.front() && costed[best_at] > costed.back(),
            str("best at C = ", best->interval, " in ", grid, ": a checkpoint too often costs its writes, too rarely the "
                "recomputed steps"));
  } else {  // C* off the grid: the curve should climb towards C*'s side
    const GoodputRow& near_end = c_star <= double(rows.front().interval) ? rows.front() : rows.back();
    v.holds("C* off the grid: goodput is best at its end nearest C*", best->interval == near_end.interval,
            str("C* = ", fixed(c_star, 2), ", best at C = ", best->interval, " in ", grid));
  }
  double worst_gap = 0;
  int64_t worst_c = rows.front().interval;
  bool once = true;
  std::string once_seen;
  for (const GoodputRow& r : rows) {
    if (!(r.replay_gap <= worst_gap)) worst_gap = r.replay_gap, worst_c = r.interval;
    if (!r.exactly_once && once) once = false, once_seen = str("C = ", r.interval, ": ", r.once_seen);
    if (r.committed < f.useful_steps)
      lec.say.say(str("  C = ", r.interval, " stopped at the cap of ", r.executed, " slots with ", r.committed,
                      " steps committed: between two checkpoints this far apart a failure nearly always comes"));
  }
  // What a restart may lose, from the counts alone: a failure in a step slot its step in flight and at most the
  // C − 1 committed since the last seal; a failure during the write at k·C the C steps since the seal at (k − 1)·C.
  std::string lost_seen = "each failure lost what a restart from the last sealed checkpoint loses";
  bool lost_ok = true;
  for (const GoodputRow& r : rows) {
    const int64_t in_steps = r.failures - r.writes_lost, least = r.interval * r.writes_lost + in_steps,
                  most = r.interval * r.writes_lost + in_steps * r.interval;
    if (lost_ok && (r.lost < least || r.lost > most))
      lost_ok = false, lost_seen = str("C = ", r.interval, ": ", r.lost, " steps lost; ", in_steps, " failures in a step and ",
                                       r.writes_lost, " in a write allow ", least, " to ", most);
  }
  v.holds("at every C the lost steps are a restart's: the step in flight, the steps since the last sealed checkpoint",
          lost_ok, lost_seen);
  v.at_most(str("at every C the run = one device replaying its committed steps (worst: C = ", worst_c, ")"),
            worst_gap, kSingleDeviceTolerance, "a rollback restores parameters, momentum and cursor, and cuts the ledger back");
  v.holds("at every C the committed steps consumed every sample of every epoch exactly once", once,
          once ? "the recomputed steps read the same samples again, and only they do" : once_seen);
}

}  // namespace dpt::ch16
