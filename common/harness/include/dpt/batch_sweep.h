/// @file batch_sweep.h
/// @brief Steps to a target against the global batch, for any model: the
/// rate tuned per batch over a grid, the linear-scaling rule with warm-up,
/// the critical batch read off the curve, its verdicts, tables and plot.
///
/// A chapter brings one thing, a run of its model to the target (`TrainToTarget`:
/// batches of B from the same start, rate lr_at(step), a held-out score after
/// the steps the sweep asks for); the sweep does the rest. Chapter 02 sweeps
/// the MLP to a held-out accuracy (`ch02_batching --batch-sweep`), chapter 14
/// the GPT to a held-out loss in bits per character (`ch14_language_model
/// --batch-sweep`). The theory and the measured curves are on their pages
/// (\ref ch02_sweep, \ref ch14_sweep).
///
/// One device: a global batch is a global batch however many ranks share it
/// (the data-parallel chapters' step check shows that equivalence step by step).
///
/// Left out: rules other than the linear one (√B, often used for Adam); the
/// tuned curve needs no rule, and the page compares it with the linear one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dpt/cli_fwd.h"
#include "dpt/line_chart.h"
#include "dpt/report.h"
#include "dpt/verdict.h"

namespace dpt {

// ----------------------------------------------------------------------------
// what a run aims at, and how one run ended

/// The held-out score a sweep's runs aim at and which side of it counts.
struct SweepTarget {
  double value = 0;              ///< 0.80 (accuracy), 3.0 (bits per character)
  bool higher_is_better = true;  ///< accuracy: reached at >= value; a loss: at <= value
  std::string flag;              ///< the flag that sets it ("--target-accuracy"), for the verdicts' advice
  double scale = 1;              ///< a score prints as fixed(scale · score, decimals) + unit
  int decimals = 3;              ///< (accuracy: 100, 1, "%"; bits: 1, 3, " bits")
  std::string unit;              ///< see scale
  /// True when `score` is on the target's side of it (or on it).
  bool reached(double score) const { return higher_is_better ? score >= value : score <= value; }
  /// True when score `a` is strictly on the target's side of `b` (nearer it, or further past it).
  bool better(double a, double b) const { return higher_is_better ? a > b : a < b; }
  /// `score` as the tables print it ("80.0%", "3.000 bits").
  std::string show(double score) const;
};

/// How one run to the target ended.
struct TargetRun {
  int64_t steps = -1;       ///< the first evaluated step whose score reached the target; -1 when none
  bool diverged = false;    ///< stopped on a loss past kDivergedLossRatio × the first (or not finite)
  int64_t steps_taken = 0;  ///< optimizer steps it took before it stopped
  double score = 0;         ///< the last evaluation's score
  double last_loss = 0;     ///< the last step's training loss
  /// True when the target was reached.
  bool reached() const { return steps >= 0; }
};

/// A run has diverged when a step's loss is not finite or above this many
/// times its first step's loss (a first loss is ln(classes): 2.3 for 10
/// classes, 4.3 for 75 characters; ten times it is far past any loss a
/// learning run visits).
constexpr double kDivergedLossRatio = 10;
/// The linear rule's run stops at this many times the tuned run's steps at
/// the same batch: "reaches the target" means within it.
constexpr int64_t kLinearStepsAllowance = 10;
/// Below the critical batch, steps × batch stays within this factor of E_min:
/// 2 on the noise-scale model at B = B_crit (see Knee), × 1.25 for the ~9 %
/// evaluation grid and the held-out score's noise on both ends.
constexpr double kBelowCriticalFactor = 2.5;

// ----------------------------------------------------------------------------
// bookkeeping (pure, tested on made-up curves)

/// The steps after which a run is evaluated, ascending, the last one
/// `max_steps`: every step up to 16, then each about 2^(1/8) ≈ 1.09 times
/// the one before, so a steps-to-target is found to within 9 % above.
std::vector<int64_t> evaluation_steps(int64_t max_steps);

/// Runs `step` (one optimizer step; returns its loss) until the evaluation
/// after a step of evaluation_steps(max_steps) gives a `score()` that reaches
/// `target`, a loss diverges, or `max_steps` steps have run.
TargetRun run_to_target(const std::function<double()>& step, const std::function<double()>& score,
                        const SweepTarget& target, int64_t max_steps);

/// The linear-scaling rule with warm-up (Goyal et al. 2017): the rate of
/// step `step` (from 0) at batch `batch`, ramped linearly in samples seen
/// from `reference` (the rate tuned at `reference_batch`, the sweep's
/// smallest) to reference · batch / reference_batch over the first
/// `warmup_samples` samples, then held there.
float linear_rule_lr(float reference, int64_t reference_batch, int64_t batch, int64_t warmup_samples, int64_t step);

/// One batch of the sweep, as the tables, the plot and the verdicts read it.
struct SweepPoint {
  int64_t batch = 0;          ///< the global batch B
  int64_t tuned_steps = -1;   ///< fewest steps to the target over the grid; -1 none reached
  float tuned_lr = 0;         ///< the rate that gave them
  int64_t linear_steps = -1;  ///< steps of the linear rule with warm-up; -1 not reached
  float linear_lr = 0;        ///< its rate after warm-up
  bool linear_diverged = false;  ///< the linear rule's run diverged
  TargetRun linear_end;       ///< how the linear rule's run ended (steps taken, last score and loss)
  std::vector<std::optional<TargetRun>> grid_runs;  ///< each rate of the grid: its run, or none (not tried)
};

/// The curve's knee (McCandlish et al. 2018): S_min = the fewest steps of any
/// batch, E_min = the fewest samples (steps × B) of any batch, and the
/// critical batch B_crit = E_min / S_min, where the line of perfect scaling
/// through E_min (steps = E_min / B) meets the floor of S_min. On the
/// noise-scale model S = S_min (1 + B_noise / B) it is where steps are twice
/// the floor and samples twice E_min.
struct Knee {
  double min_steps = 0;       ///< S_min
  double min_samples = 0;     ///< E_min
  double critical_batch = 0;  ///< E_min / S_min; 0 when fewer than 2 batches reached the target
};
/// The knee of the tuned curve (points that reached the target only).
Knee critical_batch(const std::vector<SweepPoint>& points);

// ----------------------------------------------------------------------------
// the sweep

/// What a sweep runs: the target, the batches, the cap, the rule, the grid.
struct SweepSettings {
  SweepTarget target;                ///< what reaching means: the score, its side, its value
  int64_t min_batch = 8;             ///< the smallest batch, the linear rule's reference
  int64_t max_batch = 4096;          ///< batches min_batch, 2·min_batch, … up to it
  int64_t max_steps = 3000;          ///< no run goes past it
  int64_t warmup_samples = 16384;    ///< the linear rule's ramp, in samples
  std::vector<float> grid;           ///< the rates tried, ascending
  int first_rate = 1;                ///< the grid index where the smallest batch's search starts
  std::string optimizer;             ///< the optimizer swept, named in the curve table's title ("" names none)
};

/// One run of the chapter's model to `target` (run_to_target): from the same
/// initial weights and sample stream every time, batches of `batch`, rate
/// lr_at(step), at most `max_steps` steps.
using TrainToTarget =
    std::function<TargetRun(int64_t batch, const std::function<float(int64_t)>& lr_at, int64_t max_steps)>;

/// What the sweep measured.
struct SweepResult {
  std::vector<SweepPoint> points;  ///< one per batch, ascending
  Knee knee;                       ///< of the tuned curve
  float reference_lr = 0;          ///< the linear rule's rate at the smallest batch (its tuned rate)
  double seconds = 0;              ///< wall time of the whole sweep
};

/// Runs the sweep: at each batch the grid search (from the previous batch's
/// best rate × 2, up while a rate does better — fewer steps to the target,
/// or, while none has reached it, a score nearer it — else down, past rates
/// that diverge while none has reached it; each run
/// capped at the best steps so far), then the linear rule's run; narrates
/// each batch.
/// `on_best(batch)`, when given, is called right after `train` returned the
/// best run so far at `batch`, so the chapter can keep the model it trained.
SweepResult run_batch_sweep(const SweepSettings& settings, const TrainToTarget& train, const Narrator& say,
                            const std::function<void(int64_t batch)>& on_best = {});

/// Prints the grid table (every rate tried at every batch; only when `say`
/// narrates), the curve's table and the knee.
void print_sweep_tables(const SweepResult& sweep, const SweepSettings& settings, const Narrator& say);

/// The verdicts on a sweep: below the critical batch, steps × batch within
/// kBelowCriticalFactor of E_min; the linear rule reaching the target
/// wherever it did not diverge. Each line starts with `label` ("" or e.g.
/// "lars: ", where several sweeps judge side by side).
void add_sweep_verdicts(Verdicts& v, const SweepResult& sweep, const SweepSettings& settings,
                        const std::string& label = "");

/// The log-log chart of the sweep: steps to the target against the batch,
/// the tuned runs (series "tuned per batch", markers) and the linear rule's
/// ("linear rule + warm-up", markers; the batches where it diverged in the
/// chart's note), the line of perfect scaling through E_min, the floor
/// S_min, and the region up to the critical batch shaded.
LineChart sweep_chart(const SweepResult& sweep, const std::string& title);

// ----------------------------------------------------------------------------
// flags

/// The sweep's flags, as a chapter registers them (add_sweep_flags).
struct SweepFlags {
  bool enabled = false;         ///< --batch-sweep
  int64_t max_batch = 4096;     ///< --sweep-max-batch
  double target = 0;            ///< the chapter's target flag (--target-accuracy, --target-bits)
  int64_t max_steps = 3000;     ///< --sweep-max-steps
  int64_t warmup_samples = 16384;  ///< --warmup-samples
  std::string plot;             ///< --sweep-plot: the log-log SVG (or the chapter's own flag's path)
};

/// How a chapter names and bounds the sweep's flags.
struct SweepFlagSpec {
  int64_t min_batch = 8;                 ///< the sweep's smallest batch (--sweep-max-batch is at least it)
  std::string target_flag;               ///< "--target-accuracy"
  std::string target_help;               ///< its --help line
  double target_lo = 0;                  ///< the target's lower bound, excluded
  double target_hi = 1;                  ///< the target's upper bound
  std::vector<std::string> lesson_flags; ///< the lesson's flags that --batch-sweep refuses ("--batch", "--lr", …)
  std::string what;                      ///< --batch-sweep's --help line
  bool plot_flag = true;                 ///< register --sweep-plot (false: the chapter's own plot flag holds the path)
  std::function<void()> checks;          ///< the chapter's own checks with --batch-sweep (throw CLI::ValidationError)
  std::function<void()> run_checks;      ///< the chapter's own checks of every run, first (CLI11 keeps one final callback)
  std::vector<std::string> own_flags;    ///< the chapter's own sweep flags, refused without --batch-sweep
};

/// Runs `spec.run_checks` on every run; registers --batch-sweep, --sweep-max-batch, the target flag,
/// --sweep-max-steps, --warmup-samples and --sweep-plot (unless
/// !spec.plot_flag) on `app`; refuses
/// (exit 2) the lesson's flags beside --batch-sweep, the sweep's flags
/// (and spec.own_flags) without it, and a --sweep-max-batch that is not a power-of-two multiple
/// of the smallest batch; then runs `spec.checks`.
void add_sweep_flags(CLI::App& app, SweepFlags& flags, const SweepFlagSpec& spec);

/// The grid lowest · 2^k, k = 0 … size − 1.
std::vector<float> doubling_grid(float lowest, int size);

}  // namespace dpt
