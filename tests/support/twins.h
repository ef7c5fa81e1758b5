// twins.h — a GPU result against its CPU twin: the same random inputs on
// cpu:0 and cuda:0, and a normwise relative difference to compare them with.
//
//   Twin a = twin({64, 10}, 1);            // a.cpu on cpu:0, a.gpu its copy on cuda:0
//   REQUIRE(relative_diff(out_gpu, out_cpu) <= 1e-5);
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "dpt/device.h"
#include "dpt/nn.h"
#include "dpt/tensor.h"

namespace dpt_test {

/// One tensor twice: on cpu:0 and, bit for bit the same, on cuda:0.
struct Twin {
  dpt::Tensor cpu, gpu;
};

/// Uniform values in [-scale, scale) from `seed`, on cpu:0 and cuda:0 (or on
/// `other`: the CPU emulator's twin lives on a CPU device).
inline Twin twin(const dpt::Shape& shape, uint64_t seed, float scale = 1.0f, dpt::Device& other = dpt::Device::cuda(0)) {
  dpt::Rng rng(seed);
  std::vector<float> values(std::size_t(dpt::shape_numel(shape)));
  for (float& v : values) v = scale * (2.0f * rng.uniform() - 1.0f);
  dpt::Tensor cpu = dpt::Tensor::from_vector(shape, values, dpt::Device::cpu(0));
  return {cpu, cpu.to(other)};
}

/// max |gpu − cpu| / max |cpu| (normwise: GEMM rounding errors scale with the
/// largest entries, not with each entry, which may be a cancellation near 0).
/// NaN when any difference is NaN; the plain max difference when cpu is all 0.
inline double relative_diff(const dpt::Tensor& gpu, const dpt::Tensor& cpu) {
  std::vector<float> g = gpu.to_vector(), c = cpu.to_vector();
  if (g.size() != c.size()) return std::numeric_limits<double>::quiet_NaN();
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    double d = std::fabs(double(g[i]) - double(c[i]));
    if (std::isnan(d)) return d;
    worst = std::max(worst, d);
    scale = std::max(scale, std::fabs(double(c[i])));
  }
  return scale > 0 ? worst / scale : worst;
}

}  // namespace dpt_test
