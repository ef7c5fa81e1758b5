// gpu_training_step.h — the chapters' fp32 training step on cuda:0 (autograd,
// cuBLAS SGEMM, SGD), and how far one step's update is from another's:
// shared by bench_gpu_step (eager vs graph replay) and bench_gpu_half (the
// 16-bit step against it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dpt/autograd.h"
#include "dpt/nn.h"
#include "dpt/ops.h"
#include "dpt/optim.h"

namespace dpt::bench {

// The batch both GPU benches train on: x (batch, widths[0]) uniform in
// [-1, 1) on cuda:0 and labels below widths.back(), drawn from seed 1.
struct GpuBatch {
  Tensor x;
  std::vector<int64_t> labels;
};
inline GpuBatch random_batch(const std::vector<int64_t>& widths, int64_t batch) {
  Rng rng(1);
  std::vector<float> host_x(std::size_t(batch * widths.front()));
  for (float& v : host_x) v = rng.uniform(-1.0f, 1.0f);
  GpuBatch b{Tensor::from_vector({batch, widths.front()}, host_x, Device::host()).to(Device::cuda(0)),
             std::vector<int64_t>(std::size_t(batch))};
  for (auto& label : b.labels) label = int64_t(rng.below(uint64_t(widths.back())));
  return b;
}

// A model, its optimizer and one fixed batch on cuda:0; run() is one step.
// `loss` holds the last step's loss tensor (read after a graph replay).
struct TrainingStep {
  Rng rng;  // the initial weights: the same seed gives the same model
  MLP model;
  SGD optimizer;
  Tensor x;
  std::vector<int64_t> labels;
  Tensor loss;
  TrainingStep(const std::vector<int64_t>& widths, const Tensor& batch_x, std::vector<int64_t> batch_labels,
               float lr, uint64_t seed)
      : rng(seed),
        model(widths, Device::cuda(0), rng),
        optimizer(model.parameters(), lr),
        x(batch_x),
        labels(std::move(batch_labels)) {}
  void run() {
    loss = softmax_cross_entropy(model.forward(x), labels);
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
  }
  std::vector<std::vector<float>> weights() const {
    std::vector<std::vector<float>> all;
    for (const Tensor& p : model.parameters()) all.push_back(p.to_vector());
    return all;
  }
};

// max |(after_a − before) − (after_b − before)| / max |after_b − before|:
// how far update a is from update b, relative to b's size.
inline double relative_update_gap(const std::vector<std::vector<float>>& before,
                           const std::vector<std::vector<float>>& after_a,
                           const std::vector<std::vector<float>>& after_b) {
  double gap = 0, size = 0;
  for (std::size_t t = 0; t < before.size(); ++t)
    for (std::size_t i = 0; i < before[t].size(); ++i) {
      double da = double(after_a[t][i]) - before[t][i], db = double(after_b[t][i]) - before[t][i];
      gap = std::max(gap, std::fabs(da - db));
      if (std::isnan(da - db)) gap = NAN;
      size = std::max(size, std::fabs(db));
    }
  return size > 0 ? gap / size : gap;
}

}  // namespace dpt::bench
