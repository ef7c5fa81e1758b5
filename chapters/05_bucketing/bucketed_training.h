/// @file bucketed_training.h
/// @brief Chapter 05's training loop (provided, not a hole): the core's
/// data-parallel loop (dpt/data_parallel.h) with gradient sync moved *into*
/// backward. Each parameter's grad-ready hook calls your ch05::mark_ready;
/// each launch packs a bucket and queues chapter 04's ring all-reduce on the
/// rank's progress thread (Communicator::async: one thread per rank that runs
/// queued work in issue order, so this rank's buckets reach the ring in the
/// order mark_ready launched them, while backward goes on);
/// ch05::wait_and_unpack runs before the step.
///
/// It also keeps its own record of every step, independent of your holes:
/// when each gradient became ready, which bucket launched when and in what
/// order, when each all-reduce ran on the progress thread (on a GPU: when
/// backward and each ring ran on the GPU, timed by CUDA events). The chapter's
/// verdicts and the bench are computed from that record.
///
/// Left out: gradients as views into the buckets,
/// overlapping the optimizer step, more than one progress thread per rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ch05.h"
#include "dpt/data.h"
#include "dpt/launch.h"
#include "dpt/nn.h"
#include "dpt/options.h"
#include "dpt/step_check.h"

namespace dpt::ch05 {

/// How to bucket and when to sync.
struct BucketPlan {
  int64_t cap_bytes = 1 << 20;        ///< --bucket-mb in bytes (0: one bucket per parameter)
  int64_t first_cap_bytes = 1 << 20;  ///< --first-bucket-mb in bytes (cap of bucket 0)
  bool overlap = true;                ///< false: launch every bucket after backward (--no-overlap)
  int64_t accumulate = 1;             ///< micro-batches per step; only the last one syncs
  bool find_unused = false;           ///< --find-unused-parameters: after forward, mark what it did not reach ready
};

/// What one step measured on this rank (times in seconds). On host memory
/// all on the host's clock; on a GPU backward_s, comm_s and hidden_s on the
/// GPU's (CUDA events: backward's kernels, each ring's work on the
/// communication stream from its pack to its last kernel), step_s the host's.
struct BucketStep {
  double backward_s = 0;   ///< the syncing micro-batch's backward
  double comm_s = 0;       ///< the buckets' all-reduces, summed
  double hidden_s = 0;     ///< the part of comm_s that ran while backward ran
  double step_s = 0;       ///< the whole step: forward, backward, wait, optimizer (host clock)
  bool in_order = true;    ///< buckets launched as 0, 1, 2, …
  int launched_unready = 0;  ///< buckets launched while one of their gradients was not ready
  int launched_early = 0;    ///< buckets launched before the step's last gradient was ready
  int held_back = 0;         ///< times a hook returned while a bucket that could have launched still waited
};

/// What a bucketed run measured on this rank.
struct BucketedRun {
  std::vector<Bucket> layout;      ///< the buckets (same on every rank)
  std::vector<double> losses;      ///< global-batch loss per step (mean over ranks)
  std::vector<BucketStep> steps;   ///< per step, this rank
  int64_t diverged_step = -1;      ///< first non-finite loss (training stopped), -1 if none
  double seconds = 0;              ///< wall time of the loop
  bool gpu_clock = false;          ///< steps' backward/comm/hidden timed by CUDA events (the rank's device is a GPU)
  TrafficLog traffic;              ///< every rank's sends during the loop (gathered)
};

/// Parameter sizes in bytes, in parameters() order: 4·numel each.
std::vector<int64_t> parameter_bytes(const MLP& model);

/// Collective: trains `replica` for options.steps steps; each step draws a
/// global batch of world·batch·accumulate samples (the single-device oracle's
/// batch), micro-batch k is its slice [k·world·batch, (k+1)·world·batch),
/// strided over ranks. Gradients of the K micro-batches accumulate (each loss
/// scaled by 1/K); only the last backward launches buckets. Stops on every
/// rank alike at the first non-finite global loss. `recorder` (optional)
/// keeps the weights and unpacked gradients for the step-by-step check.
BucketedRun train_bucketed(Context& ctx, const Options& options, const Dataset& data, MLP& replica,
                           const BucketPlan& plan, const std::string& label, StepRecorder* recorder = nullptr);

/// The layout as a table: bucket → parameter names (`names[i]` for
/// parameter i), bytes (rank 0 prints it).
std::string describe_layout(const std::vector<Bucket>& layout, const std::vector<std::string>& names);
/// The same, named by `model`'s named_parameters().
std::string describe_layout(const std::vector<Bucket>& layout, const MLP& model);

}  // namespace dpt::ch05
