/// @file step_check.h
/// @brief "Did the data-parallel run take one device's steps?" — checked step
/// by step, so float rounding cannot accumulate into a false alarm.
///
/// Comparing the end of a data-parallel run with the end of a single-device
/// run is not a trustworthy check over hundreds of steps. The two sum the same
/// products in another order (~1e-7 relative per step); that alone is
/// harmless, but once a ReLU input sits within that rounding of zero it
/// switches in one run and not the other, and from then on the runs differ by
/// that unit's whole contribution — a correct 2-rank run of chapter 03 was
/// 6e-8 from one device at step 250 and 2.4e-4 at step 280.
///
/// So the check anchors one device to the data-parallel run, and compares
/// what data parallelism is responsible for: the gradient. On rank 0, a
/// `StepRecorder` keeps the weights before chosen steps and the gradient the
/// sync left (every step when they fit its memory budget, else evenly spaced
/// steps, always the first and the last). Afterwards one device takes each of
/// those weights, computes the gradient of that step's whole global batch, and
/// compares: max |g_dp − g_one| / max |g_one| must stay at float rounding. The
/// optimizer step that follows is the same code on the same gradient on both
/// sides — and comparing weights after it would not work for Adam, whose first
/// step turns a rounding-level gradient (1e-10 where sums cancel) into a step
/// of ±lr. A real mistake (a shard dropped, a sum for a mean, a wrong chunk)
/// is off by a fraction of the gradient itself at every step it touches.
///
/// Within one step the same kinks remain: a GPU sums a rank's batch of 32 in
/// another order than one device's batch of 128, and a ReLU input within
/// that rounding of 0 flips, moving one sample's contribution below the unit
/// (measured on an H100: 6e-3 where rounding is 4e-6). So each entry may
/// differ by what dpt/kink_allowance.h bounds from one device's own forward
/// — the kinked units' rows and the layers below them, never the last layer
/// — and the check judges what lies beyond that allowance.
/// The first recorded weights must also be the model the flags ask for, bit
/// for bit (the master copy reached the replica); that every replica holds the
/// same weights is `replica_spread`'s check (dpt/data_parallel.h).
///
///     StepRecorder recorder(ctx.is_root() && verify);
///     run = train_data_parallel(ctx, o, data, replica, sync, "train", strided_shard, &recorder);
///     if (ctx.is_root()) add_step_check_verdicts(v, recorder.replay(o, data, o.batch * ctx.world));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/data.h"
#include "dpt/nn.h"
#include "dpt/options.h"

namespace dpt {

class Verdicts;

/// Tolerance of "the synced gradient = one device's gradient", relative to
/// the gradient's largest entry. Sums in another order differ by ~1e-7 of the
/// summed terms, and a per-sample term can be ~20× the batch mean it adds to
/// (they cancel): ~2e-6 relative, measured 1e-7 to 2e-6 on correct ch03–ch05
/// runs. A mistake is off by a fraction of the gradient itself (a sum for a
/// mean with 2 ranks: 1; one shard of 4 dropped: ~0.3): 1e-4 sits 50× above
/// rounding and 1000× below a mistake.
constexpr double kStepGradientTolerance = 1e-4;

/// What replaying the recorded steps on one device found.
struct StepCheck {
  int64_t steps_run = 0;          ///< steps the data-parallel run took
  std::vector<int64_t> checked;   ///< which of them were replayed on one device
  double difference = 0;          ///< max over checked steps of max|g_dp − g_one| / max|g_one| (NaN wins)
  int64_t worst_step = -1;        ///< the step where it was largest
  double start_difference = 0;    ///< max |w_dp − w_flags| before the first step (0: the master copy arrived)
  double raw_difference = 0;      ///< the same as `difference` with no kink allowance (NaN wins)
  int64_t kink_units = 0;         ///< (sample, unit) pairs on a ReLU kink, summed over checked steps
  int64_t kink_samples = 0;       ///< samples with a unit on a kink, summed over checked steps
};

/// One step's verdict material: `synced` (the data-parallel run's gradient,
/// flattened in parameters() order) against one device's gradient of the mean
/// loss of `model` (host) on `batch` (host), entry by entry beyond the kink
/// allowance (dpt/kink_allowance.h), relative to max |g_one|.
struct StepComparison {
  double difference = 0;      ///< max_i max(0, |g_i − g_one,i| − allowance_i) / max |g_one| (NaN if any is NaN)
  double raw_difference = 0;  ///< max_i |g_i − g_one,i| / max |g_one|
  int64_t kink_units = 0;     ///< (sample, unit) pairs within rounding of a ReLU's kink
  int64_t kink_samples = 0;   ///< samples with at least one
};
/// Computes one device's gradient (overwrites `model`'s gradients) and compares.
StepComparison compare_step_gradient(MLP& model, const Batch& batch, const std::vector<float>& synced);

/// Records (weights, optimizer state) on one rank before and after chosen steps.
class StepRecorder {
 public:
  /// Snapshot memory allowed by default; past it, steps are spaced out.
  static constexpr std::size_t kDefaultBudget = std::size_t(128) << 20;
  /// A recorder that records only when `enabled` (rank 0 with --verify).
  explicit StepRecorder(bool enabled = false, std::size_t budget_bytes = kDefaultBudget)
      : enabled_(enabled), budget_(budget_bytes) {}

