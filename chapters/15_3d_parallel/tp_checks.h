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
/// entry of every rank's gathered model `mine` (gather_pipeline: the dp
/// replicas, and the replicated tensors within each TP group, must stay alike).
double replicas_spread(Context& ctx, const std::vector<float>& mine);

/// Rank 0: each checked step's averaged gradient against one device's on
/// that step's dp·B windows, from the same weights (chapter 14's check).
/// With `micro_batches` > 1 a failure names chapter 13's
/// accumulate_micro_batch among the suspects.
void add_step_verdicts(Verdicts& v, const TpRun& run, const Corpus& text, const Ch14Flags& f, int dp,
                       int micro_batches = 1);

/// The parameters one rank of pipeline stage `stage` of `stages` holds when
/// `tp` ranks split `full`: full's named tensors of that stage counted one by
/// one, each either shared out among the group or whole on every rank, as
/// TensorParallelGpt cuts them. The provided count the size verdicts and the
/// planner's verdicts judge against (no closed form, and not the hole).
int64_t counted_share_parameters(const Gpt& full, int tp, int stage, int stages);

/// Collective over the world: every rank's parameter count (its share's
/// tensors) against counted_share_parameters of its stage (exact), and, with
/// dp > 1, every rank's DP all-reduce payload per step against 4 bytes × that
/// count (each DP group averages its share's gradients once per step,
/// nothing else).
void add_size_verdicts(Context& ctx, Verdicts& v, const TensorParallelGpt& model, const Gpt& full, const TpRun& run,
                       int tp, int dp, bool trained);

/// Collective over the world: forward and backward, every rank's TP
/// all-reduces per step against 2 per block of its stage per micro-batch,
/// each of B/M·T·C floats (the formula, not the run). With tp = 1 they
/// cannot fail.
void add_traffic_verdicts(Context& ctx, Verdicts& v, const TpRun& run, const TensorParallelGpt& model, int64_t batch,
                          int micro_batches);

/// Collective over the world, --sp: forward and backward, every rank's TP
/// collectives per step against the pair's 4 per block of its stage per
/// micro-batch (no all-reduce); their ring bytes against those of the 2
/// all-reduces per block of b·T·C floats (b = B/M) tensor parallelism alone
/// moves; the stage's replicated gradients summed once per step (their
/// count by the formula); the
/// ledger's embeddings/LayerNorm/residual bytes × tp against the same
/// forward's without --sp.
void add_sequence_parallel_verdicts(Context& ctx, Verdicts& v, const TpRun& run, const TensorParallelGpt& model,
                                    int64_t batch, int micro_batches);

/// Collective over the world: every rank's bytes sent to its neighbour
/// stages per step against M messages of one micro-batch's residual stream
/// (B/M·T·C floats, ÷ tp with --sp) to each neighbour, forward and back.
/// With P = 1 it cannot fail.
void add_pipeline_bytes_verdict(Context& ctx, Verdicts& v, const TpRun& run, const TensorParallelGpt& model,
                                int64_t batch, int micro_batches, bool sp);

/// Rank 0: the schedule its pipeline's stages ran (step 0), replayed on
/// chapter 13's clock with every forward 1 unit and every backward 2, against
/// the bubble (P−1)/(M+P−1); with P = 1 it cannot fail.
void add_bubble_verdict(Verdicts& v, const TpRun& run, int stages, int micro_batches, const std::string& schedule);

}  // namespace dpt::ch15
