// solutions/06_averaging/local_step.cpp — local SGD's step after backward
// (spec in ch06.h): gradients averaged in the warm-up, then local steps with
// the parameters (and, if asked, the optimizer state) averaged after every
// H-th local step.
#include "ch06.h"

#include "dpt/check.h"

namespace dpt::ch06 {

Averaging local_sgd_step(Communicator& comm, const Schedule& schedule, int64_t step, std::vector<Tensor>& params,
                         Optimizer& optimizer) {
  DPT_CHECK(schedule.every >= 1 && schedule.warmup >= 0 && step >= 0,
            "local_sgd_step: needs H >= 1, W >= 0 and step >= 0, got H " << schedule.every << ", W "
                                                                         << schedule.warmup << ", step " << step);
  if (step < schedule.warmup) {  // warm-up: gradient averaging, as chapters 03-05
    std::vector<Tensor> grads;
    for (Tensor& p : params) grads.push_back(p.grad());  // handles: averaged in place
    average_parameters(comm, grads);
    optimizer.step();
    return Averaging::Gradients;
  }
  optimizer.step();  // on this rank's own gradient
  const int64_t local_steps = step - schedule.warmup + 1;  // 1 after the first local step
  if (local_steps % schedule.every != 0) return Averaging::None;
  average_parameters(comm, params);
  if (schedule.average_state) {
    std::vector<Tensor> state = optimizer.state_tensors();  // same order on every rank
    average_parameters(comm, state);
  }
  return Averaging::Parameters;
}

}  // namespace dpt::ch06
