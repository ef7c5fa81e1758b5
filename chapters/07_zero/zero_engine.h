/// @file zero_engine.h
/// @brief Chapter 07's trainer (provided, not a hole): one MLP held as ZeRO
/// stage 0, 1, 2 or 3 holds it (ZeroState, ch07.h), trained with Adam/AdamW.
///
/// A step: forward and backward through zero_layers.h; backward fills the
/// gradients of whole layers, last layer first, into buckets of consecutive
/// layers (at most --bucket-mb, a larger layer alone), and each bucket, once
/// complete, goes to the stage's on_bucket_ready; then update_parameters.
/// What the stage does at those two points, and around each layer's use, is
/// the student's (ch07.h). Every allocation is charged to a memory category
/// (dpt/memory_ledger.h).
///
/// Left out: mixed precision (the paper's 2+2+12 bytes), gradient
/// accumulation, overlapping the reduce-scatter with backward (chapter 05 did
/// that), and CPU offload.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ch07.h"
#include "dpt/data.h"
#include "dpt/launch.h"
#include "dpt/memory_ledger.h"
#include "dpt/options.h"
#include "dpt/step_check.h"

namespace dpt::ch07 {

/// What to run.
struct ZeroPlan {
  int stage = 0;                 ///< 0 … 3
  bool prefetch = false;         ///< stage 3: gather the next layer while this one computes
  int64_t bucket_bytes = 1 << 20;  ///< bucket cap (consecutive layers, last first; a larger layer alone)
  AdamConfig adam;               ///< the optimizer
  /// Stage 0 only (optional): after the gradient all-reduce and before Adam,
  /// the step's parameters and averaged gradients for the step-by-step check
  /// against one device, on the steps the recorder keeps (asked every step;
  /// on a GPU the buffers are copied to the host only for those), as
  /// train_data_parallel hands its own (dpt/step_check.h).
  StepRecorder* recorder = nullptr;
};

/// One bucket: consecutive layers, filled last layer first; a flat range.
struct LayerBucket {
  Range range;              ///< the layers' flat range
  std::vector<int> layers;  ///< in fill order (descending)
};

/// One rank's model, gradients and optimizer state under a ZeRO stage.
class ZeroTrainer {
 public:
  /// `initial` holds the Ψ parameters (flatten(parameters()), same on every
  /// rank); `widths` the MLP's. Keeps only what `plan.stage` keeps.
  ZeroTrainer(Context& ctx, const std::vector<int64_t>& widths, const std::vector<float>& initial, const ZeroPlan& plan);
  ~ZeroTrainer();
  ZeroTrainer(const ZeroTrainer&) = delete;
  ZeroTrainer& operator=(const ZeroTrainer&) = delete;

  /// One training step on this rank's batch: forward, backward (each
  /// complete bucket to on_bucket_ready), update_parameters. Returns the
  /// local loss. `steps`: the run's length (for the recorder). Collective.
  float step(const Batch& batch, int64_t steps);
  /// Collective: all Ψ parameters (flat, unpadded), on every rank.
  std::vector<float> full_parameters();

  /// The flat layout.
  const Partition& partition() const { return part_; }
  /// Layer l's flat range (weight then bias).
  const std::vector<Range>& layer_ranges() const { return layers_; }
  /// The buckets, in the order backward completes them.
  const std::vector<LayerBucket>& buckets() const { return buckets_; }
  /// Adam steps taken.
  int64_t steps_taken() const { return t_; }

  /// This rank's S-float shard of the parameters / m / v (for checkpoints).
  std::vector<float> shard_of_params() const;
  /// m and v, this rank's S floats each.
  std::vector<float> shard_of_moment(int which) const;
  /// Restores this rank's shard of parameters, m, v and the step count
  /// (stage 0–2 then all-gather the parameters: collective).
  void restore(const std::vector<float>& params, const std::vector<float>& m, const std::vector<float>& v, int64_t t);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Partition part_;
  std::vector<Range> layers_;
  std::vector<LayerBucket> buckets_;
  int64_t t_ = 0;
};

/// Memory of one device by category (memory_ledger.h), bytes.
struct MemorySnapshot {
  std::array<double, kMemoryCategories> current{};  ///< in use at the end
  std::array<double, kMemoryCategories> peak{};     ///< each category's own peak
  std::array<double, kMemoryCategories> at_peak{};  ///< the categories when the total peaked
  double peak_total = 0;                            ///< the highest total
};

/// Reads `device`'s ledger.
MemorySnapshot snapshot_memory(const Device& device);

/// What a run measured on this rank.
struct ZeroRun {
  std::vector<double> losses;      ///< global loss per step (mean over ranks)
  int64_t diverged_step = -1;      ///< first non-finite loss (or one above max_loss), -1 if none
  int64_t diverged_batch = -1;     ///< the batch of the global order that step drew, -1 if none
  std::vector<double> step_seconds;  ///< per step, this rank
  double seconds = 0;              ///< the loop's wall time
  TrafficLog traffic;              ///< every rank's sends during the loop
  MemorySnapshot memory;           ///< this rank's device, from just before the first step
  std::vector<Range> layers;       ///< the layout trained: each layer's flat range
  std::vector<LayerBucket> buckets;  ///< and the buckets
  std::vector<float> weights;      ///< the final Ψ parameters (flat)
};

/// A run that starts from a checkpoint or saves them (zero_checkpoint.h
/// makes one from the flags), with its planned crash, its loss bound and the
/// batches it skips; the default trains from step 0, saving nothing.
struct ZeroCheckpoints {
  int64_t first_step = 0;                              ///< steps already taken
  std::function<void(ZeroTrainer&)> before;           ///< once, before the first step (restores)
  std::function<void(int64_t steps_done, ZeroTrainer&)> after;  ///< after every step (saves)
  /// At the start of every step, before its batch (a planned crash: zero_fault.h).
  std::function<void(int64_t step)> starting;
  /// > 0: a step whose loss is above it stops the run as a non-finite one does (--max-loss).
  double max_loss = 0;
  /// Batches of the global order never drawn (--skip-batch): step k draws
  /// batch_of_step(k, these) (zero_fault.h).
  std::vector<int64_t> skipped_batches;
};

/// Collective: builds the trainer from `initial` (Ψ floats), trains steps
/// [checkpoints.first_step, options.steps) on global batches of world·batch
/// samples (rank r takes the strided shard, as every chapter since 03),
/// calling checkpoints.before once and .after after each step. Stops on
/// every rank alike at the first non-finite loss. An out-of-memory error says
/// which stage would fit the device's capacity.
ZeroRun train_zero(Context& ctx, const Options& options, const Dataset& data, const std::vector<float>& initial,
                   const ZeroPlan& plan, const std::string& label, const ZeroCheckpoints& checkpoints = {});

}  // namespace dpt::ch07
