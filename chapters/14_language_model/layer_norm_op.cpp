// layer_norm_op.cpp — the chapter's LayerNorm op (ch14.h): the forward, given,
// as host loops; the backward is your hole, layer_norm_backward.
//
// On a GPU the op copies x to the host, normalizes there and copies y back;
// its backward does the same around your hole. That costs two copies per
// LayerNorm (2L + 1 of them per step), small next to the GEMMs at the
// chapter's sizes; dpt::layer_norm (common/core) is the same function with a
// kernel on each device, and the tests' oracle.
#include <cmath>

#include "ch14.h"
#include "dpt/autograd.h"
#include "dpt/check.h"

namespace dpt::ch14 {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  DPT_CHECK(x.dim() >= 1 && x.size(-1) > 0, "ch14 layer_norm: x needs a last axis to normalize");
  const int64_t C = x.size(-1), rows = x.numel() / C;
  DPT_CHECK(weight.shape() == Shape{C} && bias.shape() == Shape{C},
            "ch14 layer_norm: weight and bias must both be (" << C << "), x's last size");
  DPT_CHECK(eps > 0, "ch14 layer_norm: eps must be positive, got " << eps);
  const std::vector<float> xs = x.to_vector(), w = weight.to_vector(), b = bias.to_vector();
  std::vector<float> y(xs.size()), mean(std::size_t(rows), 0.0f), rstd(std::size_t(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = xs.data() + r * C;
    double sum = 0, squares = 0;
    for (int64_t j = 0; j < C; ++j) sum += row[j];
    const double m = sum / double(C);
    for (int64_t j = 0; j < C; ++j) squares += (row[j] - m) * (row[j] - m);
    const double s = 1.0 / std::sqrt(squares / double(C) + double(eps));
    mean[std::size_t(r)] = float(m), rstd[std::size_t(r)] = float(s);
    for (int64_t j = 0; j < C; ++j)
      y[std::size_t(r * C + j)] = float((row[j] - m) * s) * w[std::size_t(j)] + b[std::size_t(j)];
  }
  Device& host = Device::host();
  LayerNormSaved saved{Tensor::from_vector({rows}, mean, host), Tensor::from_vector({rows}, rstd, host)};
  Tensor out = Tensor::from_vector(x.shape(), y, host).to(x.device());
  return record(out, "ch14::layer_norm", {x, weight, bias},
                [x, weight, bias, saved, rows, C](const Tensor& dout) -> std::vector<Tensor> {
                  Device& host = Device::host();
                  LayerNormGradients g = layer_norm_backward(dout.to(host).reshape({rows, C}),
                                                             x.to(host).reshape({rows, C}), weight.to(host), saved);
                  DPT_CHECK(g.dx.defined() && g.dx.shape() == Shape({rows, C}),
                            "layer_norm_backward: dx must be (" << rows << ", " << C << "), x's shape");
                  DPT_CHECK(g.dweight.defined() && g.dweight.shape() == Shape{C} && g.dbias.defined() &&
                                g.dbias.shape() == Shape{C},
                            "layer_norm_backward: dweight and dbias must be (" << C << "), summed over the rows");
                  return {x.requires_grad() ? g.dx.reshape(x.shape()).to(x.device()) : Tensor(),
                          weight.requires_grad() ? g.dweight.to(weight.device()) : Tensor(),
                          bias.requires_grad() ? g.dbias.to(bias.device()) : Tensor()};
                });
}

}  // namespace dpt::ch14
