// sweep_report.cpp — what the batch sweep shows (batch_sweep.h): its two
// tables and the knee, its verdicts, its log-log chart, and its flags.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>

#include "dpt/batch_sweep.h"
#include "dpt/options.h"

namespace dpt {

namespace {
// A table cell for one run: its steps, "div" (diverged), ">N" (stopped at
// the cap N without reaching the target), "-" (not tried).
std::string cell(const std::optional<TargetRun>& r) {
  if (!r) return "-";
  if (r->diverged) return "div";
  if (!r->reached()) return ">" + std::to_string(r->steps_taken);
  return std::to_string(r->steps);
}

std::string batches(const std::vector<int64_t>& list) {
  std::string out;
  for (int64_t b : list) out += (out.empty() ? "" : " ") + std::to_string(b);
  return out.empty() ? "none" : out;
}
}  // namespace

void print_sweep_tables(const SweepResult& sweep, const SweepSettings& settings, const Narrator& say) {
  std::vector<std::string> headers = {"B"};
  for (float lr : settings.grid) headers.push_back("lr " + fmt(lr, 3));
  Table runs("steps to " + settings.target.show(settings.target.value) +
                 " at each rate tried (div: diverged; >N: stopped at N; -: not tried)",
             headers);
  Table table("steps to the target against the global batch" +
                  (settings.optimizer.empty() ? std::string() : ", " + settings.optimizer),
              {"B", "tuned lr", "steps", "samples", "linear lr", "linear steps", "linear samples"});
  for (const SweepPoint& p : sweep.points) {
    std::vector<std::string> row = {std::to_string(p.batch)};
    for (const auto& r : p.grid_runs) row.push_back(cell(r));
    runs.add_row(row);
    auto samples = [&](int64_t steps) { return steps > 0 ? std::to_string(steps * p.batch) : std::string("-"); };
    table.add_row({std::to_string(p.batch), p.tuned_steps > 0 ? fmt(p.tuned_lr, 3) : "-",
                   p.tuned_steps > 0 ? std::to_string(p.tuned_steps) : "not reached", samples(p.tuned_steps),
                   fmt(p.linear_lr, 3),
                   p.linear_diverged ? "diverged" : p.linear_steps > 0 ? std::to_string(p.linear_steps) : "not reached",
                   samples(p.linear_steps)});
  }
  if (say.enabled()) runs.print(std::cout);
  table.print(std::cout);
  std::cout << " S_min = " << fmt(sweep.knee.min_steps, 4) << " steps, E_min = " << fmt(sweep.knee.min_samples, 4)
            << " samples, critical batch E_min / S_min = " << fmt(sweep.knee.critical_batch, 4) << "; sweep took "
            << fixed(sweep.seconds, 0) << " s\n";
}

void add_sweep_verdicts(Verdicts& v, const SweepResult& sweep, const SweepSettings& settings,
                        const std::string& label) {
  const Knee& knee = sweep.knee;
  int reached = 0;
  for (const SweepPoint& p : sweep.points) reached += p.tuned_steps > 0;
  if (knee.critical_batch <= 0) {
    v.holds(label + "a critical batch read off the tuned curve", false,
            str(reached, " batch(es) reached the target; it takes 2 (an easier ", settings.target.flag,
                " or a larger --sweep-max-steps)"));
  } else {
    // Every batch up to the critical one, reached or not: one that was not counts as infinitely many samples.
    double worst = 0;
    int below = 0;
    std::string seen;
    for (const SweepPoint& p : sweep.points) {
      if (double(p.batch) > knee.critical_batch) continue;
      ++below;
      const double ratio = p.tuned_steps > 0 ? double(p.tuned_steps * p.batch) / knee.min_samples : INFINITY;
      worst = std::max(worst, ratio);
      seen += (seen.empty() ? "B = " : ", ") + std::to_string(p.batch) + ": " + fmt(ratio, 3);
    }
    const std::string what = label + "below the critical batch (B <= " + fmt(knee.critical_batch, 4) +
                             "), largest steps x B / fewest samples E_min";
    if (below < 2)
      v.cannot_fail(what, str("with ", below, " batch below it (a harder ", settings.target.flag, " moves it up)"));
    else
      v.at_most(what, worst, kBelowCriticalFactor,
                seen + " — doubling the batch halves the steps there: 2 on the noise-scale model at B_crit, x1.25 for "
                       "the 9 % evaluation grid and held-out noise");
  }
  // The linear rule: every batch's run reached the target or diverged; none may stall.
  std::vector<int64_t> diverged;
  std::string stalled;
  for (const SweepPoint& p : sweep.points) {
    if (p.linear_diverged) diverged.push_back(p.batch);
    else if (p.linear_steps <= 0)
      stalled += (stalled.empty() ? "" : ", ") + std::to_string(p.batch) + " (" + settings.target.show(p.linear_end.score) +
                 " after " + std::to_string(p.linear_end.steps_taken) + " steps, loss " + fmt(p.linear_end.last_loss, 3) + ")";
  }
  v.holds(label + "the linear rule with warm-up reaches the target wherever it does not diverge (within " +
              std::to_string(kLinearStepsAllowance) + "x the tuned steps)",
          sweep.reference_lr > 0 && stalled.empty(),
          sweep.reference_lr <= 0 ? "the smallest batch reached the target at no rate of the grid: no rule to scale"
                                  : "diverged at B = " + batches(diverged) + "; neither reached nor diverged at B = " +
                                        (stalled.empty() ? std::string("none") : stalled));
}

LineChart sweep_chart(const SweepResult& sweep, const std::string& title) {
  LineChart chart{title, "global batch B (log)", "steps to the target (log)", {}, true, true, {}, {}};
  ChartSeries tuned{"tuned per batch", "#1f77b4", {}, false, true};
  ChartSeries linear{"linear rule + warm-up", "#ff7f0e", {}, true, true};
  std::vector<int64_t> diverged;
  for (const SweepPoint& p : sweep.points) {
    if (p.tuned_steps > 0) tuned.points.push_back({double(p.batch), double(p.tuned_steps)});
    if (p.linear_steps > 0) linear.points.push_back({double(p.batch), double(p.linear_steps)});
    if (p.linear_diverged) diverged.push_back(p.batch);
  }
  chart.series = {tuned, linear};
  const Knee& k = sweep.knee;
  if (k.critical_batch > 0 && !sweep.points.empty()) {  // the two asymptotes and the region between
    const double lo = double(sweep.points.front().batch), hi = double(sweep.points.back().batch);
    chart.series.push_back({"perfect scaling E_min/B", "#888888", {{lo, k.min_samples / lo}, {hi, k.min_samples / hi}}, true});
    chart.series.push_back({"floor S_min", "#bbbbbb", {{lo, k.min_steps}, {hi, k.min_steps}}, true});
    chart.bands.push_back({k.critical_batch, "critical batch ~ " + std::to_string(std::lround(k.critical_batch))});
    chart.note = "shaded: doubling the batch halves the steps. ";
  }
  chart.note += diverged.empty() ? "The linear rule diverged at no batch."
                                 : "The linear rule diverged at B = " + batches(diverged) + ".";
  return chart;
}

void add_sweep_flags(CLI::App& app, SweepFlags& flags, const SweepFlagSpec& spec) {
  app.add_flag("--batch-sweep", flags.enabled, spec.what);
  app.add_option("--sweep-max-batch", flags.max_batch,
                 "The sweep's largest batch, a power of two from " + std::to_string(spec.min_batch) + " to 65536")
      ->check(integer_in(uint64_t(spec.min_batch), 65536))->capture_default_str();
  app.add_option(spec.target_flag, flags.target, spec.target_help)
      ->check(number_in(spec.target_lo, spec.target_hi))->capture_default_str();
  app.add_option("--sweep-max-steps", flags.max_steps, "The most steps one run of the sweep takes")
      ->check(integer_in(1, 1000000))->capture_default_str();
  app.add_option("--warmup-samples", flags.warmup_samples, "Samples over which the linear rule ramps its rate up")
      ->check(integer_in(0, uint64_t(1) << 30))->capture_default_str();
  if (spec.plot_flag) add_output(app, "--sweep-plot", flags.plot, "SVG: steps to the target against the batch (log-log)");
  app.final_callback([&app, &flags, spec] {  // once every flag is known
    if (spec.run_checks) spec.run_checks();
    auto refuse = [&app](const std::string& flag, const std::string& why) {
      if (app.count(flag) > 0) throw CLI::ValidationError(flag, why);
    };
    if (!flags.enabled) {
      for (const std::string& flag : {std::string("--sweep-max-batch"), spec.target_flag,
                                      std::string("--sweep-max-steps"), std::string("--warmup-samples")})
        refuse(flag, "only used by --batch-sweep");
      if (spec.plot_flag) refuse("--sweep-plot", "only used by --batch-sweep");
      for (const std::string& flag : spec.own_flags) refuse(flag, "only used by --batch-sweep");
      return;
    }
    for (const std::string& flag : spec.lesson_flags)
      refuse(flag, "not used by --batch-sweep: it sweeps the batch, tunes the rate and stops at the target");
    const int64_t ratio = flags.max_batch / spec.min_batch;
    if (flags.max_batch % spec.min_batch != 0 || (ratio & (ratio - 1)) != 0)
      throw CLI::ValidationError("--sweep-max-batch", "expects a power of two (the sweep doubles from " +
                                                          std::to_string(spec.min_batch) + "), got " +
                                                          std::to_string(flags.max_batch));
    if (spec.checks) spec.checks();
  });
}

}  // namespace dpt
