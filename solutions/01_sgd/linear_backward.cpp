// solutions/01_sgd/linear_backward.cpp — backward of y = x · weightᵀ + bias,
// with the three sums of the chain rule written as loops.
#include "ch01.h"

#include "dpt/check.h"

namespace dpt::ch01 {

LinearGrads linear_backward(const Tensor& x, const Tensor& weight, const Tensor& dy) {
  DPT_CHECK(x.dim() == 2 && weight.dim() == 2 && dy.dim() == 2,
            "linear_backward: x, weight and dy must be 2-D");
  const int64_t batch = x.size(0), in = x.size(1), out = weight.size(0);
  DPT_CHECK(weight.size(1) == in && dy.size(0) == batch && dy.size(1) == out,
            "linear_backward: x " << shape_str(x.shape()) << ", weight " << shape_str(weight.shape())
                                  << ", dy " << shape_str(dy.shape()) << " do not fit");
  LinearGrads g{Tensor::zeros({batch, in}, x.device()), Tensor::zeros({out, in}, x.device()),
                Tensor::zeros({out}, x.device())};
  const float *xs = x.data(), *w = weight.data(), *d = dy.data();
  float *dx = g.dx.data(), *dw = g.dweight.data(), *db = g.dbias.data();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t o = 0; o < out; ++o) {
      const float dy_bo = d[b * out + o];
      db[o] += dy_bo;
      for (int64_t i = 0; i < in; ++i) {
        dx[b * in + i] += dy_bo * w[o * in + i];  // dx = dy · weight
        dw[o * in + i] += dy_bo * xs[b * in + i];  // dweight = dyᵀ · x
      }
    }
  }
  return g;
}

}  // namespace dpt::ch01
