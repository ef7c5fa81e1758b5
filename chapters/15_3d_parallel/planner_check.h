/// @file planner_check.h
/// @brief The planner judged against what chapter 15's runs measure: the
/// run's layout's predicted memory against the memory ledger, category by
/// category, and its predicted bytes per group per step against the
/// TP group's traffic log; and, under --plan, the model state against the
/// model's tensors counted one by one (tp_checks.h's counted_share_parameters,
/// written apart from the hole).
#pragma once

#include "ch15_flags.h"
#include "corpus.h"
#include "dpt/launch.h"
#include "dpt/verdict.h"
#include "gpt.h"
#include "ch15.h"
#include "planner.h"
#include "tp_training.h"

namespace dpt::ch15 {

/// One rank's bytes on its device's memory ledger, by category, for one
/// step of a fresh copy of its share (of pipeline stage `stage` of
/// `stages`): the share's parameters, one micro-batch's forward (B /
/// `micro_batches` sequences; a later stage's input a zero residual stream)
/// with its activations held at its end, the gradients left after backward
/// (the graph dropped), the optimizer's state after its first step.
RankMemory ledger_memory(Communicator& tp_group, const Gpt& full, const Corpus& text, const Ch15Flags& f, bool sp,
                         Device& device, int stage = 0, int stages = 1, int micro_batches = 1);

/// Collective over the world: every rank's ledger_memory against
/// rank_state_bytes and activation_bytes of its own stage for the run's
/// layout (tp × pp × dp, M, sp; ZeRO 0): parameters, gradients and
/// optimizer state exactly; activations (one micro-batch's, times the
/// micro-batches 1F1B keeps in flight on the stage) between the formula and
/// twice it (the formula counts the tensors the forward saves; the autograd
/// also keeps some ops' internals). With `trained`, every rank's TP traffic
/// log per step against group_bytes_per_step of its stage, exactly (its DP
/// bytes are the gradient column: judged as the gradients, in the hole's words).
void add_plan_verdicts(Context& ctx, Verdicts& v, Communicator& tp_group, const Gpt& full, const Corpus& text,
                       const Ch15Flags& f, const PlanLayout& layout, int stage, const TpRun& run, bool trained);

/// Rank 0, --plan: rank_state_bytes' parameters at pp 1 against 4 × the
/// share's tensors counted (counted_share_parameters) for every tp the world
/// allows, and its stages
/// summing to one pipeline's whole.
void add_plan_law_verdicts(Verdicts& v, const PlanModel& model, int world);

}  // namespace dpt::ch15