  /// Call after `step`'s gradient sync, before its optimizer step: records
  /// the weights and the synced gradients when `step` is one of the chosen
  /// steps. `steps` is the run's length (the plan is made at step 0).
  void record(int64_t step, int64_t steps, const std::vector<Tensor>& params);
  /// The same for a loop that keeps its parameters and synced gradients as
  /// flat buffers in parameters() order (chapter 07): `count` floats of each.
  void record(int64_t step, int64_t steps, const float* weights, const float* grads, int64_t count);
  /// Whether record() of `count` floats each would keep `step` (false when not
  /// enabled); counts `step` as run either way, as record() does. A loop whose
  /// buffers live on a GPU asks first and copies them to the host, and calls
  /// record(), only when the answer is true.
  bool keeps(int64_t step, int64_t steps, int64_t count);

  /// One device computes every recorded step's gradient from its recorded
  /// weights on that step's global batch (`global_batch` samples, drawn as the
  /// run drew them) and compares. Empty when not enabled.
  StepCheck replay(const Options& options, const Dataset& data, int64_t global_batch) const;

 private:
  struct Snapshot {
    int64_t step = -1;
    std::vector<float> weights, grads;
  };
  bool enabled_;
  std::size_t budget_;
  int64_t steps_ = 0, stride_ = 1;
  int64_t steps_run_ = 0;
  std::vector<Snapshot> recorded_;
};

/// What a failed step check blames unless the chapter says otherwise: the
/// gradient of chapters 03–11, averaged across ranks, is not one device's —
/// asked, not told (an average over the wrong ranks and a gradient left over
/// from an earlier step fail alike).
inline const char* const kStepCheckCause =
    "the ranks' gradient is not one device's on the global batch (averaged over every rank's shard? nothing "
    "left from an earlier step?)";

/// Adds the verdicts a replay supports: the replica started from the master
/// copy (bitwise; only when step 0 was recorded, i.e. not after a resume), and every checked step's gradient equals one device's
/// within kStepGradientTolerance, worded by the outcome. `cause`: what a
/// failure says went wrong, the parts the gradient should have been combined
/// from ("the tensor-parallel group did not combine its partial results").
/// `judge_start` false leaves out the start verdict, for a chapter with no
/// master copy that judges its starting weights itself (ch12's slices).
void add_step_check_verdicts(Verdicts& verdicts, const StepCheck& check, const std::string& cause = kStepCheckCause,
                             bool judge_start = true);

/// The step check of a run with --batchnorm local: the start verdict as
/// add_step_check_verdicts's, and the gradient's gap to one device's on the
/// global batch as a reported number (Verdicts::report), never ✔ or ✘ —
/// per-rank statistics make data parallel a different computation.
void add_local_batch_norm_report(Verdicts& verdicts, const StepCheck& check);

/// "; N ReLU inputs in M samples sat within rounding of 0, their flips allowed
/// (without: x)" for a passing verdict's line, or "" when the check met no kink.
std::string kink_note(const StepCheck& check);

}  // namespace dpt
