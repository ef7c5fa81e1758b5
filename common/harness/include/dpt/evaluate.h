/// @file evaluate.h
/// @brief Scoring a model: mean loss and accuracy over a data set, and the
/// held-out report every chapter ends with — training set next to data the
/// model never trained on.
///
///     dpt::HeldOut held_out = dpt::load_held_out(options, data);  // options.h: test split or a synthetic twin
///     … train …
///     dpt::Table summary("ch01 summary", {"what", "value"});
///     dpt::report_held_out(model, data, held_out, options.steps, options.metrics, summary);
///
/// Evaluation runs forward only, under NoGradGuard, in chunks: it records no
/// graph, touches no gradient, optimizer state or weight, and draws nothing
/// from the batch sampler, so a run's weights are the same bits with it or
/// without it (tests/core/test_evaluate.cpp plants the opposite). Left out:
/// per-class accuracy, confusion matrices, evaluation during training.
#pragma once

#include <cstdint>
#include <string>

#include "dpt/data.h"
#include "dpt/nn.h"

namespace dpt {

class Table;

/// Mean loss and accuracy of a model over a whole data set.
struct Evaluation {
  double loss = 0;      ///< mean softmax cross-entropy
  double accuracy = 0;  ///< fraction of argmax predictions equal to the label
};
/// Evaluates `model` on all of `data` (no graph recorded), `chunk` rows at a
/// time; `data` must have as many features as the model has inputs.
Evaluation evaluate(const MLP& model, const Dataset& data, int64_t chunk = 1024);

/// Samples a model never trains on, and what they are (for the report).
struct HeldOut {
  Dataset data;             ///< empty when evaluation is off (--eval-samples 0)
  std::string description;  ///< e.g. "Fashion-MNIST test split (t10k), 10000 images"
  /// True when there is something to evaluate on.
  bool enabled() const { return data.size() > 0; }
};

/// A model's score on its training set and on the held-out set.
struct HeldOutScore {
  Evaluation train;  ///< over the whole training set
  Evaluation test;   ///< over the held-out set (zeros when it is off)
};

/// Scores `model` on `train` and on `held_out` (skipped when it is off).
HeldOutScore score_held_out(const MLP& model, const Dataset& train, const HeldOut& held_out);

/// The end of every chapter's run: scores `model` (score_held_out), adds the
/// rows "loss: training set / held-out" and "accuracy: training set /
/// held-out" to `summary` (a (what, value) table), and appends one line
/// {"step": steps, "train_loss", "train_accuracy", "test_loss",
/// "test_accuracy", "test_samples"} to the JSONL file `metrics_path` (none
/// when ""). Call it after the run's own metrics writer is closed.
HeldOutScore report_held_out(const MLP& model, const Dataset& train, const HeldOut& held_out, int64_t steps,
                             const std::string& metrics_path, Table& summary);

}  // namespace dpt
