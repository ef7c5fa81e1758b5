// planner_run.cpp — --plan's model, machine and trainer (planner_run.h).
#include "planner_run.h"

#include <algorithm>
#include <chrono>

#include "dpt/ops.h"
#include "dpt/nn.h"
#include "planner_report.h"
#include "tp_gpt.h"
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

// One collective kind's calls and payload on a group's traffic log, so far.
struct PlanLogged {
  double calls = 0, bytes = 0;
};
PlanLogged plan_logged(Communicator* group, const char* name) {
  if (group == nullptr) return {};
  TrafficLog& log = group->traffic();
  return {double(log.collective_calls(name, log.rank())), double(log.collective_bytes(name, log.rank()))};
}

// Seconds the link model charges the group's collectives between two
// readings: each call a ring over n ranks (chapter 08): an all-reduce of S
// is 2(n−1) messages of S/n, a reduce-scatter of S (n−1) of S/n, an
// all-gather of this rank's s (n−1) of s.
struct PlanGroupClock {
  Communicator* group = nullptr;
  PlanLogged all_reduce, reduce_scatter, all_gather;
  explicit PlanGroupClock(Communicator* g)
      : group(g), all_reduce(plan_logged(g, "all_reduce")), reduce_scatter(plan_logged(g, "reduce_scatter")),
        all_gather(plan_logged(g, "all_gather")) {}
  double seconds_since(const LinkModel& link) const {
    if (group == nullptr || group->size() == 1) return 0;
    const double n = group->size(), alpha = link.latency_us * 1e-6;
    auto beta = [&link](double bytes) { return link.transfer_seconds(int64_t(bytes)); };
    const PlanGroupClock now(group);
    const double ar = now.all_reduce.calls - all_reduce.calls, ar_b = now.all_reduce.bytes - all_reduce.bytes;
    const double rs = now.reduce_scatter.calls - reduce_scatter.calls,
                 rs_b = now.reduce_scatter.bytes - reduce_scatter.bytes;
    const double ag = now.all_gather.calls - all_gather.calls, ag_b = now.all_gather.bytes - all_gather.bytes;
    return (2 * ar + rs + ag) * (n - 1) * alpha + 2 * (n - 1) * beta(ar_b / n) + (n - 1) * beta(rs_b / n) +
           (n - 1) * beta(ag_b);
  }
};
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
  // A layout runnable_problem lets through: tp x dp, with or without sp. A
  // pipeline (pp, M) joins here with the 3-D grid's trainer, and its line in
  // runnable_problem goes.
  auto train = [&](const PlanLayout& l) {
    ch12::Groups groups(ctx, l.tp, l.dp);
    Rng rng(f.lm.seed);
    const Gpt full(f.lm.shape, Device::host(), rng);
    TensorParallelGpt split(groups.tp(), full, ctx.device);
    Ch14Flags brief = f.lm;
    brief.steps = kPlanSteps, brief.eval_batches = 0;
    const PlanGroupClock tp_clock(&groups.tp()), dp_clock(groups.dp());
    const TpRun r = train_tensor_parallel_gpt(ctx, groups, split, text, brief, l.sp, false, Narrator(false));
    float wall = float(r.seconds);
    ctx.comm.all_reduce(&wall, 1, ReduceOp::Max);  // the slowest rank ends the step
    const double link = tp_clock.seconds_since(plan_group_link(1, l.tp, machine)) +
                        dp_clock.seconds_since(plan_group_link(l.tp, l.dp, machine));
    float step = float((double(wall) + link) / double(kPlanSteps));
    ctx.comm.broadcast(&step, 1, 0);  // rank 0's clock for every rank: they compare one list
    return double(step);
  };
  plan_section(run, f.plan, model, machine, train);
}

}  // namespace dpt::ch15
