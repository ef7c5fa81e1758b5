// solutions/11_mixed_precision/master_step.cpp — the mixed-precision step:
// look for an overflow first (a skipped step touches nothing), then unscale
// each 16-bit gradient into an fp32 gradient of its master, step the
// optimizer on the masters, and round the masters into the 16-bit weights.
#include "ch11.h"

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch11 {

bool master_step(std::vector<Tensor>& params, std::vector<Tensor>& masters, Optimizer& optimizer, float scale,
                 Precision precision) {
  DPT_CHECK(params.size() == masters.size(), "master_step: " << params.size() << " weights but "
                                                             << masters.size() << " master copies");
  for (const Tensor& w : params)
    if (w.grad().defined() && has_inf_or_nan(w.grad())) return false;  // before anything is written
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!params[i].grad().defined()) continue;
    Tensor g = params[i].grad().clone();  // fp32 from here on
    scale_(g, 1.0f / scale);
    masters[i].set_grad(g);
  }
  optimizer.step();
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].copy_from(masters[i]);
    round_(params[i], precision);
  }
  return true;
}

}  // namespace dpt::ch11
