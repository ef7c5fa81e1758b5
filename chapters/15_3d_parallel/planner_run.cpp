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

// Seconds the link model charges one step's collectives and messages, from
// what this rank's run logged per step: each collective a ring over n ranks
// (chapter 08): an all-reduce of S is 2(n−1) messages of S/n, a
// reduce-scatter of S (n−1) of S/n, an all-gather of this rank's s (n−1) of
// s; the pipeline's sends one message per micro-batch each way.
double plan_ring_seconds(const LinkModel& link, int n, double all_reduces, double all_reduce_bytes,
                         double reduce_scatters, double reduce_scatter_bytes, double all_gathers,
                         double all_gather_bytes) {
  if (n <= 1) return 0;
  auto beta = [&link](double bytes) { return link.transfer_seconds(int64_t(bytes)); };
  return (2 * all_reduces + reduce_scatters + all_gathers) * (n - 1) * link.latency_us * 1e-6 +
         2 * (n - 1) * beta(all_reduce_bytes / n) + (n - 1) * beta(reduce_scatter_bytes / n) +
         (n - 1) * beta(all_gather_bytes);
}

double plan_link_seconds(const TpRun& r, const PlanLayout& l, const PlanMachine& machine) {
  const LinkModel& tp_link = plan_group_link(1, l.tp, machine);
  const double tp = plan_ring_seconds(tp_link, l.tp, r.forward.calls + r.backward.calls + (l.sp ? 1 : 0),
                                      r.forward.bytes + r.backward.bytes + r.sp_grad_floats * 4,
                                      r.sp_forward.reduce_scatter.calls + r.sp_backward.reduce_scatter.calls,
                                      r.sp_forward.reduce_scatter.bytes + r.sp_backward.reduce_scatter.bytes,
                                      r.sp_forward.all_gather.calls + r.sp_backward.all_gather.calls,
                                      r.sp_forward.all_gather.bytes + r.sp_backward.all_gather.bytes);
  const double dp = plan_ring_seconds(plan_group_link(l.tp, l.dp, machine), l.dp, 1, r.dp_bytes_per_step, 0, 0, 0, 0);
  const LinkModel& pp_link = plan_group_link(l.tp * l.dp, l.pp, machine);
  const double pp = l.pp > 1 ? 2.0 * l.micro * pp_link.latency_us * 1e-6 +
                                   pp_link.transfer_seconds(int64_t(r.pp_bytes_per_step))
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
