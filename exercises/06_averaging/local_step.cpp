// exercises/06_averaging/local_step.cpp — hole: local SGD's step after backward.
// The contract is dpt::ch06::local_sgd_step in chapters/06_averaging/ch06.h;
// hints in tiers are in docs/ch06_averaging.md (§ Hints).
//
// Pointers:
//   - optimizer.step() updates params from their grad(); p.grad() is a handle
//     on the gradient, so averaging it in place is what the optimizer sees.
//   - optimizer.state_tensors() are handles on the optimizer's state.
//   - Send only through your average_parameters.
#include "ch06.h"

#include "dpt/check.h"

namespace dpt::ch06 {

Averaging local_sgd_step(Communicator& comm, const Schedule& schedule, int64_t step, std::vector<Tensor>& params,
                         Optimizer& optimizer) {
  (void)comm, (void)schedule, (void)step, (void)params, (void)optimizer;
  throw NotImplemented("ch06: local_sgd_step — see exercises/06_averaging/local_step.cpp");
}

}  // namespace dpt::ch06
