// exercises/11_mixed_precision/master_step.cpp — hole: the optimizer step of
// a mixed-precision run, from 16-bit gradients to fp32 master weights and
// back. The contract is dpt::ch11::master_step in
// chapters/11_mixed_precision/ch11.h; hints in tiers are in
// docs/ch11_mixed_precision.md (§ Hints).
//
// Pointers:
//   - precision.h: round_(tensor, precision) rounds in place, has_inf_or_nan(t).
//   - optim.h: what an Optimizer reads and writes when it steps.
//   - tensor.h and ops.h have what reading, copying and scaling a tensor take.
#include "ch11.h"

#include "dpt/check.h"

namespace dpt::ch11 {

bool master_step(std::vector<Tensor>& params, std::vector<Tensor>& masters, Optimizer& optimizer, float scale,
                 Precision precision) {
  (void)params, (void)masters, (void)optimizer, (void)scale, (void)precision;
  throw NotImplemented("ch11: master_step — see exercises/11_mixed_precision/master_step.cpp");
}

}  // namespace dpt::ch11
