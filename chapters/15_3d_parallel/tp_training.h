/// @file tp_training.h
/// @brief Chapter 15's training run on a tp × dp × pp grid: every rank of a
/// TP group computes its stage's part of one pipeline's step on the same B
/// windows, micro-batch by micro-batch (pipeline_gpt.h), the DP groups
/// average each share's gradient over the dp pipelines once per step, the
/// optimizer steps the shares. What it measured, for the lecture's tables
/// and verdicts.
#pragma once

#include <cstdint>
#include <vector>

#include "ch14_flags.h"
#include "corpus.h"
#include "dpt/launch.h"
#include "dpt/report.h"
#include "ch13.h"
#include "lm_training.h"
#include "pipeline_gpt.h"
#include "pipeline_grid.h"
#include "step_chart.h"
#include "tp_gpt.h"

namespace dpt::ch15 {

/// What a run measured on the calling rank (rank 0's copy is reported).
struct TpRun {
  std::vector<double> train_loss;      ///< per step, the mean over the dp models of each model's loss
  std::vector<EvalPoint> held_out;     ///< every --eval-every steps and after the last (rank 0)
  std::vector<CheckedStep> checked;    ///< first and last step under --verify (rank 0): full weights, averaged gradient
  AllReduces forward;                  ///< per step, in the TP group during the stage's forwards (its traffic log)
  AllReduces backward;                 ///< per step, in the TP group during the stage's backwards
  double dp_bytes_per_step = 0;        ///< all-reduce payload of the gradients' average in the DP group, per step
  double pp_bytes_per_step = 0;        ///< bytes this rank sent to its neighbour stages, per step (the pipeline's log)
  Collectives sp_forward;              ///< per step, --sp: the TP group's all-gathers and reduce-scatters in forward
  Collectives sp_backward;             ///< per step, --sp: the same in backward
  double sp_grad_floats = 0;           ///< per step, --sp: floats of the replicated gradients summed over the TP group
  double region_bytes = 0;             ///< --sp, step 0's forward: this rank's embeddings/LayerNorms/residual bytes (ledger)
  double region_bytes_without_sp = 0;  ///< --sp: the same forward without sequence parallelism, same batch
  double seconds = 0;                  ///< wall time of the steps
  /// Step 0, rank 0: the ops each stage of its pipeline ran, in order, and
  /// their wall times (stage s's at [s]), for chapter 13's clock.
  std::vector<std::vector<ch13::Op>> ran_by_stage;
  std::vector<std::vector<double>> seconds_by_stage;  ///< the same ops' seconds
};

/// The pipeline axis of a run.
struct PipelineSetting {
  int micro_batches = 1;         ///< M per step on each pipeline
  std::string schedule = "1f1b"; ///< chapter 13's: "1f1b" or "gpipe"
};

/// Collective over the world: trains `model` (this rank's stage share) for
/// f.steps on `grid`. Pipeline d (its DP coordinate) takes windows
/// [d·B, (d+1)·B) of each step's global batch of dp·B (chapter 14's
/// sampler) in `pipe.micro_batches` micro-batches; the held-out loss is the
/// gathered model's on rank 0. `sp`: sequence parallel (the replicated
/// gradients summed over the TP group after the last micro-batch). `chart`
/// records its step and slows its straggler (step_chart.h).
TpRun train_tensor_parallel_gpt(Context& ctx, Ch15Grid& grid, TensorParallelGpt& model, const Corpus& text,
                                const Ch14Flags& f, bool sp, const PipelineSetting& pipe, bool verify,
                                const Narrator& say, StepChart& chart);

}  // namespace dpt::ch15
