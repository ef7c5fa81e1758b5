// sweep_rules.cpp — the batch sweep's flags, its learning-rate grids and its
// bookkeeping: when a run is evaluated, when it has reached the target or
// diverged, and the critical batch read off the curve (batch_sweep.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>

#include "batch_sweep.h"
#include "sweep_compare.h"

namespace dpt::ch02 {

namespace {
// The grids, one line per optimizer: powers of two, wide enough that the
// best rate of every batch from 8 to 4096 lies inside (measured: the page's
// table). Momentum's μ = 0.9 makes a step ~1/(1−μ) = 10× as long: its grid
// is sgd's ÷ 10. LARS moves each layer by lr·η of its norm (η = 0.001), so
// its rates are ~100× sgd's; LAMB's, like Adam's, are per-entry step sizes.
struct Grid {
  const char* optimizer;
  float lowest;  // the grid is lowest · 2^k, k = 0 … 8
};
const Grid kGrids[] = {
    {"sgd", 0.0125f},
    {"momentum", 0.00125f},
    {"lars", 1.25f},     // its global rate times η = 0.001 times a layer's norm: ~100× sgd's grid
    {"lamb", 0.000125f},  // Adam-sized steps: 1.25e-4 … 0.032
};
constexpr int kGridSize = 9;

bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

void refuse(const CLI::App& app, const std::string& flag, const std::string& why) {
  if (app.count(flag) > 0) throw CLI::ValidationError(flag, why);
}
}  // namespace

std::vector<float> learning_rate_grid(const std::string& optimizer) {
  for (const Grid& g : kGrids)
    if (optimizer == g.optimizer) {
      std::vector<float> grid;
      for (int k = 0; k < kGridSize; ++k) grid.push_back(g.lowest * float(1 << k));
      return grid;
    }
  return {};
}

std::string sweep_optimizers() {
  std::string names;
  for (const Grid& g : kGrids) names += (names.empty() ? "" : ", ") + std::string(g.optimizer);
  return names;
}

void add_sweep_flags(CLI::App& app, Options& options, SweepFlags& flags) {
  app.add_flag("--batch-sweep", flags.enabled,
               "Instead of the lesson: steps to --target-accuracy for batches 8 ... --sweep-max-batch (minutes)");
  app.add_option("--sweep-max-batch", flags.max_batch, "The sweep's largest batch, a power of two from 8 to 65536")
      ->check(integer_in(kSweepMinBatch, 65536))->capture_default_str();
  app.add_option("--target-accuracy", flags.target, "The sweep's target held-out accuracy, 0 < a <= 1")
      ->check(number_in(0, 1))->capture_default_str();
  app.add_option("--sweep-max-steps", flags.max_steps, "The most steps one run of the sweep takes")
      ->check(integer_in(1, 1000000))->capture_default_str();
  app.add_option("--warmup-samples", flags.warmup_samples, "Samples over which the linear rule ramps its rate up")
      ->check(integer_in(0, int64_t(1) << 30))->capture_default_str();
  add_output(app, "--sweep-plot", flags.plot, "SVG: steps to the target against the batch (log-log)");
  app.add_option("--sweep-optimizers", flags.optimizers,
                 "Sweep these in turn and compare them side by side, the first as the plain one, e.g. sgd,lars,lamb");
  app.final_callback([&app, &options, &flags] {  // once every flag is known
    if (!flags.enabled) {
      for (const char* flag : {"--sweep-max-batch", "--target-accuracy", "--sweep-max-steps", "--warmup-samples",
                               "--sweep-plot", "--sweep-optimizers"})
        refuse(app, flag, "only used by --batch-sweep");
      return;
    }
    for (const char* flag : {"--batch", "--lr", "--steps"})
      refuse(app, flag, "not used by --batch-sweep: it sweeps the batch, tunes the rate and stops at the target");
    if (!is_power_of_two(flags.max_batch))
      throw CLI::ValidationError("--sweep-max-batch", "expects a power of two (the sweep doubles from 8), got " +
                                                          std::to_string(flags.max_batch));
    if (flags.max_batch > options.samples)
      throw CLI::ValidationError("--sweep-max-batch", std::to_string(flags.max_batch) + " is more than --samples " +
                                                          std::to_string(options.samples) + ": a batch is drawn from them");
    if (app.count("--sweep-optimizers") > 0) {
      refuse(app, "--optimizer", "not used beside --sweep-optimizers: list the optimizers there");
      refuse(app, "--sweep-plot", "plots one optimizer's sweep: give --optimizer NAME instead of --sweep-optimizers");
      parse_sweep_optimizers(flags.optimizers);  // refuses a name with no grid, a repeat, fewer than two
    } else if (learning_rate_grid(options.optimizer).empty()) {
      throw CLI::ValidationError("--optimizer", "--batch-sweep has a learning-rate grid for " + sweep_optimizers() +
                                                    ", not " + options.optimizer);
    }
    if (options.eval_samples == 0)
      throw CLI::ValidationError("--eval-samples", "--batch-sweep scores its target on the held-out set: give at least 1");
  });
}

std::vector<int64_t> evaluation_steps(int64_t max_steps) {
  std::vector<int64_t> steps;
  for (int64_t s = 1; s <= std::min<int64_t>(16, max_steps); ++s) steps.push_back(s);
  while (!steps.empty() && steps.back() < max_steps)
    steps.push_back(std::min(max_steps, int64_t(std::ceil(double(steps.back()) * std::pow(2.0, 0.125)))));
  return steps;
}

float linear_rule_lr(float reference, int64_t batch, int64_t warmup_samples, int64_t step) {
  const float scaled = reference * float(batch) / float(kSweepMinBatch);
  const double ramped = warmup_samples > 0 ? std::min(1.0, double(step * batch) / double(warmup_samples)) : 1.0;
  return reference + (scaled - reference) * float(ramped);
}

TargetRun run_to_target(const std::function<double()>& step, const std::function<double()>& accuracy, double target,
                        int64_t max_steps) {
  TargetRun run;
  double first_loss = 0;
  for (int64_t evaluate_after : evaluation_steps(max_steps)) {
    while (run.steps_taken < evaluate_after) {
      const double loss = run.last_loss = step();
      if (run.steps_taken++ == 0) first_loss = loss;
      if (!std::isfinite(loss) || loss > kDivergedLossRatio * first_loss) {
        run.diverged = true;
        return run;
      }
    }
    run.accuracy = accuracy();
    if (run.accuracy >= target) {
      run.steps = run.steps_taken;
      return run;
    }
  }
  return run;
}

Knee critical_batch(const std::vector<SweepPoint>& points) {
  Knee knee;
  int reached = 0;
  for (const SweepPoint& p : points) {
    if (p.tuned_steps <= 0) continue;
    const double steps = double(p.tuned_steps), samples = steps * double(p.batch);
    knee.min_steps = reached == 0 ? steps : std::min(knee.min_steps, steps);
    knee.min_samples = reached == 0 ? samples : std::min(knee.min_samples, samples);
    ++reached;
  }
  if (reached >= 2) knee.critical_batch = knee.min_samples / knee.min_steps;
  return knee;
}

void add_sweep_verdicts(Verdicts& v, const SweepResult& sweep, const std::string& label) {
  const Knee& knee = sweep.knee;
  int reached = 0;
  for (const SweepPoint& p : sweep.points) reached += p.tuned_steps > 0;
  if (knee.critical_batch <= 0) {
    v.holds(label + "a critical batch read off the tuned curve", false,
            str(reached, " batch(es) reached the target; it takes 2 (lower --target-accuracy or raise --sweep-max-steps)"));
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
      v.cannot_fail(what, "with " + std::to_string(below) + " batch below it (a lower --target-accuracy moves it up)");
    else
      v.at_most(what, worst, kBelowCriticalFactor,
                seen + " — doubling the batch halves the steps there: 2 on the noise-scale model at B_crit, x1.25 for "
                       "the 9 % evaluation grid and held-out noise");
  }
  // The linear rule: every batch's run reached the target or diverged; none may stall.
  std::string stalled, diverged;
  for (const SweepPoint& p : sweep.points) {
    if (p.linear_diverged) diverged += (diverged.empty() ? "" : " ") + std::to_string(p.batch);
    else if (p.linear_steps <= 0)
      stalled += (stalled.empty() ? "" : ", ") + std::to_string(p.batch) + " (" + fixed(100 * p.linear_end.accuracy, 1) +
                 "% after " + std::to_string(p.linear_end.steps_taken) + " steps, loss " + fmt(p.linear_end.last_loss, 3) + ")";
  }
  v.holds(label + "the linear rule with warm-up reaches the target wherever it does not diverge (within " +
              std::to_string(kLinearStepsAllowance) + "x the tuned steps)",
          sweep.reference_lr > 0 && stalled.empty(),
          sweep.reference_lr <= 0 ? "the smallest batch reached the target at no rate of the grid: no rule to scale"
                                  : "diverged at B = " + (diverged.empty() ? std::string("none") : diverged) +
                                        "; neither reached nor diverged at B = " + (stalled.empty() ? std::string("none") : stalled));
}

}  // namespace dpt::ch02
