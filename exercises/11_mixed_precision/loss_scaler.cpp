// exercises/11_mixed_precision/loss_scaler.cpp — hole: the dynamic loss
// scaler's update after a step. The contract is dpt::ch11::update_loss_scale
// in chapters/11_mixed_precision/ch11.h; hints in tiers are in
// docs/ch11_mixed_precision.md (§ Hints).
//
// Pointers:
//   - LossScaler (ch11.h) holds the settings, the scale, and `memory`: yours,
//     for whatever the laws need remembered between calls. The training loop
//     calls you once per step, skipped steps included.
//   - std::isfinite is in <cmath>.
#include "ch11.h"

#include "dpt/check.h"

namespace dpt::ch11 {

void update_loss_scale(LossScaler& scaler, bool overflowed) {
  (void)scaler, (void)overflowed;
  throw NotImplemented("ch11: update_loss_scale — see exercises/11_mixed_precision/loss_scaler.cpp");
}

}  // namespace dpt::ch11
