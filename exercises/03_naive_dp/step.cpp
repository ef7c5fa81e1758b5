// exercises/03_naive_dp/step.cpp — hole: one naive data-parallel step.
// Contract: ch03::naive_data_parallel_step in chapters/03_naive_dp/ch03.h.
//
// What exists: dpt/data.h (batches of chosen samples, on any device),
// dpt/optim.h (Optimizer), chapter 01's forward, loss and backward, and your
// other chapter 03 holes. Which of them a step needs, and in what order, is
// the exercise.
// Hints, in tiers: docs/ch03_naive_dp.md, "Hints".
#include "ch03.h"

#include "dpt/check.h"

namespace dpt::ch03 {

float naive_data_parallel_step(Context& ctx, MLP& replica, Optimizer& optimizer, const Dataset& data,
                               const std::vector<int64_t>& global_batch) {
  (void)ctx, (void)replica, (void)optimizer, (void)data, (void)global_batch;
  throw NotImplemented("ch03: naive_data_parallel_step — see exercises/03_naive_dp/step.cpp");
}

}  // namespace dpt::ch03
