// ch03_problem.h — the small problem chapter 03's hole tests share (a 6-10-4
// MLP on 96 synthetic samples, scrambled global batches) and the comparisons
// they judge by: weights as flat vectors, bits that differ, a least-squares
// factor between two gradients. No chapter code.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dpt/data.h"
#include "dpt/flatten.h"
#include "dpt/nn.h"
#include "dpt/ops.h"

namespace dpt_test {

// A small problem for the hole tests: 6 features, 4 classes, a 6-10-4 MLP.
constexpr int64_t kSamples = 96;
inline dpt::Dataset small_data() { return dpt::make_synthetic(kSamples, 6, 4, 5); }
inline dpt::MLP small_model(dpt::Device& device, uint64_t seed) {
  dpt::Rng rng(seed);
  return dpt::MLP({6, 10, 4}, device, rng);
}
// Step s's global batch: `size` distinct indices, in a scrambled order.
inline std::vector<int64_t> global_batch(int64_t step, int64_t size) {
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < size; ++i) idx.push_back((step * 29 + i * 13) % kSamples);
  return idx;
}
inline std::vector<float> weights_of(const dpt::MLP& m) { return dpt::flatten(m.parameters()); }
inline std::vector<float> grads_of(const dpt::MLP& m) {
  std::vector<dpt::Tensor> g;
  for (const dpt::Tensor& p : m.parameters()) g.push_back(p.grad());
  return dpt::flatten(g);
}
inline double max_abs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) m = std::max(m, double(std::fabs(x)));
  return m;
}
inline int64_t bits_differing(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}
// The oracle: one device, serially, on the whole batch: the gradient of the
// batch's mean loss at the model's weights (the model is left with it in grad()).
inline std::vector<float> one_device_gradient(dpt::MLP& model, const dpt::Dataset& data, const std::vector<int64_t>& batch) {
  for (dpt::Tensor& p : model.parameters()) p.zero_grad();
  dpt::Batch b = dpt::gather_batch(data, batch, dpt::Device::host());
  dpt::softmax_cross_entropy(model.forward(b.x), b.y).backward();
  return grads_of(model);
}
// g = a / b's least-squares factor: 1 when a = b, N when a is N × b (a sum for a mean).
inline double factor(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], bb += double(b[i]) * b[i];
  return bb > 0 ? ab / bb : 0;
}

}  // namespace dpt_test
