// solutions/11_mixed_precision/loss_scaler.cpp — PyTorch's GradScaler.update():
// `memory` counts the clean steps in a row since the scale last changed or a
// step overflowed. Halve on an overflow and start counting again; double after
// growth_interval clean steps in a row (when the doubled scale is still a
// float), and start counting again either way. At the bottom of float's
// range a halving whose reciprocal is inf is not taken (GradScaler's own
// scale would go on to 0 there).
#include <cmath>

#include "ch11.h"

namespace dpt::ch11 {

void update_loss_scale(LossScaler& scaler, bool overflowed) {
  if (!scaler.dynamic) return;
  if (overflowed) {
    const float shrunk = scaler.scale * scaler.backoff_factor;
    if (std::isfinite(1.0f / shrunk)) scaler.scale = shrunk;
    scaler.memory = 0;
    return;
  }
  if (++scaler.memory < scaler.growth_interval) return;
  const float grown = scaler.scale * scaler.growth_factor;
  if (std::isfinite(grown)) scaler.scale = grown;
  scaler.memory = 0;
}

}  // namespace dpt::ch11
