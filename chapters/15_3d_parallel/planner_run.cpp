// planner_run.cpp — --plan's model, machine and trainer (planner_run.h).
#include "planner_run.h"

#include <algorithm>
#include <chrono>

#include "dpt/ops.h"
#include "dpt/nn.h"
#include "planner_report.h"
#include "layout_run.h"
#include "tp_training.h"

namespace dpt::ch15 {

namespace {
constexpr int64_t kPlanSteps = 3;  // per layout under --run-top: enough to average, seconds for all

// GFLOP/s of one 128 × 128 × 128 matmul on the host, the best of a few.
double plan_measured_gflops() {
  Rng rng(1);
  std::vector<float> values(128 * 128);
  for (float& x : values) x = rng.normal();
  const Tensor a = Tensor::from_vector({128, 128}, values, Device::host()), b = a;
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    const Tensor c = matmul(a, b);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return 2.0 * 128 * 128 * 128 / std::max(best, 1e-9) / 1e9;
}

// `calls` collectives of `ring_bytes` in all, each charged as chapter 08's
// ring of its mean size (plan_ring_seconds: an all-reduce 2 passes, a
// reduce-scatter or an all-gather 1), as the planner predicts them.
double plan_logged_seconds(const LinkModel& link, int n, double calls, double ring_bytes, double halves) {
  return calls > 0 ? calls * plan_ring_seconds(link, n, ring_bytes / calls, halves) : 0;
}

// Seconds the link model charges one step's traffic, from what this rank's
// run logged per step; the pipeline's sends one message per micro-batch each way.
double plan_link_seconds(const TpRun& r, const PlanLayout& l, const PlanMachine& machine) {
  const LinkModel& tp_link = plan_group_link(1, l.tp, machine);
  const Collectives sp = {{r.sp_forward.all_gather.calls + r.sp_backward.all_gather.calls,
                           r.sp_forward.all_gather.bytes + r.sp_backward.all_gather.bytes},
                          {r.sp_forward.reduce_scatter.calls + r.sp_backward.reduce_scatter.calls,
                           r.sp_forward.reduce_scatter.bytes + r.sp_backward.reduce_scatter.bytes}};
  const double tp =
      plan_logged_seconds(tp_link, l.tp, r.forward.calls + r.backward.calls, r.forward.bytes + r.backward.bytes, 2) +
      plan_logged_seconds(tp_link, l.tp, l.sp ? 1 : 0, r.sp_grad_floats * 4, 2) +  // --sp: the replicated gradients
      plan_logged_seconds(tp_link, l.tp, sp.reduce_scatter.calls, sp.reduce_scatter.bytes, 1) +
      plan_logged_seconds(tp_link, l.tp, sp.all_gather.calls, l.tp * sp.all_gather.bytes, 1);  // logged: my part
  const double dp = plan_ring_seconds(plan_group_link(l.tp, l.dp, machine), l.dp, r.dp_bytes_per_step, 2);
  const double messages = 2.0 * l.micro;
  const double pp = l.pp > 1 ? messages * plan_message_seconds(plan_group_link(l.tp * l.dp, l.pp, machine),
                                                               r.pp_bytes_per_step / messages)
                             : 0;
  return tp + dp + pp;
}
}  // namespace

PlanModel plan_model_of(const Ch15Flags& f) { return {f.lm.shape, f.lm.batch, f.lm.optimizer != "sgd"}; }

PlanMachine plan_machine_of(Context& ctx, const PlanFlags& flags) {
  PlanMachine m;
  const int nodes = flags.nodes > 0 ? flags.nodes : ctx.world % 2 == 0 && ctx.world >= 4 ? 2 : 1;  // chapter 08's default
  m.per_node = ctx.world / nodes;
  m.intra = link_preset(flags.link_intra), m.inter = link_preset(flags.link_inter);
  float rate = float(flags.gflops > 0 ? flags.gflops : ctx.is_root() ? plan_measured_gflops() : 0.0);
  ctx.comm.broadcast(&rate, 1, 0);
  m.gflops = rate;
  return m;
}

void run_plan(ModelChapterRun& run, const Ch15Flags& f, const Corpus& text) {
  Context& ctx = run.ctx;
  const PlanModel model = plan_model_of(f);
  const PlanMachine machine = plan_machine_of(ctx, f.plan);
  // A layout runnable_problem lets through (any tp x pp x dp, M, sp), trained
  // by the lecture's own trainer (layout_run.h) for a few steps.
  auto train = [&](const PlanLayout& l) {
    Ch15Flags g = f;
    g.tp = l.tp, g.dp = l.dp, g.pp = l.pp, g.micro_batches = l.micro, g.sp = l.sp;
    g.lm.steps = kPlanSteps;
    const TpRun r = run_layout(ctx, g, text);
    // The slowest rank ends the step: its wall time and its links.
    float step[2] = {float(r.seconds / double(kPlanSteps)), float(plan_link_seconds(r, l, machine))};
    ctx.comm.all_reduce(step, 2, ReduceOp::Max);
    float total = step[0] + step[1];
    ctx.comm.broadcast(&total, 1, 0);  // rank 0's clock for every rank: they compare one list
    return double(total);
  };
  plan_section(run, f.plan, model, machine, train);
}

}  // namespace dpt::ch15
