/// @file tp_training.h
/// @brief The training loop of a T × D run: each TP group trains one model
/// on its share of the global batch; the DP groups average the slices'
/// gradients. What it measured, for the lecture's tables and verdicts.
///
/// Samples: every rank draws the same global batch of D·B samples (B =
/// --batch, per model); TP group d takes strided_shard(global, d, D) —
/// every rank of a TP group the same B samples, as they must: they compute
/// one model's forward together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/launch.h"
#include "dpt/options.h"
#include "dpt/step_check.h"
#include "groups.h"
#include "tp_model.h"

namespace dpt::ch12 {

/// What one run measured on the calling rank.
struct TensorParallelRun {
  std::vector<double> losses;       ///< global-batch loss per step (mean over the DP group)
  double seconds = 0;               ///< wall time of the loop
  double tp_bytes_per_step = 0;     ///< all-reduce payload this rank passed in its TP group, per step (forward + backward)
  double tp_calls_per_step = 0;     ///< all-reduce calls in its TP group, per step
  double dp_bytes_per_step = 0;     ///< all-reduce payload this rank passed in its DP group, per step
  int64_t hidden_elements = 0;      ///< split activations of the last forward on this rank
  double replicated_spread = 0;     ///< max |b − b on TP rank 0| over the replicated (row-parallel) biases, after training
};

/// Collective over the world: trains `model` for o.steps steps (optimizer
/// --optimizer on the slices). On world rank 0, `recorder` (when given and
/// enabled) records the full model's weights and gradients at its chosen
/// steps, gathered over the TP group, for the one-device check.
TensorParallelRun train_tensor_parallel(Context& ctx, Groups& groups, const Options& o, const Dataset& data,
                                        TensorParallelMLP& model, StepRecorder* recorder, const std::string& label);

}  // namespace dpt::ch12
