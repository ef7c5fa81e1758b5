/// @file stage.h
/// @brief One pipeline stage (provided): the run of layers it holds, and one
/// training step of it — the StageWork that your run_schedule drives, your
/// accumulate_micro_batch combining the micro-batches' gradients, and what the
/// step measured for the clock and the memory verdicts.
#pragma once

#include <cstdint>
#include <vector>

#include "ch13.h"
#include "dpt/data.h"
#include "dpt/nn.h"
#include "dpt/span.h"

namespace dpt::ch13 {

/// Stage `stage` of `stages` holds the model's layers [first, last): a split
/// by depth into runs of consecutive layers whose counts differ by at most
/// one, the first stages taking the extra ones.
struct LayerRange {
  int first = 0;  ///< the stage's first layer
  int last = 0;   ///< one past its last layer
};
/// The layers of stage `stage` when `layers` layers are split over `stages`.
LayerRange stage_layers(int layers, int stages, int stage);

/// A stage of `model`: its layers are handles on the model's (same tensors).
struct PipelineStage {
  /// Stage `stage` of `stages` of `model` (stage_layers' split).
  PipelineStage(const MLP& model, int stage, int stages);
  std::vector<Linear> layers;  ///< the stage's layers, first to last
  LayerRange range;            ///< which of the model's layers they are
  bool has_last_layer = false; ///< the model's output layer (no ReLU after it; the loss follows)
  /// The stage's weights and biases, in the model's parameters() order.
  std::vector<Tensor> parameters() const;
};

/// What one step of one stage did.
struct StageStep {
  std::vector<Op> ran;               ///< forward/backward calls in the order run_schedule made them
  std::vector<double> seconds;       ///< each call's wall time
  int peak_in_flight = 0;            ///< most micro-batches forwarded and not yet backwarded at once
  double micro_batch_bytes = 0;      ///< device bytes one micro-batch's forward left held (micro-batch 0)
  double peak_activation_bytes = 0;  ///< most device bytes the in-flight micro-batches held at once
  double loss = 0;                   ///< last stage: the batch's mean loss; other stages 0
};

/// One step of this stage on `batch` (the whole batch of its pipeline, on the
/// stage's device; every stage holds it, stage 0 reads x, the last stage y):
/// cuts it into `micro_batches` consecutive micro-batches, runs `ops` through
/// run_schedule over `comm` (rank = stage), sums the gradients with
/// accumulate_micro_batch and leaves them in the parameters' grad(). Each op
/// is a span "F m" / "B m" on `trace` (the --trace timeline; null: none).
StageStep pipeline_step(Communicator& comm, PipelineStage& stage, const Batch& batch, int micro_batches,
                        const std::vector<Op>& ops, SpanRecorder* trace = nullptr);

}  // namespace dpt::ch13
