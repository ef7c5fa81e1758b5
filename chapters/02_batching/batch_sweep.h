/// @file batch_sweep.h
/// @brief Chapter 02's batch sweep (provided, not a hole): steps to a target
/// held-out accuracy against the global batch, for the MLP. The sweep itself
/// (grid search, linear rule with warm-up, critical batch, verdicts, tables,
/// plot) is the harness's, dpt/batch_sweep.h, which chapter 14 shares; this
/// file brings the MLP's run, its rate grids and its flags.
///
/// `ch02_batching --batch-sweep` runs it instead of the lesson (minutes, not
/// the tour's seconds); the theory, the command and a measured table are in
/// \ref ch02_sweep. One device: a global batch is a global batch however
/// many ranks share it (chapter 03 shows that equivalence step by step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/batch_sweep.h"
#include "dpt/cli_fwd.h"
#include "dpt/lecture.h"

namespace dpt::ch02 {

/// The smallest batch of the sweep.
constexpr int64_t kSweepMinBatch = 8;
/// Held-out samples each evaluation scores (the first ones of the held-out set):
/// ±0.9 % standard error at 80 %, 40 ms of forward passes for the MLP.
constexpr int64_t kSweepEvalSamples = 2000;

/// The harness's sweep flags and chapter 02's own: --sweep-optimizers.
struct MlpSweepFlags : SweepFlags {
  std::string optimizers;  ///< --sweep-optimizers: e.g. "sgd,lars,lamb", swept in turn (sweep_compare.h)
};

/// Registers --batch-sweep and its flags on `app` (dpt::add_sweep_flags, the
/// target as --target-accuracy, default 0.80) and --sweep-optimizers; refuses
/// (exit 2) the lesson's --batch, --lr and --steps beside --batch-sweep, an
/// optimizer with no grid, a largest batch above --samples, and beside
/// --sweep-optimizers --optimizer, --sweep-plot and a list parse_sweep_optimizers refuses.
void add_sweep_flags(CLI::App& app, Options& options, MlpSweepFlags& flags);

/// The learning-rate grid the sweep tunes `optimizer` over, ascending; empty
/// when it has none (its names: sweep_optimizers()).
std::vector<float> learning_rate_grid(const std::string& optimizer);
/// The optimizers that have a grid, "sgd, momentum, lars, lamb".
std::string sweep_optimizers();

/// The sweep's settings from its flags: the target on accuracy, batches from
/// kSweepMinBatch, `optimizer`'s grid (named in the tables).
SweepSettings sweep_settings(const SweepFlags& flags, const std::string& optimizer);

/// Runs the sweep of `optimizer` (--optimizer when empty) on `lec`'s data and
/// the first kSweepEvalSamples of its held-out set, prints its tables, writes
/// --sweep-plot, keeps the tuned run nearest the critical batch as the
/// lecture's model (beside --sweep-optimizers, the first optimizer's only),
/// and adds the verdicts (their lines start "optimizer: " when `optimizer` is given).
SweepResult run_batch_sweep(Lecture& lec, const MlpSweepFlags& flags, const std::string& optimizer = "");

}  // namespace dpt::ch02
