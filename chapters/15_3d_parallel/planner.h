/// @file planner.h
/// @brief Chapter 15's planner (`--plan`): every layout of N ranks that
/// divides the model — (tp, pp, dp, M micro-batches, sp, ZeRO stage) —
/// with each rank's predicted memory by category and a predicted step time
/// on chapter 08's two-tier link, best first.
///
/// The formulas come from the chapters that measured them: model state per
/// rank from chapter 07 (dpt/zero_formula.h: ZeRO divides the optimizer
/// state, then the gradients, then the weights among the dp ranks), the TP
/// split from chapter 12 and this one (tp_gpt.h's TpBlock), the pipeline's
/// split of the layers and its bubble (P−1)/(M+P−1) from chapter 13, the
/// link's alpha + S/beta per message from chapter 08 (dpt/comm/link_model.h).
///
/// One hole: rank_state_bytes (ch15.h), the model state one rank holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/comm/link_model.h"
#include "gpt.h"

namespace dpt::ch15 {

/// What is being planned: chapter 14's GPT, the batch each model replica
/// takes per step, and the optimizer's state per parameter.
struct PlanModel {
  GptShape shape;        ///< L, H, C, T, V (gpt.h)
  int64_t batch = 1;     ///< B: sequences per DP replica per step (--batch)
  bool adam = true;      ///< Adam keeps two moments per parameter; SGD none
};

/// One way to lay a model out on tp · pp · dp ranks.
struct PlanLayout {
  int tp = 1;     ///< ranks that split each block (tensor parallel)
  int pp = 1;     ///< pipeline stages, each L / pp consecutive blocks
  int dp = 1;     ///< replicas of the whole pipeline (data parallel)
  int micro = 1;  ///< M: micro-batches per step, B / M sequences each (1F1B)
  bool sp = false;  ///< sequence parallel inside each TP group
  int zero = 0;   ///< ZeRO stage 0–3 over the dp ranks
  /// "tp 2 pp 1 dp 2 M 1 sp zero 1", the table's words.
  std::string name() const;
};

/// Bytes one rank holds, by the ledger's categories.
struct RankMemory {
  double params = 0;       ///< its weights
  double grads = 0;        ///< their gradients
  double state = 0;        ///< the optimizer's state
  double activations = 0;  ///< what forward keeps for backward, at the peak
  /// The sum.
  double total() const { return params + grads + state + activations; }
};

/// The blocks stage `stage` of `stages` holds: chapter 13's stage_layers
/// split, as the pipeline runs it (the planner lists only pp dividing L; a
/// run with an uneven split is judged by the same split).
int plan_stage_layers(int layers, int stages, int stage);

// rank_state_bytes(model, layout, stage), the model state one rank holds,
// is the hole: declared with the chapter's others in ch15.h.

/// Bytes stage `stage`'s ranks keep for backward at the peak of a step
/// (not a hole): per block and micro-batch of B/M sequences, the tensors
/// the forward saves — the split ones (q, k, v, the heads' scores and
/// weights, the MLP's 4C features) ÷ tp, the replicated region (LayerNorms,
/// residual adds) whole, or ÷ tp under sp —, the embeddings' output on the
/// first stage, the logits on the last, times the micro-batches 1F1B holds
/// in flight on that stage, min(M, P − stage).
double activation_bytes(const PlanModel& model, const PlanLayout& layout, int stage);

/// The most any rank of `layout` holds (the stage whose total is largest),
/// model state (rank_state_bytes) plus activations.
RankMemory layout_memory(const PlanModel& model, const PlanLayout& layout);

/// "" when `layout` divides `model` on `world` ranks, else why not (one
/// sentence): tp·pp·dp = world, tp divides the heads, pp the layers, M the
/// batch, with sp tp the context, M = 1 without a pipeline, ZeRO only over
/// dp > 1.
std::string layout_problem(const PlanModel& model, const PlanLayout& layout, int world);

/// Every layout of `world` ranks that divides the model, each once:
/// tp over the divisors of world, pp over those of world / tp, dp the rest,
/// M over the divisors of B when pp > 1, sp on and off where tp > 1, ZeRO
/// 0–3 where dp > 1.
std::vector<PlanLayout> enumerate_layouts(const PlanModel& model, int world);

/// The machines: ranks per node and the link of each tier (chapter 08's
/// two-tier model), and the compute rate.
struct PlanMachine {
  int per_node = 1;   ///< G: ranks of one node, node-major (rank r on node r / G)
  LinkModel intra;    ///< between ranks of one node
  LinkModel inter;    ///< between nodes
  double gflops = 1;  ///< one rank's rate, 1e9 floating-point operations per second
};

/// The link a group's ring crosses: members r0 + k·stride, k < size, on
/// nodes of machine.per_node ranks. `intra` only when every such group of the
/// grid sits inside one node (its span divides the node), else `inter`: a
/// ring is as slow as its slowest link (chapter 08).
const LinkModel& plan_group_link(int stride, int size, const PlanMachine& machine);

/// Seconds of one message of `bytes` on `link`: alpha + bytes / beta.
double plan_message_seconds(const LinkModel& link, double bytes);

/// Seconds of `halves` ring passes over n ranks on `link`, each n − 1
/// messages of bytes / n: an all-reduce of `bytes` is 2 passes, a
/// reduce-scatter or an all-gather 1 (chapter 08's formulas). 0 when n = 1.
double plan_ring_seconds(const LinkModel& link, int n, double bytes, double halves);

/// A layout's predicted step, in seconds, by part.
struct PlanStep {
  double compute = 0;  ///< the busiest stage's forward and backward FLOPs ÷ rate, all M micro-batches
  double bubble = 0;   ///< (compute + TP) × (P−1)/M: the idle (P−1)/(M+P−1) of the pipelined step
  double tp = 0;       ///< the TP group's all-reduces (or sp's pairs), every block, every micro-batch
  double dp = 0;       ///< the DP group's gradient reduction once per step (ZeRO's collectives)
  double pp = 0;       ///< the activations and their gradients sent between stages
  /// The sum.
  double total() const { return compute + bubble + tp + dp + pp; }
  /// The largest part's name: "compute", "bubble", "TP", "DP" or "PP".
  std::string dominant() const;
};

/// Payload bytes one rank passes to its groups' collectives per step, as
/// the traffic log counts them (each rank's bytes in).
struct GroupBytes {
  double tp_all_reduce = 0;   ///< without sp: 4 all-reduces per block (2 each way) of b·T·C floats, per micro-batch
  double tp_all_gather = 0;   ///< with sp: 4 all-gathers per block of b·T·C/tp floats
  double tp_reduce_scatter = 0;  ///< with sp: 4 reduce-scatters per block of b·T·C floats
  double dp = 0;              ///< the stage's gradient, once per step (ZeRO 0)
};
/// The bytes one rank of stage `stage` passes in one step of `layout`.
GroupBytes group_bytes_per_step(const PlanModel& model, const PlanLayout& layout, int stage);

/// The predicted step (see PlanStep), TP groups inside a node where the
/// grid's order (TP innermost, then DP, then PP) puts them there.
PlanStep predict_step(const PlanModel& model, const PlanLayout& layout, const PlanMachine& machine);

/// One row of the plan.
struct PlanEntry {
  PlanLayout layout;       ///< the layout
  RankMemory memory;       ///< the fullest rank's
  PlanStep step;           ///< the busiest stage's step
  std::string overflow;    ///< "" when it fits the budget, else the category the fullest rank spends most on
};

/// Every layout, predicted; those that fit `budget_bytes` (0: no budget)
/// first, each part by predicted step (then by memory), fastest first.
std::vector<PlanEntry> make_plan(const PlanModel& model, int world, const PlanMachine& machine, double budget_bytes);

}  // namespace dpt::ch15
