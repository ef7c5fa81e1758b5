/// @file lm_training.h
/// @brief Chapter 14's training run on every rank: data-parallel steps of
/// the GPT, held-out evaluations, and what the checks need (the averaged
/// gradient of the checked steps, the weights before them). Gradients are
/// averaged by chapter 05's buckets on chapter 04's ring during backward
/// (--sync buckets, bucketed_sync.h), or by the library's all-reduce after it
/// (--sync library).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bucketed_sync.h"
#include "ch14_flags.h"
#include "corpus.h"
#include "dpt/launch.h"
#include "dpt/optim.h"
#include "dpt/report.h"
#include "gpt.h"

/// A held-out loss at a step.
struct EvalPoint {
  int64_t step = 0;   ///< after this many steps
  double loss = 0;    ///< mean cross-entropy, nats per character
};

/// One step the check replays on one device (rank 0 keeps it).
struct CheckedStep {
  int64_t step = 0;                       ///< which step
  std::vector<float> weights_before;      ///< every parameter, flat, named_parameters() order
  std::vector<float> averaged_gradient;   ///< what the ranks' averaging gave, flat, same order
};

/// What a run measured (rank 0's copy is the one reported).
struct LmRun {
  std::vector<double> train_loss;        ///< per step: the mean over ranks of each rank's batch loss
  std::vector<EvalPoint> held_out;       ///< every --eval-every steps and after the last
  std::vector<CheckedStep> checked;      ///< the first and last step, on rank 0 under --verify
  double seconds = 0;                    ///< wall time of the steps (rank 0)
  std::size_t peak_activation_bytes = 0; ///< the activations held after one forward (rank 0)
  std::vector<dpt::ch05::Bucket> layout;            ///< --sync buckets: the buckets (empty under library)
  std::vector<dpt::ch05::BucketStep> bucket_steps;  ///< --sync buckets: each step's record, this rank
};

/// Mean cross-entropy of `model` on `batches` × B held-out windows taken in
/// order from the start of the held-out split (the same windows every time).
double held_out_loss(const Gpt& model, const Corpus& text, const Ch14Flags& f);

/// Trains `model` (a replica, the same initial weights on every rank) for
/// --steps: rank r of D takes windows [r·B, (r+1)·B) of each step's global
/// batch, gradients are averaged over the ranks (--sync), the optimizer steps.
LmRun train_language_model(dpt::Context& ctx, Gpt& model, const Corpus& text, const Ch14Flags& f, bool verify,
                           const dpt::Narrator& say);

/// --sync buckets: the layout in a few lines (one per bucket: tensors, bytes,
/// first and last name) and how much of rank 0's ring ran during backward.
std::string describe_buckets(const Gpt& model, const LmRun& run);

/// Every parameter's values, flat, in named_parameters() order.
std::vector<float> flat_values(const Gpt& model);
/// Sets every parameter from flat values (named_parameters() order).
void set_flat_values(Gpt& model, const std::vector<float>& values);
/// --optimizer's optimizer over `params` at --lr (adamw: --weight-decay, decoupled).
std::unique_ptr<dpt::Optimizer> make_lm_optimizer(const Ch14Flags& f, std::vector<dpt::Tensor> params);
