/// @file sweep_compare.h
/// @brief Chapter 02's optimizer comparison (provided, not a hole):
/// `--batch-sweep --sweep-optimizers sgd,lars,lamb` runs the batch sweep
/// (batch_sweep.h) once per optimizer, prints their curves side by side, and
/// judges the layer-wise ones where the first, plain one gives out.
///
/// "Gives out" is read off the plain optimizer's own sweep: a batch where its
/// linear rule with warm-up diverged, or one past its critical batch (where
/// doubling the batch stopped halving its steps). The verdicts ask of each
/// other optimizer what its own sweep measured there: did its tuned run reach
/// the target at every such batch, and did its critical batch move up by at
/// least kKneeShiftFactor. The theory and a measured run are in
/// \ref ch02_sweep_compare.
#pragma once

#include <string>
#include <vector>

#include "batch_sweep.h"

namespace dpt::ch02 {

/// A layer-wise optimizer's critical batch must be at least this many times
/// the plain one's: one doubling of the batch, the sweep's own resolution
/// (a knee that moved by less is within a grid step of where it was).
constexpr double kKneeShiftFactor = 2;

/// The optimizers of --sweep-optimizers ("sgd,lars,lamb"), in order. Throws
/// CLI::ValidationError (exit 2) naming the flag for a name with no grid
/// (learning_rate_grid), a repeat, or fewer than two.
std::vector<std::string> parse_sweep_optimizers(const std::string& list);

/// One optimizer's sweep.
struct OptimizerSweep {
  std::string optimizer;  ///< its name
  SweepResult sweep;      ///< what run_batch_sweep measured
};

/// The batches where `plain` gives out, ascending: its linear rule diverged
/// there, or the batch is past its critical batch (none past it when it has none).
std::vector<int64_t> batches_past_plain(const SweepResult& plain);

/// The side-by-side table: per batch, each optimizer's tuned steps and rate
/// and its linear rule's outcome, a `*` on the batches past the plain one;
/// then each one's critical batch.
std::string comparison_table(const std::vector<OptimizerSweep>& sweeps);

/// The verdicts on a comparison; sweeps[0] is the plain optimizer. For each
/// other one: its tuned run reached the target at every batch of
/// batches_past_plain (cannot fail when there are none), and its critical
/// batch is at least kKneeShiftFactor times the plain one's.
void add_comparison_verdicts(Verdicts& v, const std::vector<OptimizerSweep>& sweeps);

/// --sweep-optimizers: run_batch_sweep for each optimizer of the list in turn
/// (each prints its tables and adds its own verdicts), then the table and the
/// comparison's verdicts.
void run_optimizer_comparison(Lecture& lec, const MlpSweepFlags& flags);

}  // namespace dpt::ch02
