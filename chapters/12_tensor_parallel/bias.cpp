// bias.cpp — add_bias: forward and backward side by side, as ops.cpp writes linear.
#include "bias.h"

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/kernels.h"

namespace dpt::ch12 {

Tensor add_bias(const Tensor& y, const Tensor& bias) {
  DPT_CHECK(y.dim() == 2 && bias.dim() == 1 && bias.size(0) == y.size(1),
            "add_bias: bias " << shape_str(bias.shape()) << " for y " << shape_str(y.shape()) << " (expected (" << y.size(1)
                              << ",))");
  DPT_CHECK(&y.device() == &bias.device(), "add_bias: y on " << y.device().name() << ", bias on " << bias.device().name());
  Tensor out = y.clone();
  kernels_for(out.device()).add_bias(out.data(), bias.data(), out.size(0), out.size(1));
  return record(out, "add_bias", {y, bias}, [y, bias](const Tensor& dout) -> std::vector<Tensor> {
    Tensor dy, dbias;
    if (y.requires_grad()) dy = dout.clone();
    if (bias.requires_grad()) {
      dbias = Tensor::empty(bias.shape(), bias.device());
      kernels_for(dout.device()).sum_rows(dbias.data(), dout.data(), dout.size(0), dout.size(1));
    }
    return {dy, dbias};
  });
}

}  // namespace dpt::ch12
