/// @file checks.h
/// @brief Chapter 02's checks (provided, not a hole): your two holes against
/// autograd on the same samples, and the verdicts on what the lecture measured.
#pragma once

#include <cstdint>
#include <string>

#include "dpt/data.h"
#include "dpt/nn.h"
#include "dpt/report.h"
#include "dpt/verdict.h"

namespace dpt::ch02 {

/// Your per_sample_gradients on one batch, against autograd.
struct GradientErrors {
  double samples = 0;  ///< worst max |your sample i - autograd on sample i alone| / max |autograd|
  double mean = 0;     ///< worst max |your mean - batch gradient| / max |batch gradient|
  int64_t passes = 0;  ///< backward passes your per_sample_gradients ran (a grad-ready hook counts them)
};

/// Your per_sample_gradients on `batch`: each sample's gradient against
/// autograd on that sample alone (after the call, so a kept gradient written
/// into while the mean was formed shows), the mean against one backward over
/// the batch; prints the per-parameter table when `say` is enabled. Worst
/// relative errors over the parameters (NaN when a list or a shape is wrong).
GradientErrors compare_gradients(const MLP& model, const Batch& batch, const Narrator& say);

/// Your accumulated_gradient in `micro_batches` pieces against one backward
/// over the whole batch: the worst max |accumulated − batch| / max |batch|
/// over the parameters (NaN when a list or a shape is wrong).
double compare_accumulation(const MLP& model, const Batch& batch, int micro_batches);

/// What the lecture measured, for the verdicts.
struct Measured {
  GradientErrors gradients;      ///< section 2
  int64_t batch_rows = 0;        ///< samples in that batch
  int micro_batches = 0;         ///< pieces of the accumulation check
  double accumulation = 0;       ///< compare_accumulation's answer
  int64_t batch_size = 0;        ///< B
  int64_t per_sample_updates = 0;  ///< optimizer steps the per-sample run took
  int64_t batched_updates = 0;     ///< optimizer steps the mini-batch run took
  double loss_before = 0;          ///< the data set's loss before training
  double per_sample_loss = 0;      ///< the data set's loss after the per-sample run
  double batched_loss = 0;         ///< the data set's loss after the mini-batch run
  double loss_growth = 0;        ///< largest step loss / first step loss, both runs
};

/// The verdicts, each against its argued tolerance; runs under another
/// optimizer than sgd are not compared (said through `say`).
void add_verdicts(Verdicts& v, const Measured& c, const std::string& optimizer, const Narrator& say);

}  // namespace dpt::ch02
