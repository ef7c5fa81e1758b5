// solutions/15_3d_parallel/plan_memory.cpp — reference: the model state one
// rank of a layout holds (ch15.h, rank_state_bytes).
#include "dpt/zero_formula.h"
#include "ch15.h"
#include "planner.h"

namespace dpt::ch15 {

RankMemory rank_state_bytes(const PlanModel& model, const PlanLayout& layout, int stage) {
  const GptShape& s = model.shape;
  const double C = double(s.width), V = double(s.vocab), T = double(s.context);
  const double blocks = plan_stage_layers(s.layers, layout.pp, stage);
  // A block: c_attn (3C² + 3C), c_proj's weight (C²), c_fc (4C² + 4C) and the
  // MLP's c_proj weight (4C²) split over tp; its two LayerNorms (4C) and the
  // two c_proj biases (2C) whole on every rank.
  double psi = blocks * ((12 * C * C + 7 * C) / layout.tp + 6 * C);
  if (stage == 0) psi += V * C + T * C;                // wte, wpe: whole, on the first stage
  if (stage == layout.pp - 1) psi += V * C + 2 * C;    // lm_head, ln_f: whole, on the last
  const StateBytes per_value{4, 4, model.adam ? 8.0 : 0.0};  // fp32 weight, gradient, Adam's m and v
  const StateBytes b = zero_state_bytes(layout.zero, per_value, psi, psi / layout.dp);
  RankMemory out;
  out.params = b.params, out.grads = b.grads, out.state = b.state;
  return out;
}

}  // namespace dpt::ch15
