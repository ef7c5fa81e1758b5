// planner.cpp — the planner's enumeration, activations and step time
// (planner.h); the model state per rank is the hole (plan_memory.cpp).
#include "planner.h"

#include <algorithm>
#include <array>
#include <sstream>

#include "ch15.h"
#include "stage.h"

namespace dpt::ch15 {

namespace {
std::vector<int> plan_divisors_of(int64_t n) {
  std::vector<int> out;
  for (int64_t k = 1; k <= n; ++k)
    if (n % k == 0) out.push_back(int(k));
  return out;
}
}  // namespace

// The link a group's messages cross: members r0 + k·stride, k < size. A group
// stays on one node only when every group of the grid does (its span divides
// the node); else some message crosses nodes, and a ring is as slow as its
// slowest link (chapter 08's rule).
const LinkModel& plan_group_link(int stride, int size, const PlanMachine& m) {
  const int span = stride * size;
  return span <= m.per_node && m.per_node % span == 0 ? m.intra : m.inter;
}

double plan_message_seconds(const LinkModel& link, double bytes) {
  return link.latency_us * 1e-6 + link.transfer_seconds(int64_t(bytes));
}

// A ring over n ranks moving `halves` passes of (n−1) messages of S/n bytes:
// an all-reduce is 2 passes, a reduce-scatter or an all-gather 1 (chapter 08).
double plan_ring_seconds(const LinkModel& link, int n, double bytes, double halves) {
  if (n <= 1) return 0;
  return halves * (n - 1) * plan_message_seconds(link, bytes / n);
}

std::string PlanLayout::name() const {
  std::ostringstream s;
  s << "tp " << tp << " pp " << pp << " dp " << dp << " M " << micro << (sp ? " sp" : "") << " zero " << zero;
  return s.str();
}

int plan_stage_layers(int layers, int stages, int stage) {
  const ch13::LayerRange r = ch13::stage_layers(layers, stages, stage);  // the split the pipeline runs
  return r.last - r.first;
}

double activation_bytes(const PlanModel& model, const PlanLayout& l, int stage) {
  const GptShape& s = model.shape;
  const double b = double(model.batch / l.micro), T = double(s.context), C = double(s.width), V = double(s.vocab);
  const double n = b * T, t = l.tp, heads = double(s.heads) / t;
  const double region = (l.sp ? 1 / t : 1.0);  // the replicated region: whole, or T/tp positions under sp
  // Per block: ln_1 and ln_2's outputs and the two residual sums (4nC, the
  // region); q, k, v and the heads' outputs (4nC/tp); scores and weights
  // (2·b·H/tp·T²); the MLP's 4C features before and after gelu (8nC/tp); the
  // two row-parallel partial sums (2nC, whole) and g's results (2nC, whole;
  // under sp ÷ tp, and f's all-gathers keep 2nC whole in front of c_attn and c_fc).
  const double exchanged = l.sp ? 2 * n * C / t + 2 * n * C : 2 * n * C;
  const double block = 4 * n * C * region + 4 * n * C / t + 2 * b * heads * T * T + 8 * n * C / t + 2 * n * C + exchanged;
  double floats = plan_stage_layers(s.layers, l.pp, stage) * block;
  if (stage == 0) floats += 3 * n * C * region;           // wte's rows, wpe's rows, their sum
  if (stage == l.pp - 1) floats += n * C * region + 2 * n * V;  // ln_f's output, the logits and their softmax
  const double in_flight = std::min(l.micro, l.pp - stage);    // 1F1B: stage s holds at most P − s
  return 4 * floats * in_flight;
}

RankMemory layout_memory(const PlanModel& model, const PlanLayout& l) {
  RankMemory most;
  for (int stage = 0; stage < l.pp; ++stage) {
    RankMemory m = rank_state_bytes(model, l, stage);
    m.activations = activation_bytes(model, l, stage);
    if (stage == 0 || m.total() > most.total()) most = m;
  }
  return most;
}

std::string layout_problem(const PlanModel& model, const PlanLayout& l, int world) {
  const GptShape& s = model.shape;
  std::ostringstream why;
  if (l.tp < 1 || l.pp < 1 || l.dp < 1 || int64_t(l.tp) * l.pp * l.dp != world)
    why << "tp " << l.tp << " x pp " << l.pp << " x dp " << l.dp << " is not the " << world << " ranks";
  else if (s.heads % l.tp != 0)
    why << "tp " << l.tp << " does not divide the " << s.heads << " heads";
  else if (s.layers % l.pp != 0)
    why << "pp " << l.pp << " does not divide the " << s.layers << " layers";
  else if (l.micro < 1 || model.batch % l.micro != 0)
    why << "M " << l.micro << " does not divide the batch of " << model.batch;
  else if (l.pp == 1 && l.micro != 1)
    why << "M " << l.micro << " micro-batches need a pipeline (pp > 1)";
  else if (l.sp && (l.tp == 1 || s.context % l.tp != 0))
    why << "sp needs tp > 1 dividing the context of " << s.context;
  else if (l.zero < 0 || l.zero > 3 || (l.zero > 0 && l.dp == 1))
    why << "ZeRO stage " << l.zero << " needs 0-3, and dp > 1 to divide anything";
  return why.str();
}

std::vector<PlanLayout> enumerate_layouts(const PlanModel& model, int world) {
  std::vector<PlanLayout> out;
  for (int tp : plan_divisors_of(world))
    for (int pp : plan_divisors_of(world / tp))
      for (int micro : pp > 1 ? plan_divisors_of(model.batch) : std::vector<int>{1})
        for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp)
          for (int zero = 0; zero <= (world / tp / pp > 1 ? 3 : 0); ++zero) {
            const PlanLayout l{tp, pp, world / tp / pp, micro, sp == 1, zero};
            if (layout_problem(model, l, world).empty()) out.push_back(l);
          }
  return out;
}

