// solutions/11_mixed_precision/loss_scaler.cpp — PyTorch's GradScaler.update():
// halve on an overflow and start counting again; double after growth_interval
// clean steps in a row (when the doubled scale is still a float).
#include <cmath>

#include "ch11.h"

namespace dpt::ch11 {

void update_loss_scale(LossScaler& scaler, bool overflowed) {
  if (!scaler.dynamic) return;
  if (overflowed) {
    scaler.scale *= scaler.backoff_factor;
    scaler.good_steps = 0;
    return;
  }
  if (++scaler.good_steps < scaler.growth_interval) return;
  const float grown = scaler.scale * scaler.growth_factor;
  if (std::isfinite(grown)) scaler.scale = grown;
  scaler.good_steps = 0;
}

}  // namespace dpt::ch11
