/// @file bucketed_sync.h
/// @brief Chapter 05's bucketed gradient sync for any model (provided, not a
/// hole): give it a replica's parameters in registration order (input side
/// first) and their names; it lays out your buckets (assign_buckets) and hangs
/// a grad-ready hook on each parameter, so every syncing backward it runs
/// launches them (your mark_ready, chapter 04's ring on the rank's progress
/// thread) while backward goes on. Chapter 05's loop drives it on the MLP
/// (bucketed_training.cpp); chapter 14's on the GPT.
///
///     BucketedSync sync(ctx, model.parameters(), names, plan);   // collective: same shapes and plan on every rank
///     for (int64_t step = 0; step < steps; ++step) {
///       optimizer.zero_grad();
///       sync.begin_step(step);
///       sync.backward(model.loss(...));   // buckets launch from its hooks
///       sync.finish();                    // every grad() is now the mean over ranks
///       optimizer.step();
///       BucketStep record = sync.summarise();
///     }
///
/// Its record of each step (which bucket launched when, the rings' times) is
/// the engine's, kept apart from your holes; schedule_verdicts.h judges it.
/// The destructor removes the hooks; rings still queued when a step throws
/// keep what they use alive.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bucketed_training.h"
#include "ch05.h"
#include "dpt/launch.h"

namespace dpt::ch05 {

struct BucketEngine;

/// One rank's bucketed sync of `params`' gradients (see the file comment).
class BucketedSync {
 public:
  /// Collective in effect: every rank passes parameters of the same shapes, in
  /// the same order, and the same plan (the layout must agree). `names[i]`
  /// names params[i] in errors and the trace. plan.accumulate is the caller's.
  BucketedSync(Context& ctx, std::vector<Tensor> params, std::vector<std::string> names, const BucketPlan& plan);
  /// Removes the hooks it installed.
  ~BucketedSync();
  BucketedSync(const BucketedSync&) = delete;
  BucketedSync& operator=(const BucketedSync&) = delete;

  /// The buckets (the same on every rank).
  const std::vector<Bucket>& layout() const;
  /// The record's backward and ring times come from CUDA events (the rank's device is a GPU).
  bool gpu_clock() const;
  /// Before step `step`'s first forward: nothing ready, nothing launched.
  void begin_step(int64_t step);
  /// Backward from `loss`. `syncing`: this backward makes the step's gradients
  /// final, so its hooks launch buckets (false: an earlier micro-batch, DDP's
  /// no_sync). With plan.find_unused, what `loss` does not reach is marked
  /// ready first, with a zero gradient.
  void backward(const Tensor& loss, bool syncing = true);
  /// After the syncing backward: (with --no-overlap, launch now) wait for every
  /// bucket and unpack it (your wait_and_unpack): each parameter's grad() is
  /// then the mean over ranks.
  void finish();
  /// What this step's record says (after finish). step_s is left 0 for the caller.
  BucketStep summarise() const;

 private:
  std::shared_ptr<BucketEngine> engine_;
  BucketPlan plan_;
  std::chrono::steady_clock::time_point backward_start_, backward_end_;
};

}  // namespace dpt::ch05
