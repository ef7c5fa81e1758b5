/// @file data_parallel.h
/// @brief The data-parallel training loop chapters 03 and 04 share (provided,
/// not a hole): replicas from a master copy, a sharded global batch, local
/// forward/backward, a pluggable gradient average, the same step everywhere.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dpt/launch.h"
#include "dpt/nn.h"
#include "dpt/options.h"

namespace dpt::ch03 {

/// Makes every rank's `grads` the mean over ranks, in place (the part each
/// chapter does its own way: through the host in 03, around a ring in 04).
using GradientAverager = std::function<void(Context& ctx, std::vector<Tensor>& grads)>;

/// What one data-parallel run measured (on the calling rank).
struct DataParallelRun {
  std::vector<double> losses;     ///< global-batch loss per step (mean over ranks)
  double seconds = 0;             ///< wall time of the loop
  double compute_seconds = 0;     ///< forward + backward + optimizer
  double comm_seconds = 0;        ///< gradient averaging
  int64_t traffic_bytes = 0;      ///< point-to-point bytes of the loop, all ranks
};

/// The master copy: the model the flags ask for, on the host of rank 0.
/// Every rank's replica (on ctx.device) gets its values by broadcast, so all
/// replicas start identical whatever they were initialised with.
MLP make_replica(Context& ctx, const Options& options);

/// Trains `replica` for options.steps steps on global batches of
/// world · options.batch samples, rank r taking shard r (ch03::shard_indices).
DataParallelRun train_data_parallel(Context& ctx, const Options& options, const Dataset& data, MLP& replica,
                                    const GradientAverager& average, const std::string& label);

/// Rank 0's check: trains the same model from the same start on ONE device
/// with the global batch world · options.batch and returns the largest
/// |weight difference| from `trained`. Costs one extra single-device run.
double single_device_difference(const Options& options, const Dataset& data, int world, const MLP& trained);

/// Flattens tensors into one host buffer (the all-reduce payload) and back.
std::vector<float> flatten(const std::vector<Tensor>& tensors);
/// Copies consecutive slices of `flat` back into `tensors`.
void unflatten(const std::vector<float>& flat, std::vector<Tensor>& tensors);

/// Adds the flags chapters 03 and 04 share (--verify) to `app`.
void add_data_parallel_flags(CLI::App& app, bool& verify);

}  // namespace dpt::ch03
