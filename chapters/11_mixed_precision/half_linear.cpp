// half_linear.cpp — a Linear layer with 16-bit GEMMs on a GPU (half_linear.h),
// through the core's op seam (kernels.h's gemm_half).
#include "half_linear.h"

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/kernels.h"

namespace dpt::ch11 {

Tensor half_linear(const Linear& layer, const Tensor& x, Precision p) {
  if (p == Precision::FP32 || x.device().is_host_memory()) return layer.forward(x);
  const Tensor &w = layer.weight, &b = layer.bias;
  DPT_CHECK(x.dim() == 2 && x.size(1) == w.size(1),
            "half_linear: x " << shape_str(x.shape()) << " for a weight " << shape_str(w.shape()));
  DPT_CHECK(b.defined() && &x.device() == &w.device() && &x.device() == &b.device(),
            "half_linear: x, weight and bias on one device, with a bias (x on " << x.device().name() << ")");
  const Half f = half_format(p);
  const int64_t rows = x.size(0), in = w.size(1), out = w.size(0);
  Kernels& k = kernels_for(x.device());
  Tensor y = Tensor::empty({rows, out}, x.device());
  k.gemm_half(f, false, true, rows, out, in, x.data(), w.data(), y.data());  // x · Wᵀ, 16-bit operands
  k.add_bias(y.data(), b.data(), rows, out);
  return record(y, "half_linear", {x, w, b}, [x, w, b, f, rows, in, out](const Tensor& dy) -> std::vector<Tensor> {
    Kernels& on = kernels_for(dy.device());  // dy: a stored output's gradient, 16-bit values already
    Tensor dx, dw, db;
    if (x.requires_grad()) {
      dx = Tensor::empty(x.shape(), x.device());
      on.gemm_half(f, false, false, rows, in, out, dy.data(), w.data(), dx.data());  // dy · W
    }
    if (w.requires_grad()) {
      dw = Tensor::empty(w.shape(), w.device());
      on.gemm_half(f, true, false, out, in, rows, dy.data(), x.data(), dw.data());  // dyᵀ · x
    }
    if (b.requires_grad()) {
      db = Tensor::empty(b.shape(), b.device());
      on.sum_rows(db.data(), dy.data(), rows, out);
    }
    return {dx, dw, db};
  });
}

}  // namespace dpt::ch11
