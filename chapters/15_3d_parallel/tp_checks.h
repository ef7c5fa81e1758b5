/// @file tp_checks.h
/// @brief Chapter 15's verdicts beside the lecture: each checked step's gradient
/// against one device's on the global batch (chapter 14's step check on the
/// gathered model), the replicas alike, and the TP group's all-reduces
/// against Megatron's count.
///
/// No oracle here calls the hole: the gradients are judged by chapter 14's
/// unsplit model on one device. The attention hole's own verdicts are
/// attention_checks.h's.
#pragma once

#include <string>

#include "ch14_flags.h"
#include "corpus.h"
#include "dpt/launch.h"
#include "dpt/verdict.h"
#include "gpt.h"
#include "tp_gpt.h"
#include "tp_training.h"

namespace dpt::ch15 {

/// Collective over the world: the largest |w − w on world rank 0| over every
/// parameter of every rank's gathered model (the dp replicas, and the
/// replicated tensors within each TP group, must stay alike).
double replicas_spread(Context& ctx, const TensorParallelGpt& model);

/// Rank 0: each checked step's averaged gradient against one device's on
/// that step's dp·B windows, from the same weights (chapter 14's check).
void add_step_verdicts(Verdicts& v, const TpRun& run, const Corpus& text, const Ch14Flags& f, int dp);

/// Collective over the world: every rank's parameter count against
/// parameters_per_rank (exact), and, with dp > 1, rank 0's DP all-reduce
/// payload per step against 4 bytes × that count (each DP group averages
/// its share's gradients, nothing else).
void add_size_verdicts(Context& ctx, Verdicts& v, const TensorParallelGpt& model, const TpRun& run, int tp, int dp,
                       bool trained);

/// Rank 0: forward and backward, the TP group's all-reduces per step
/// against 2 per block each way, each of B·T·C floats (the formula, not
/// the run). With tp = 1 they cannot fail.
void add_traffic_verdicts(Verdicts& v, const TpRun& run, const GptShape& shape, int64_t batch, int tp);

/// Rank 0, --sp: forward and backward, the TP group's collectives per step
/// against the pair's 4 per block (no all-reduce); their ring bytes against those of the 2
/// all-reduces per block of B·T·C floats tensor parallelism alone moves;
/// the replicated gradients summed once (their count by the formula); the
/// ledger's embeddings/LayerNorm/residual bytes × tp against the same
/// forward's without --sp.
void add_sequence_parallel_verdicts(Verdicts& v, const TpRun& run, const GptShape& shape, int64_t batch, int tp);

}  // namespace dpt::ch15
