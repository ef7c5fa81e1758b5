/// @file data_parallel.h
/// @brief The data-parallel training loop every chapter from 03 on shares:
/// replicas from a master copy, a sharded global batch, local forward and
/// backward, a pluggable gradient sync, the same optimizer step everywhere.
/// Also what its checks need: single-device training on the global batch
/// (the equivalence oracle). flatten/unflatten (one all-reduce payload for all
/// gradients) are tensor operations, in dpt/flatten.h, included here.
///
///     MLP replica = dpt::make_replica(ctx, options);                // master → replicas
///     DataParallelRun run = dpt::train_data_parallel(ctx, options, data, replica,
///                                                    dpt::average_gradients, "train");  // the library's mean
///
/// The hook is where the chapters differ: 04 averages on a ring, 05 in
/// buckets during backward, 06 every H steps, 07 with reduce-scatter.
/// Chapter 03 writes the whole step itself and runs it in run_data_parallel.
/// Left out: gradient accumulation, mixed precision, unequal shards.
#pragma once

#include "dpt/cli_fwd.h"
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/comm.h"
#include "dpt/flatten.h"
#include "dpt/launch.h"
#include "dpt/nn.h"
#include "dpt/options.h"
#include "dpt/verdict.h"

namespace dpt {

class StepRecorder;

// ----------------------------------------------------------------------------
// the hooks

/// Makes every rank's `grads` (one tensor per parameter, on ctx.device) the
/// mean over ranks, in place. Called once per step by every rank, after
/// backward and before the optimizer step.
using GradientSync = std::function<void(Context& ctx, std::vector<Tensor>& grads)>;

/// Which of the global batch's sample indices rank `rank` of `world` trains
/// on. Every rank must get global.size() / world of them, each index exactly
/// once over all ranks (equal shards: the mean of the shards' mean losses is
/// then the global batch's mean loss).
using Sharder = std::function<std::vector<int64_t>(const std::vector<int64_t>& global, int rank, int world)>;

/// Collective over `comm`: every tensor becomes its mean over the ranks, the
/// same bits on every rank — one all-reduce (ReduceOp::Avg) of all of them
/// back to back, on the first tensor's device (a GPU's: no host round trip).
/// Gradient averaging over the world or over a group (a tensor-parallel
/// model's data-parallel copies, a pipeline stage's).
void average_over_ranks(Communicator& comm, std::vector<Tensor>& tensors);

/// The GradientSync of plain data parallelism, the library's all-reduce
/// (chapters 04–10's baseline): average_over_ranks(ctx.comm, grads).
void average_gradients(Context& ctx, std::vector<Tensor>& grads);

/// The default Sharder: rank r takes global[r], global[r + world], … (what
/// PyTorch's DistributedSampler does). Throws dpt::Error when global.size()
/// does not divide by world.
std::vector<int64_t> strided_shard(const std::vector<int64_t>& global, int rank, int world);

// ----------------------------------------------------------------------------
// the loop

/// What one data-parallel run measured (on the calling rank).
struct DataParallelRun {
  std::vector<double> losses;   ///< global-batch loss per step (mean over ranks)
  int64_t diverged_step = -1;   ///< first step whose loss was not finite (training stopped there); -1 if none
  double seconds = 0;           ///< wall time of the loop on this rank
  double compute_seconds = 0;   ///< forward + backward + optimizer, this rank
  double sync_seconds = 0;      ///< gradient sync, this rank
  TrafficLog traffic;           ///< every rank's point-to-point sends during the loop (gathered)
  /// Point-to-point bytes per step, all ranks together (0 when no step ran).
  double bytes_per_step() const;
};

/// Rank 0 builds the master copy on its host (the model the flags ask for:
/// seeded, or --load-weights) and broadcasts it (weights and batch norm's
/// running statistics) to every rank's replica on
/// ctx.device. Each replica is first initialised from a seed of its own, so
/// replicas start identical only because of the broadcast. Collective.
MLP make_replica(Context& ctx, const Options& options);

/// Makes every rank's batch-norm running statistics (running mean and var)
/// rank 0's: on rank 0, `master`'s are first copied into `replica` (when
/// `master` is given); then rank 0 broadcasts them. They are buffers, not
/// weights: no gradient or optimizer touches them, so a copy of the weights
/// alone leaves a loaded model's statistics on rank 0 only. Collective;
/// nothing to do without batch norm.
void broadcast_running_statistics(Communicator& comm, const MLP* master, MLP& replica);

/// This rank's replica before any master copy reached it: the flags'
/// architecture on ctx.device, initialised from a seed of its own
/// (--seed + 1 + rank; --load-weights is not read), so that replicas are
/// equal only once something copies one model into all of them. Not collective.
MLP make_replica_apart(Context& ctx, const Options& options);

/// Collective: trains `replica` for options.steps steps on global batches of
/// world · options.batch samples (every rank draws the same global batch; rank
/// r trains on shard(global, r, world)), calling `sync` each step. Clears the
/// traffic log first, so run.traffic holds the loop's messages only. Stops
/// early, on every rank alike, when the global loss is not finite.
/// `recorder` (optional) records the state around chosen steps for the
/// step-by-step check against one device (dpt/step_check.h).
DataParallelRun train_data_parallel(Context& ctx, const Options& options, const Dataset& data, MLP& replica,
                                    const GradientSync& sync, const std::string& label,
                                    const Sharder& shard = strided_shard, StepRecorder* recorder = nullptr);

/// A whole data-parallel step, written by a chapter (chapter 03 writes it
/// from scratch): given the step's global batch (the same indices on every
/// rank), trains this rank's replica one step and returns its loss on its own
/// samples. On return every parameter's grad() must hold the gradient the step
/// applied (the step-by-step check reads it).
using DataParallelStep = std::function<float(const std::vector<int64_t>& global_batch)>;

/// Collective: the loop of train_data_parallel around a whole `step`: draws
/// each step's global batch (world · options.batch samples, the same on every
/// rank), calls `step`, and does the bookkeeping (global loss, metrics,
/// progress, traffic, time; compute is the step's time less its Communicator
/// calls). `replica` is what `step` trains (read for `recorder`: its weights
/// before the step and its gradients after). Stops early, on every rank
/// alike, when the global loss is not finite.
DataParallelRun run_data_parallel(Context& ctx, const Options& options, const Dataset& data, MLP& replica,
                                  const DataParallelStep& step, const std::string& label,
                                  StepRecorder* recorder = nullptr);

// ----------------------------------------------------------------------------
// the checks

/// The oracle: the model the flags ask for, trained serially on the host with
/// batch `global_batch` (same seed, same sampler, same samples per step).
MLP train_single_device(const Options& options, const Dataset& data, int64_t global_batch);

class Optimizer;
/// Builds the optimizer for a model's parameters (e.g. AdamW with a chosen λ).
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor> params)>;
/// train_single_device with the optimizer `make` builds instead of --optimizer's.
MLP train_single_device(const Options& options, const Dataset& data, int64_t global_batch, const OptimizerFactory& make);

