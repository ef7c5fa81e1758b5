// exercises/15_3d_parallel/plan_memory.cpp — hole: the model state one rank
// of a layout holds, the planner's memory column. The contract is
// dpt::ch15::rank_state_bytes in chapters/15_3d_parallel/ch15.h; hints in
// tiers are in docs/ch15_3d_parallel.md (§ Hints).
//
// What you may use:
//   - plan_stage_layers (planner.h): the blocks a pipeline stage holds;
//   - zero_state_bytes (dpt/zero_formula.h): chapter 07's stages, by category;
//   - GptShape's sizes (gpt.h) and what chapter 15 splits (tp_gpt.h's TpBlock).
#include "dpt/check.h"
#include "dpt/zero_formula.h"
#include "ch15.h"
#include "planner.h"

namespace dpt::ch15 {

RankMemory rank_state_bytes(const PlanModel& model, const PlanLayout& layout, int stage) {
  (void)model, (void)layout, (void)stage;
  throw NotImplemented("ch15: rank_state_bytes — see exercises/15_3d_parallel/plan_memory.cpp");
}

}  // namespace dpt::ch15
