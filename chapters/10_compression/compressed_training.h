/// @file compressed_training.h
/// @brief Chapter 10's training (provided, not a hole): the core's
/// data-parallel loop (dpt/data_parallel.h) with a gradient sync that
/// compresses, with or without error feedback, and what a run measured:
/// bytes per step from the traffic log, and error feedback's invariant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compressor.h"
#include "dpt/data_parallel.h"
#include "dpt/evaluate.h"
#include "dpt/step_check.h"

namespace dpt::ch10 {

/// One setting of the chapter: a compressor spec, with or without error feedback.
struct Setting {
  std::string compress = "none";  ///< --compress
  bool error_feedback = false;    ///< --error-feedback
  /// "topk:100 +EF".
  std::string name() const { return compress + (error_feedback ? " +EF" : ""); }
};

/// What one compressed run measured (the same on every rank unless said).
struct CompressedRun {
  Setting setting;            ///< what ran
  bool written = true;        ///< false: a hole threw NotImplemented
  std::string not_written;    ///< its message ("not implemented: ch10: …") when written is false
  DataParallelRun run;        ///< losses, and every rank's traffic during the loop
  Evaluation test;            ///< rank 0: held-out score of rank 0's replica
  /// Error feedback's invariant on each rank, max over ranks and entries of
  /// |Σ_t delivered_t + residual_T − Σ_t g_t| (delivered_t: what the
  /// compressor reported delivered of this rank's input at step t). Without
  /// error feedback the residual is 0: this is what the compressor lost.
  double invariant_gap = 0;
  /// The float rounding that gap may show: Σ_t 4 · 2^-24 · (max |g_t| + max |e_t−1|)
  /// (two float roundings of each entry per step, g + e and p − delivered).
  double invariant_bound = 0;
  double replica_spread = 0;    ///< max |w_r − w_0| at the end (0: every rank applied the same updates)
  double largest_residual = 0;  ///< max |residual| at the end, over ranks
  int64_t steps = 0;            ///< steps the loop ran
};

/// Collective: trains `replica` (fresh from make_replica) as the flags say,
/// syncing gradients through `setting`'s compressor. `recorder` (may be null)
/// records for the step check: only an uncompressed run takes one device's steps.
/// A hole's NotImplemented leaves written false (rank 0 says so).
CompressedRun train_compressed(Context& ctx, const Options& o, const Dataset& data, MLP& replica,
                               const Setting& setting, StepRecorder* recorder = nullptr);

/// The shapes of a model's parameters, in parameters() order.
std::vector<Shape> parameter_shapes(const MLP& model);

}  // namespace dpt::ch10
