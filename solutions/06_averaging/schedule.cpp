// solutions/06_averaging/schedule.cpp — when to average (spec in ch06.h).
#include "ch06.h"

#include "dpt/check.h"

namespace dpt::ch06 {

Averaging averaging_at(const Schedule& schedule, int64_t step) {
  DPT_CHECK(schedule.every >= 1 && schedule.warmup >= 0 && step >= 0,
            "averaging_at: needs H >= 1, W >= 0 and step >= 0, got H " << schedule.every << ", W "
                                                                       << schedule.warmup << ", step " << step);
  if (!schedule.parameters || step < schedule.warmup) return Averaging::Gradients;
  int64_t local_steps = step - schedule.warmup + 1;  // 1 for the first step after warm-up
  return local_steps % schedule.every == 0 ? Averaging::Parameters : Averaging::None;
}

}  // namespace dpt::ch06
