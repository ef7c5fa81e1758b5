// solutions/01_sgd/sgd.cpp — the SGD update, element by element.
#include "ch01.h"

#include "dpt/check.h"

namespace dpt::ch01 {

void sgd_update(Tensor& param, const Tensor& grad, float lr) {
  DPT_CHECK(param.shape() == grad.shape(), "sgd_update: parameter " << shape_str(param.shape())
                                               << " but gradient " << shape_str(grad.shape()));
  float* p = param.data();
  const float* g = grad.data();
  for (int64_t i = 0, n = param.numel(); i < n; ++i) p[i] -= lr * g[i];
}

}  // namespace dpt::ch01
