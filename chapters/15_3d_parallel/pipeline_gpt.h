/// @file pipeline_gpt.h
/// @brief The split GPT as a pipeline (--pp): one step of this rank's stage
/// through chapter 13's run_schedule, micro-batch by micro-batch, the
/// micro-batches' gradients combined by chapter 13's accumulate_micro_batch;
/// what the stage's TP group exchanged on the way; and the whole model put
/// back together from every stage and TP share.
///
/// Between stages travels the residual stream of one micro-batch: B/M·T·C
/// floats from each TP rank to the same TP rank of the next stage (every TP
/// rank holds it whole), or with --sp that rank's positions, B/M·T/tp·C
/// floats — the stream is already split there, so nothing is gathered to
/// send it. Left out: Megatron's scatter/gather of the whole stream over the
/// TP ranks without --sp, interleaved (virtual) stages.
#pragma once

#include <string>
#include <vector>

#include "ch13.h"
#include "dpt/comm.h"
#include "dpt/report.h"
#include "dpt/text_windows.h"
#include "step_chart.h"
#include "tp_gpt.h"

namespace dpt::ch15 {

/// All-reduces one rank passed in a group.
struct AllReduces {
  double calls = 0;  ///< all_reduce calls
  double bytes = 0;  ///< their payload (bytes this rank contributed)
};

/// The sequence-parallel pair's calls one rank passed in its TP group.
struct Collectives {
  AllReduces all_gather;      ///< all_gather calls and payload (bytes this rank sent in)
  AllReduces reduce_scatter;  ///< reduce_scatter calls and payload (the whole input)
};

/// What `group`'s traffic log holds for this rank so far.
AllReduces all_reduces_so_far(Communicator& group);
/// The same for the --sp pair's collectives.
Collectives pair_so_far(Communicator& group);
/// Adds to `total` what a log reading `after` holds beyond `before` (calls and bytes).
void add_since(AllReduces& total, const AllReduces& before, const AllReduces& after);
/// The same for each of the pair's collectives.
void add_since(Collectives& total, const Collectives& before, const Collectives& after);

/// The TP group's collectives one stage step passed, forward and backward.
struct StageTraffic {
  AllReduces forward;       ///< all-reduces inside the forward calls
  AllReduces backward;      ///< all-reduces inside the backward calls
  Collectives sp_forward;   ///< --sp: the pair's calls in forward
  Collectives sp_backward;  ///< --sp: the pair's calls in backward
};

/// What one step of one stage did.
struct GptStageStep {
  double loss = 0;                    ///< last stage: its (with --sp: this rank's share of the) batch's mean loss; else 0
  std::vector<ch13::Op> ran;          ///< the ops in the order run_schedule called them
  std::vector<double> seconds;        ///< each op's wall time
  StageTraffic traffic;               ///< the TP group's, during the ops
};

/// "1f1b" → your chapter 13 one_f_one_b (one stage: F m, B m for each m),
/// "gpipe" → gpipe.
std::vector<ch13::Op> stage_schedule(const std::string& schedule, int stage, int stages, int micro_batches);

/// Collective over the stage's TP group and the pipeline `pp` (rank =
/// stage): one step of `model`'s stage on `batch` (B = `batch_size`
/// sequences, every stage holds them: the first reads the inputs, the last
/// the targets), cut into `micro_batches` of B/M consecutive sequences, run
/// in the order `ops` through ch13::run_schedule. Afterwards each parameter's
/// grad() is the gradient of the batch's mean loss (with --sp, of this
/// rank's positions' share), combined by ch13::accumulate_micro_batch.
/// With one stage the ops run in order here and one micro-batch needs no
/// combining: a tp x dp run uses none of chapter 13's holes. Each op is a
/// compute span of `chart` ("forward", "backward"; null: none).
GptStageStep pipeline_gpt_step(Communicator& pp, const TensorParallelGpt& model, const TokenBatch& batch,
                               int64_t batch_size, int micro_batches, bool sp, const std::vector<ch13::Op>& ops,
                               StepChart* chart = nullptr);

/// Collective over the TP group and `pp`: the whole model's values (or,
/// `grads`, gradients) flattened in named_parameters() order, on every rank —
/// each stage's part gathered over its TP group, the parts joined over the
/// pipeline.
std::vector<float> gather_pipeline(Communicator& pp, const TensorParallelGpt& model, bool grads);

/// The lecture's table of the stages: each one's blocks (chapter 13's
/// stage_layers), what else it holds, and what it hands on per micro-batch.
void print_stages(const GptShape& shape, int stages, int micro_batches, const std::string& schedule, const Narrator& say);

}  // namespace dpt::ch15
