/// @file batch_sweep.h
/// @brief Chapter 02's batch sweep (provided, not a hole): steps to a target
/// held-out accuracy against the global batch, with the learning rate tuned
/// per batch over a grid and with the linear-scaling rule plus warm-up; the
/// critical batch read off the curve; the verdicts on what it measured.
///
/// `ch02_batching --batch-sweep` runs it instead of the lesson (minutes, not
/// the tour's seconds); the theory, the command and a measured table are in
/// \ref ch02_sweep. One device: a global batch is a global batch however
/// many ranks share it (chapter 03 shows that equivalence step by step).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dpt/cli_fwd.h"
#include "dpt/lecture.h"

namespace dpt::ch02 {

// ----------------------------------------------------------------------------
// flags

/// The sweep's flags (defaults as printed by --help).
struct SweepFlags {
  bool enabled = false;            ///< --batch-sweep
  int64_t max_batch = 4096;        ///< --sweep-max-batch: batches 8, 16, … up to it (a power of two)
  double target = 0.80;            ///< --target-accuracy: on the first kSweepEvalSamples held-out samples
  int64_t max_steps = 3000;        ///< --sweep-max-steps: no run goes past it
  int64_t warmup_samples = 16384;  ///< --warmup-samples: the linear rule's ramp, in samples
  std::string plot;                ///< --sweep-plot: the log-log SVG
  std::string optimizers;          ///< --sweep-optimizers: e.g. "sgd,lars,lamb", swept in turn (sweep_compare.h)
};

/// The smallest batch of the sweep.
constexpr int64_t kSweepMinBatch = 8;
/// Held-out samples each evaluation scores (the first ones of the held-out set):
/// ±0.9 % standard error at 80 %, 40 ms of forward passes for the MLP.
constexpr int64_t kSweepEvalSamples = 2000;
/// A run has diverged when a step's loss is not finite or above this many
/// times its first step's loss (ln 10 ≈ 2.3 at the start; 23 is far past any
/// loss a learning run visits).
constexpr double kDivergedLossRatio = 10;
/// The linear rule's run stops at this many times the tuned run's steps at
/// the same batch: "reaches the target" means within it.
constexpr int64_t kLinearStepsAllowance = 10;

/// Below the critical batch, steps × batch stays within this factor of E_min:
/// 2 on the noise-scale model at B = B_crit (batch_sweep.h's Knee), × 1.25
/// for the ~9 % evaluation grid and the held-out samples' noise on both ends.
constexpr double kBelowCriticalFactor = 2.5;

/// Registers --batch-sweep and its flags on `app`; refuses (exit 2) the
/// lesson's --batch, --lr and --steps beside --batch-sweep, the sweep's flags
/// without it, an optimizer with no grid, and a largest batch above --samples.
void add_sweep_flags(CLI::App& app, Options& options, SweepFlags& flags);

/// The learning-rate grid the sweep tunes `optimizer` over, ascending; empty
/// when it has none (its names: sweep_optimizers()).
std::vector<float> learning_rate_grid(const std::string& optimizer);
/// The optimizers that have a grid, "sgd, momentum".
std::string sweep_optimizers();

// ----------------------------------------------------------------------------
// bookkeeping (pure, tested on made-up curves)

/// The steps after which a run is evaluated, ascending, the last one
/// `max_steps`: every step up to 16, then each about 2^(1/8) ≈ 1.09 times
/// the one before, so a steps-to-target is found to within 9 % above.
std::vector<int64_t> evaluation_steps(int64_t max_steps);

/// The linear-scaling rule with warm-up (Goyal et al. 2017): the rate of
/// step `step` (from 0) at batch `batch`, ramped linearly in samples seen
/// from `reference` (the smallest batch's rate) to reference · batch /
/// kSweepMinBatch over the first `warmup_samples` samples, then held there.
float linear_rule_lr(float reference, int64_t batch, int64_t warmup_samples, int64_t step);

/// How one run to the target ended.
struct TargetRun {
  int64_t steps = -1;       ///< the first evaluated step with accuracy ≥ target; -1 when none
  bool diverged = false;    ///< stopped on a loss past kDivergedLossRatio × the first (or not finite)
  int64_t steps_taken = 0;  ///< optimizer steps it took before it stopped
  double accuracy = 0;      ///< the last evaluation's accuracy
  double last_loss = 0;     ///< the last step's loss
  /// True when the target was reached.
  bool reached() const { return steps >= 0; }
};

/// Runs `step` (one optimizer step; returns its loss) until the evaluation
/// after a step of evaluation_steps(max_steps) gives `accuracy()` ≥ `target`,
/// a loss diverges, or `max_steps` steps have run.
TargetRun run_to_target(const std::function<double()>& step, const std::function<double()>& accuracy, double target,
                        int64_t max_steps);

/// One batch of the sweep, as the plot and the verdicts read it: steps ≤ 0
/// means the target was not reached (or the run diverged).
struct SweepPoint {
  int64_t batch = 0;        ///< the global batch B
  int64_t tuned_steps = -1; ///< fewest steps to the target over the grid; -1 none reached
  float tuned_lr = 0;       ///< the rate that gave them
  int64_t linear_steps = -1;  ///< steps of the linear rule with warm-up; -1 not reached
  float linear_lr = 0;      ///< its rate after warm-up
  bool linear_diverged = false;  ///< the linear rule's run diverged
  TargetRun linear_end;     ///< how the linear rule's run ended (steps taken, last accuracy and loss)
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

/// What the sweep measured.
struct SweepResult {
  std::vector<SweepPoint> points;  ///< one per batch, ascending
  Knee knee;                       ///< of the tuned curve
  float reference_lr = 0;          ///< the linear rule's rate at the smallest batch (its tuned rate)
  double seconds = 0;              ///< wall time of the whole sweep
};

/// Runs the sweep of `optimizer` (--optimizer when empty) on `lec`'s data and
/// the first kSweepEvalSamples of its held-out set, prints its tables, writes
/// --sweep-plot, keeps the tuned run nearest the critical batch as the
/// lecture's model, and adds the verdicts (their lines start "optimizer: "
/// when `optimizer` is given).
SweepResult run_batch_sweep(Lecture& lec, const SweepFlags& flags, const std::string& optimizer = "");

/// The verdicts on a sweep: below the critical batch, steps × batch within
/// a factor of E_min; the linear rule reaching the target wherever it did not
/// diverge. Each line starts with `label` ("" or e.g. "lars: ").
void add_sweep_verdicts(Verdicts& v, const SweepResult& sweep, const std::string& label = "");

}  // namespace dpt::ch02
