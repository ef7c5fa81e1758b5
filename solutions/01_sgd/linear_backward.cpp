// solutions/01_sgd/linear_backward.cpp — backward of y = x · weightᵀ + bias.
//
// Two GEMMs and a column sum. The loops a student may write instead compute
// the same numbers; gemm just does them at the machine's speed.
#include "ch01_holes.h"

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch01 {

LinearGrads linear_backward(const Tensor& x, const Tensor& weight, const Tensor& dy) {
  DPT_CHECK(x.dim() == 2 && weight.dim() == 2 && dy.dim() == 2,
            "linear_backward: x, weight and dy must be 2-D");
  int64_t batch = x.size(0), in = x.size(1), out = weight.size(0);
  DPT_CHECK(weight.size(1) == in && dy.size(0) == batch && dy.size(1) == out,
            "linear_backward: x " << shape_str(x.shape()) << ", weight " << shape_str(weight.shape())
                                  << ", dy " << shape_str(dy.shape()) << " do not fit");
  LinearGrads g;
  g.dx = Tensor::empty({batch, in}, x.device());
  gemm(dy, false, weight, false, g.dx);  // (B, out)·(out, in)
  g.dweight = Tensor::empty({out, in}, x.device());
  gemm(dy, true, x, false, g.dweight);   // (out, B)·(B, in)
  g.dbias = Tensor::zeros({out}, x.device());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < out; ++o) g.dbias.data()[o] += dy.data()[b * out + o];
  return g;
}

}  // namespace dpt::ch01