std::string PlanStep::dominant() const {
  const std::array<std::pair<double, const char*>, 5> parts{
      {{compute, "compute"}, {bubble, "bubble"}, {tp, "TP"}, {dp, "DP"}, {pp, "PP"}}};
  return std::max_element(parts.begin(), parts.end(), [](auto a, auto b) { return a.first < b.first; })->second;
}

GroupBytes group_bytes_per_step(const PlanModel& model, const PlanLayout& l, int stage) {
  const GptShape& s = model.shape;
  const double n = double(model.batch / l.micro) * double(s.context), C = double(s.width);
  const double calls = 4.0 * plan_stage_layers(s.layers, l.pp, stage) * l.micro;  // 2 each way per block
  GroupBytes g;
  if (l.tp > 1 && !l.sp) g.tp_all_reduce = calls * 4 * n * C;
  if (l.tp > 1 && l.sp) g.tp_all_gather = calls * 4 * n * C / l.tp, g.tp_reduce_scatter = calls * 4 * n * C;
  if (l.dp > 1) g.dp = rank_state_bytes(model, PlanLayout{l.tp, l.pp, l.dp, l.micro, l.sp, 0}, stage).grads;
  return g;
}

PlanStep predict_step(const PlanModel& model, const PlanLayout& l, const PlanMachine& m) {
  const GptShape& s = model.shape;
  const double b = double(model.batch / l.micro), T = double(s.context), C = double(s.width), V = double(s.vocab);
  const double n = b * T, rate = m.gflops * 1e9;
  PlanStep best;
  for (int stage = 0; stage < l.pp; ++stage) {  // the busiest stage sets the pace
    const int L = plan_stage_layers(s.layers, l.pp, stage);
    // Forward: 2 FLOPs per multiply-add; the block's 12C² weights and the heads' T×T scores, ÷ tp.
    double forward = L * (2 * n * 12 * C * C + 4 * b * T * T * C) / l.tp;
    if (stage == l.pp - 1) forward += 2 * n * V * C;  // the head, replicated
    PlanStep st;
    st.compute = 3 * forward * l.micro / rate;  // backward costs twice the forward
    const GroupBytes bytes = group_bytes_per_step(model, l, stage);
    const LinkModel& tp_link = plan_group_link(1, l.tp, m);
    const double per_call = 4 * n * C, calls = 4.0 * L * l.micro;
    st.tp = calls * plan_ring_seconds(tp_link, l.tp, per_call, 2);  // an all-reduce, or sp's AG + RS: the same
    st.bubble = (st.compute + st.tp) * (l.pp - 1) / l.micro;
    const LinkModel& dp_link = plan_group_link(l.tp, l.dp, m);
    const double dp_halves = l.zero == 3 ? 3 : 2;  // ZeRO-3 gathers the weights forward and backward too
    st.dp = plan_ring_seconds(dp_link, l.dp, bytes.dp, dp_halves);
    if (l.pp > 1)
      st.pp = 2.0 * (l.micro + l.pp - 2) * plan_message_seconds(plan_group_link(l.tp * l.dp, 2, m), 4 * n * C);
    if (stage == 0 || st.total() > best.total()) best = st;
  }
  return best;
}

std::vector<PlanEntry> make_plan(const PlanModel& model, int world, const PlanMachine& machine, double budget_bytes) {
  std::vector<PlanEntry> out;
  for (const PlanLayout& l : enumerate_layouts(model, world)) {
    PlanEntry e{l, layout_memory(model, l), predict_step(model, l, machine), ""};
    if (budget_bytes > 0 && e.memory.total() > budget_bytes) {
      const std::array<std::pair<double, const char*>, 4> parts{{{e.memory.params, "parameters"},
                                                                 {e.memory.grads, "gradients"},
                                                                 {e.memory.state, "optimizer state"},
                                                                 {e.memory.activations, "activations"}}};
      e.overflow = std::max_element(parts.begin(), parts.end(), [](auto a, auto b) { return a.first < b.first; })->second;
    }
    out.push_back(e);
  }
  std::stable_sort(out.begin(), out.end(), [](const PlanEntry& a, const PlanEntry& b) {
    if (a.overflow.empty() != b.overflow.empty()) return a.overflow.empty();
    if (a.step.total() != b.step.total()) return a.step.total() < b.step.total();
    return a.memory.total() < b.memory.total();
  });
  return out;
}

}  // namespace dpt::ch15
