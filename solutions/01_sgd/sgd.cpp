// solutions/01_sgd/sgd.cpp — SGD with momentum, element by element, as
// torch.optim.SGD does it: the first step's velocity is the gradient itself,
// then v ← μ·v + g; p ← p − lr·v.
#include "ch01.h"

#include "dpt/check.h"

namespace dpt::ch01 {

void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, float lr, float momentum) {
  DPT_CHECK(param.shape() == grad.shape(), "sgd_update: parameter " << shape_str(param.shape())
                                               << " but gradient " << shape_str(grad.shape()));
  float* p = param.data();
  const float* g = grad.data();
  const int64_t n = param.numel();
  if (!velocity.defined()) {  // first step: v₁ = g₁ (torch keeps no zero buffer)
    velocity = grad.clone();
  } else {
    float* v = velocity.data();
    for (int64_t i = 0; i < n; ++i) v[i] = momentum * v[i] + g[i];
  }
  const float* v = velocity.data();
  for (int64_t i = 0; i < n; ++i) p[i] -= lr * v[i];
}

}  // namespace dpt::ch01
