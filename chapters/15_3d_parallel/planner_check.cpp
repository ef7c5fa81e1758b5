// planner_check.cpp — the planner against the ledger and the traffic logs
// (planner_check.h).
#include "planner_check.h"

#include <algorithm>
#include <cmath>

#include "dpt/autograd.h"
#include "dpt/memory_ledger.h"
#include "dpt/optim.h"
#include "dpt/report.h"
#include "dpt/text_windows.h"
#include "planner_run.h"
#include "tp_checks.h"
#include "tp_gpt.h"

namespace dpt::ch15 {

RankMemory ledger_memory(Communicator& tp_group, const Gpt& full, const Corpus& text, const Ch15Flags& f, bool sp,
                         Device& device, int stage, int stages, int micro_batches) {
  const MemoryLedger& ledger = device.ledger();
  auto now = [&ledger](MemoryCategory c) { return double(ledger.current(c)); };
  RankMemory m;
  const double params0 = now(MemoryCategory::Params), grads0 = now(MemoryCategory::Grads),
               state0 = now(MemoryCategory::OptimizerState), acts0 = now(MemoryCategory::Activations);
  std::unique_ptr<TensorParallelGpt> split;
  {
    MemoryScope scope(MemoryCategory::Params);
    split = std::make_unique<TensorParallelGpt>(tp_group, full, device, stage, stages);
  }
  m.params = now(MemoryCategory::Params) - params0;
  const int64_t B = f.lm.batch / micro_batches, T = f.lm.shape.context, C = f.lm.shape.width;
  std::vector<int64_t> starts;
  for (int64_t b = 0; b < B; ++b) starts.push_back(b * T);
  const TokenBatch batch = window_batch(text.train, starts, T);
  Tensor input;  // a later stage's input: the residual stream, whole or (sp) this rank's positions
  if (stage > 0) input = Tensor::zeros({B * T / (sp ? tp_group.size() : 1), C}, device);
  {
    Tensor out;
    {
      MemoryScope scope(MemoryCategory::Activations);  // all of forward; the region's own scopes nest inside
      out = stages > 1 ? split->stage_forward(input, batch.inputs, batch.targets, B, sp)
            : sp       ? split->sequence_parallel_loss(batch.inputs, batch.targets, B)
                       : split->loss(batch.inputs, batch.targets, B);
    }
    m.activations = now(MemoryCategory::Activations) - acts0;
    MemoryScope scope(MemoryCategory::Grads);
    if (split->has_head())
      out.backward();
    else
      backward(out, Tensor::full(out.shape(), 1.0f, device));  // the gradient the next stage would send
  }  // the graph is gone: what is left are the leaves' gradients
  m.grads = now(MemoryCategory::Grads) - grads0;
  std::vector<Tensor> params = split->parameters();
  std::unique_ptr<Optimizer> optimizer;
  if (f.lm.optimizer == "sgd")  // chapter 14's choice, as tp_training.cpp makes it
    optimizer = std::make_unique<SGD>(params, f.lm.lr);
  else
    optimizer = std::make_unique<Adam>(params, f.lm.lr, 0.9f, 0.999f, 1e-8f, f.lm.weight_decay, /*decoupled=*/true);
  {
    MemoryScope scope(MemoryCategory::OptimizerState);
    optimizer->step();
  }
  m.state = now(MemoryCategory::OptimizerState) - state0;
  return m;
}

void add_plan_verdicts(Context& ctx, Verdicts& v, Communicator& tp_group, const Gpt& full, const Corpus& text,
                       const Ch15Flags& f, const PlanLayout& layout, int stage, const TpRun& run, bool trained) {
  const PlanModel model = plan_model_of(f);
  RankMemory predicted = rank_state_bytes(model, layout, stage);
  predicted.activations = activation_bytes(model, layout, stage);
  RankMemory seen = ledger_memory(tp_group, full, text, f, layout.sp, ctx.device, stage, layout.pp, layout.micro);
  seen.activations *= std::min(layout.micro, layout.pp - stage);  // 1F1B's micro-batches in flight on this stage
  const GroupBytes bytes = group_bytes_per_step(model, layout, stage);
  const double tp_seen = layout.sp ? 0 : run.forward.bytes + run.backward.bytes;
  const double sp_gap = std::abs(run.sp_forward.all_gather.bytes + run.sp_backward.all_gather.bytes - bytes.tp_all_gather) +
                        std::abs(run.sp_forward.reduce_scatter.bytes + run.sp_backward.reduce_scatter.bytes -
                                 bytes.tp_reduce_scatter);
  // The worst rank's gap per category, the activations' ratio's range, the TP group's bytes.
  float worst[6] = {float(std::abs(seen.params - predicted.params)), float(std::abs(seen.grads - predicted.grads)),
                    float(std::abs(seen.state - predicted.state)), float(seen.activations / predicted.activations),
                    float(-seen.activations / predicted.activations),
                    float(trained ? (layout.sp ? sp_gap : std::abs(tp_seen - bytes.tp_all_reduce)) : 0)};
  ctx.comm.all_reduce(worst, 6, ReduceOp::Max);
  if (!ctx.is_root()) return;
  const std::string on = str(" (", layout.name(), ", each rank's stage; the ledger's bytes on every rank)");
  v.at_most("planner: parameters per rank = the ledger's" + on, worst[0], 0,
            str("rank_state_bytes predicts ", format_bytes(predicted.params), " on rank 0: whole float32 tensors, exact"));
  v.at_most("planner: gradients per rank = the ledger's" + on, worst[1], 0,
            str("predicted ", format_bytes(predicted.grads),
                " on rank 0 (one per parameter, ZeRO 0; the planner's DP bytes per step are these gradients, once)"));
  v.at_most("planner: optimizer state per rank = the ledger's" + on, worst[2], 0,
            str("predicted ", format_bytes(predicted.state), " on rank 0 (", f.lm.optimizer, ")"));
  v.holds("planner: activations per rank within [1, 2] x the formula" + on, -worst[4] >= 1 && worst[3] <= 2,
          str("ledger (one micro-batch x those 1F1B keeps in flight) / formula from ", fixed(-worst[4], 3), " to ",
              fixed(worst[3], 3), " over the ranks (formula ", format_bytes(predicted.activations),
              " on rank 0): it counts each tensor forward saves; ops' internals add less than as much again"));
  if (!trained) return;
  if (layout.tp == 1)
    v.cannot_fail("planner: TP bytes per step = the traffic log's", "with --tp 1 (try --tp 2)");
  else
    v.at_most(layout.sp ? "planner: TP pair bytes per step = the traffic log's, every rank"
                        : "planner: TP all-reduce bytes per step = the traffic log's, every rank",
              worst[5], 0,
              layout.sp ? str("predicted ", format_bytes(bytes.tp_all_gather), " + ", format_bytes(bytes.tp_reduce_scatter),
                              " on rank 0")
                        : str("predicted ", format_bytes(bytes.tp_all_reduce),
                              " on rank 0: 4 per block of the stage per micro-batch, of B/M·T·C floats"));
  // The DP bytes are not judged here: the planner's are its gradient column (judged above, in the hole's
  // words); the traffic log's against a provided count is tp_checks.h's "DP all-reduce bytes per step".
}

void add_plan_law_verdicts(Verdicts& v, const PlanModel& model, int world) {
  Rng unused(0);
  const Gpt whole_model(model.shape, Device::host(), unused);  // only its tensors' names and sizes are read
  double gap = 0;
  std::string where = "two ways of counting one split: the hole's, and the model's tensors counted one by one";
  for (int tp = 1; tp <= world; ++tp)
    if (world % tp == 0 && model.shape.heads % tp == 0) {
      const double mine = rank_state_bytes(model, PlanLayout{tp, 1, world / tp, 1, false, 0}, 0).params;
      const double counted = 4.0 * double(counted_share_parameters(whole_model, tp, 0, 1));
      if (std::abs(mine - counted) > gap)
        gap = std::abs(mine - counted),
        where = str("tp ", tp, ": rank_state_bytes says ", format_bytes(mine), ", the share's tensors hold ",
                    format_bytes(counted));
    }
  v.at_most("planner: parameters per rank at pp 1 = 4 bytes x the share's tensors counted, every tp", gap, 0, where);
  const PlanModel& m = model;
  double sum = 0;
  const int P = m.shape.layers;  // one block per stage: every stage boundary
  for (int s = 0; s < P; ++s) sum += rank_state_bytes(m, PlanLayout{1, P, 1, 1, false, 0}, s).params;
  const double whole = rank_state_bytes(m, PlanLayout{1, 1, 1, 1, false, 0}, 0).params;
  v.at_most(str("planner: the ", P, " stages' parameters (pp ", P, ") sum to one rank's at pp 1"), std::abs(sum - whole),
            0, "a pipeline splits the model: every tensor on exactly one stage");
}

}  // namespace dpt::ch15