/// Largest |a − b| over all parameters of two models of the same shape (any
/// devices). A NaN anywhere is the largest difference: the result is NaN.
double max_weight_difference(const MLP& a, const MLP& b);

/// Collective: the largest |w_r − w_0| over ranks r and parameters, the same
/// on every rank (0 when all replicas are bit-identical; NaN if any is NaN).
double replica_spread(Context& ctx, const MLP& replica);

/// Collective: replica_spread's measure over batch norm's running mean and
/// var instead of the parameters (0 without batch norm).
double running_statistics_spread(Context& ctx, const MLP& replica);

/// Tolerance of "data-parallel weights = single-device weights", argued: the
/// data-parallel run sums the same products in another order (per-shard means,
/// then a mean of means), ~1e-7 relative per step on O(0.1) gradients. Most
/// runs stay there (ch03/ch04 with SGD: 7e-8 after 300 steps), but the drift
/// is not bounded by steps × 1e-7: momentum carries each rounding forward
/// (1/(1−β) = 10×), and a ReLU input that sits within rounding of 0 switches
/// in one run and not the other, after which the two runs differ by that
/// unit's whole contribution. Measured on correct code: 1.1e-5 (784-256-10,
/// momentum, 300 steps), 3e-5 (784-512-512-512-10, 60 steps), 2.2e-5 (ch05,
/// 64 accumulated micro-batches). 1e-4 is 3× above the worst of those, and
/// still 10× below a real mistake (a shard dropped, a sum not divided by N,
/// one rank counted twice, replicas started apart: 1e-3 or more within 30
/// steps; the tests plant each one). It holds for short runs only: over
/// hundreds of steps a ReLU switch can take two correct runs past it (ch03, 2
/// ranks: 2.4e-4 at step 280), which is why the chapters' verdict compares
/// step by step (dpt/step_check.h); the tests compare whole short runs.
constexpr double kSingleDeviceTolerance = 1e-4;

/// Adds the verdict "max |w - w_single-device|" <= kSingleDeviceTolerance to
/// `verdicts`, worded by its outcome: a pass is float rounding, a failure
/// (NaN included) says the two runs computed different things.
void add_single_device_verdict(Verdicts& verdicts, double difference);

/// Adds two verdicts on `traffic` (every rank's sends during `calls` ring
/// all-reduces of S = bytes_per_call bytes each), prefixed with `what`:
///  - "each rank sends only to its right neighbour", worded so only when the
///    matrix shows exactly that; otherwise "the traffic is not a ring", naming
///    what was seen (sends to the left, to non-neighbours, everything through
///    rank 0, a rank silent towards its right);
///  - bytes sent per rank within 8(n−1)·calls of 2(n−1)/n·S·calls (chunks
///    differ by at most one float: 2(n−1) sends of 4 bytes per call).
void add_ring_traffic_verdicts(Verdicts& verdicts, const TrafficLog& traffic, double bytes_per_call, int64_t calls,
                               const std::string& what);

// ----------------------------------------------------------------------------
// helpers

/// Largest |a[i] − b[i]| of two flat vectors of the same size; a NaN
/// anywhere is the largest difference there is: the result is NaN.
double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b);
/// Adds the flag the data-parallel chapters share: --verify / --no-verify
/// (train on one device too and compare the weights; default on).
void add_data_parallel_flags(CLI::App& app, bool& verify);

}  // namespace dpt
