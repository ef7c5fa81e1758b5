/// @file tp_training.h
/// @brief Chapter 15's training run on a tp × dp grid: every rank of a TP
/// group computes one model's step on the same B windows, the DP groups
/// average each share's gradient over the dp models, the optimizer steps the
/// shares. What it measured, for the lecture's tables and verdicts.
#pragma once

#include <cstdint>
#include <vector>

#include "ch14_flags.h"
#include "corpus.h"
#include "dpt/launch.h"
#include "dpt/report.h"
#include "groups.h"
#include "lm_training.h"
#include "step_chart.h"
#include "tp_gpt.h"

namespace dpt::ch15 {

/// All-reduces one rank passed in its TP group.
struct AllReduces {
  double calls = 0;  ///< all_reduce calls
  double bytes = 0;  ///< their payload (bytes this rank contributed)
};

/// The sequence-parallel pair's calls one rank passed in its TP group.
struct Collectives {
  AllReduces all_gather;      ///< all_gather calls and payload (bytes this rank sent in)
  AllReduces reduce_scatter;  ///< reduce_scatter calls and payload (the whole input)
};

/// What a run measured on the calling rank (rank 0's copy is reported).
struct TpRun {
  std::vector<double> train_loss;      ///< per step, the mean over the dp models of each model's loss
  std::vector<EvalPoint> held_out;     ///< every --eval-every steps and after the last (rank 0)
  std::vector<CheckedStep> checked;    ///< first and last step under --verify (rank 0): full weights, averaged gradient
  AllReduces forward;                  ///< per step, in the TP group during forward (its traffic log)
  AllReduces backward;                 ///< per step, in the TP group during backward
  double dp_bytes_per_step = 0;        ///< all-reduce payload of the gradients' average in the DP group, per step
  Collectives sp_forward;              ///< per step, --sp: the TP group's all-gathers and reduce-scatters in forward
  Collectives sp_backward;             ///< per step, --sp: the same in backward
  double sp_grad_floats = 0;           ///< per step, --sp: floats of the replicated gradients summed over the TP group
  double region_bytes = 0;             ///< --sp, step 0's forward: this rank's embeddings/LayerNorms/residual bytes (ledger)
  double region_bytes_without_sp = 0;  ///< --sp: the same forward without sequence parallelism, same batch
  double seconds = 0;                  ///< wall time of the steps
};

/// Collective over the world: trains `model` for f.steps on the grid of
/// `groups`. Model d (its DP coordinate) takes windows [d·B, (d+1)·B) of
/// each step's global batch of dp·B (chapter 14's sampler); the held-out
/// loss is the gathered model's on rank 0. `sp`: sequence parallel
/// (TensorParallelGpt::sequence_parallel_loss, the replicated gradients
/// summed over the TP group after backward). `chart` records its step and
/// slows its straggler (step_chart.h).
TpRun train_tensor_parallel_gpt(Context& ctx, ch12::Groups& groups, TensorParallelGpt& model, const Corpus& text,
                                const Ch14Flags& f, bool sp, bool verify, const Narrator& say, StepChart& chart);

}  // namespace dpt::ch15
