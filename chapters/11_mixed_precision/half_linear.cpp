// half_linear.cpp — a Linear layer with 16-bit GEMMs on a GPU (half_linear.h).
#include "half_linear.h"

#include <cstddef>
#include <cstdint>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/floats.h"
#include "dpt/gpu_half.h"
#include "dpt/kernels.h"

namespace dpt::ch11 {

namespace {

// t's values as 16-bit patterns in stream-ordered scratch on t's GPU (exact
// when each is representable in `format`): dpt::Floats, two patterns a float,
// given back in its stream's order after the GEMMs queued before then.
struct HalfCopy {
  Floats scratch;
  uint16_t* ptr;
  HalfCopy(const Tensor& t, gpu::Half format)
      : scratch(t.device().index(), (t.numel() + 1) / 2), ptr(reinterpret_cast<uint16_t*>(scratch.data())) {
    gpu::round_to_half(ptr, t.data(), t.numel(), format, t.device().index());
  }
};

}  // namespace

Tensor half_linear(const Linear& layer, const Tensor& x, Precision p) {
  if (p == Precision::FP32 || x.device().is_host_memory()) return layer.forward(x);
  const Tensor &w = layer.weight, &b = layer.bias;
  DPT_CHECK(x.dim() == 2 && x.size(1) == w.size(1),
            "half_linear: x " << shape_str(x.shape()) << " for a weight " << shape_str(w.shape()));
  DPT_CHECK(b.defined() && &x.device() == &w.device() && &x.device() == &b.device(),
            "half_linear: x, weight and bias on one device, with a bias (x on " << x.device().name() << ")");
  const gpu::Half f = p == Precision::BF16 ? gpu::Half::BF16 : gpu::Half::FP16;
  const int gpu = x.device().index();
  const int64_t rows = x.size(0), in = w.size(1), out = w.size(0);
  Tensor y = Tensor::empty({rows, out}, x.device());
  {
    HalfCopy x16(x, f), w16(w, f);
    gpu::gemm_half(gpu, f, false, true, rows, out, in, 1.0f, x16.ptr, w16.ptr, 0.0f, y.data());  // x · Wᵀ
  }
  kernels_for(y.device()).add_bias(y.data(), b.data(), rows, out);
  return record(y, "half_linear", {x, w, b}, [x, w, b, f, gpu, rows, in, out](const Tensor& dy) -> std::vector<Tensor> {
    Tensor dx, dw, db;
    HalfCopy dy16(dy, f);  // a stored output's gradient: 16-bit values already
    if (x.requires_grad()) {
      dx = Tensor::empty(x.shape(), x.device());
      HalfCopy w16(w, f);
      gpu::gemm_half(gpu, f, false, false, rows, in, out, 1.0f, dy16.ptr, w16.ptr, 0.0f, dx.data());  // dy · W
    }
    if (w.requires_grad()) {
      dw = Tensor::empty(w.shape(), w.device());
      HalfCopy x16(x, f);
      gpu::gemm_half(gpu, f, true, false, out, in, rows, 1.0f, dy16.ptr, x16.ptr, 0.0f, dw.data());  // dyᵀ · x
    }
    if (b.requires_grad()) {
      db = Tensor::empty(b.shape(), b.device());
      kernels_for(dy.device()).sum_rows(db.data(), dy.data(), rows, out);
    }
    return {dx, dw, db};
  });
}

}  // namespace dpt::ch11
