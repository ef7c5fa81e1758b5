// solutions/14_language_model/layer_norm.cpp — LayerNorm's backward, per row
// on the host. With g = dout ⊙ weight and x̂ the normalized row, x reaches
// the loss three ways: directly, through the mean and through the variance:
//   dx = rstd · (g − mean(g) − x̂ · mean(g ⊙ x̂))
// and the shared weight and bias collect every row's share:
//   dweight = Σ_rows dout ⊙ x̂,  dbias = Σ_rows dout.
#include "ch14.h"
#include "dpt/check.h"

namespace dpt::ch14 {

LayerNormGradients layer_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight,
                                       const LayerNormSaved& saved) {
  const int64_t rows = x.size(0), C = x.size(1);
  DPT_CHECK(dout.shape() == x.shape() && weight.numel() == C, "layer_norm_backward: dout, x (rows, C) and weight (C)");
  const float *dy = dout.data(), *xs = x.data(), *w = weight.data();
  const float *mean = saved.mean.data(), *rstd = saved.rstd.data();
  std::vector<float> dx(std::size_t(rows * C)), dweight(std::size_t(C), 0.0f), dbias(std::size_t(C), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    double mean_g = 0, mean_gx = 0;
    for (int64_t j = 0; j < C; ++j) {
      const double xhat = (xs[r * C + j] - mean[r]) * rstd[r], g = double(dy[r * C + j]) * w[j];
      mean_g += g / double(C), mean_gx += g * xhat / double(C);
      dweight[std::size_t(j)] += float(dy[r * C + j] * xhat);
      dbias[std::size_t(j)] += dy[r * C + j];
    }
    for (int64_t j = 0; j < C; ++j) {
      const double xhat = (xs[r * C + j] - mean[r]) * rstd[r], g = double(dy[r * C + j]) * w[j];
      dx[std::size_t(r * C + j)] = float(rstd[r] * (g - mean_g - xhat * mean_gx));
    }
  }
  Device& host = Device::host();
  return {Tensor::from_vector({rows, C}, dx, host), Tensor::from_vector({C}, dweight, host),
          Tensor::from_vector({C}, dbias, host)};
}

}  // namespace dpt::ch14
