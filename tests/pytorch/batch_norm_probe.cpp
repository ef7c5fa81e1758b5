// batch_norm_probe.cpp — dpt's batch_norm on numbers from stdin, for
// crosscheck_batch_norm.py to compare with torch.nn.functional.batch_norm.
//
// stdin (whitespace-separated): B C, then x (B·C, row-major), weight (C),
// bias (C), dy (B·C), running mean (C), running var (C).
// stdout: six lines, "name v0 v1 …": y, dx, dweight, dbias (the gradients of
// Σ dy ⊙ y), running_mean, running_var (after one training-mode step).
//
// `batch_norm_probe --ranks K`: the same rows split over K thread ranks (rank
// r takes rows [r·B/K, (r+1)·B/K)), normalized together by chapter 03's
// SyncBatchNorm; y and dx are the ranks' rows stacked, dweight and dbias the
// sums of the ranks' own, the running statistics rank 0's. Exit 77 when the
// ch03 holes are not filled (a student build).
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/launch.h"
#include "dpt/ops.h"
#include "sync_batch_norm.h"

namespace {
std::vector<float> read_floats(int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v)
    if (!(std::cin >> x)) throw std::runtime_error("batch_norm_probe: stdin ended early");
  return v;
}
void print(const char* name, const dpt::Tensor& t) {
  std::printf("%s", name);
  for (float v : t.to_vector()) std::printf(" %.9g", v);
  std::printf("\n");
}
}  // namespace

// One training step of `ranks` SyncBatchNorm ranks on x's rows: the six outputs, as one device's.
std::vector<dpt::Tensor> synced(int ranks, const dpt::Tensor& x, const dpt::Tensor& weight, const dpt::Tensor& bias,
                                const dpt::Tensor& dy, const dpt::BatchNormRunning& start) {
  using dpt::Tensor;
  const int64_t rows = x.size(0), cols = x.size(1);
  Tensor y = Tensor::empty(x.shape(), dpt::Device::host()), dx = Tensor::empty(x.shape(), dpt::Device::host());
  Tensor dweight = Tensor::zeros({cols}, dpt::Device::host()), dbias = Tensor::zeros({cols}, dpt::Device::host());
  dpt::BatchNormRunning running{start.mean.clone(), start.var.clone()};
  std::mutex mutex;
  dpt::LaunchOptions options;
  options.ranks = ranks;
  dpt::launch(options, [&](dpt::Context& ctx) {
    const int64_t begin = ctx.rank * rows / ranks, end = (ctx.rank + 1) * rows / ranks;
    dpt::ch03::SyncBatchStatistics sync(ctx.comm);
    Tensor xr = x.rows(begin, end).to(ctx.device), w = weight.to(ctx.device), b = bias.to(ctx.device);
    for (Tensor* t : {&xr, &w, &b}) t->set_requires_grad(true);
    dpt::BatchNormRunning own{start.mean.to(ctx.device), start.var.to(ctx.device)};
    Tensor yr = dpt::batch_norm(xr, w, b, 1e-5f, &own, &sync);
    dpt::backward(yr, dy.rows(begin, end).to(ctx.device));
    std::lock_guard<std::mutex> lock(mutex);
    y.rows(begin, end).copy_from(yr);
    dx.rows(begin, end).copy_from(xr.grad());
    dpt::axpy_(dweight, 1.0f, w.grad().to(dpt::Device::host()));
    dpt::axpy_(dbias, 1.0f, b.grad().to(dpt::Device::host()));
    if (ctx.rank == 0) running.mean.copy_from(own.mean), running.var.copy_from(own.var);
  });
  return {y, dx, dweight, dbias, running.mean, running.var};
}

int main(int argc, char** argv) {
  using dpt::Tensor;
  int ranks = 0;  // 0: one device, no SyncBatchNorm
  if (argc == 3 && std::strcmp(argv[1], "--ranks") == 0) ranks = std::stoi(argv[2]);
  int64_t rows = 0, cols = 0;
  if (!(std::cin >> rows >> cols) || rows < 1 || cols < 1) {
    std::fprintf(stderr, "batch_norm_probe: expected 'B C' first on stdin\n");
    return 2;
  }
  dpt::Device& host = dpt::Device::host();
  Tensor x = Tensor::from_vector({rows, cols}, read_floats(rows * cols), host);
  Tensor weight = Tensor::from_vector({cols}, read_floats(cols), host);
  Tensor bias = Tensor::from_vector({cols}, read_floats(cols), host);
  Tensor dy = Tensor::from_vector({rows, cols}, read_floats(rows * cols), host);
  dpt::BatchNormRunning running{Tensor::from_vector({cols}, read_floats(cols), host),
                                Tensor::from_vector({cols}, read_floats(cols), host)};
  std::vector<Tensor> out;
  if (ranks > 0) {
    try {
      out = synced(ranks, x, weight, bias, dy, running);
    } catch (const dpt::NotImplemented& e) {
      std::printf("skipped: %s\n", e.what());
      return 77;
    }
  } else {
    for (Tensor* t : {&x, &weight, &bias}) t->set_requires_grad(true);
    Tensor y = dpt::batch_norm(x, weight, bias, 1e-5f, &running);
    dpt::backward(y, dy);
    out = {y, x.grad(), weight.grad(), bias.grad(), running.mean, running.var};
  }
  const char* names[] = {"y", "dx", "dweight", "dbias", "running_mean", "running_var"};
  for (int i = 0; i < 6; ++i) print(names[i], out[std::size_t(i)]);
  return 0;
}
