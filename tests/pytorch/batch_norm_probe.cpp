// batch_norm_probe.cpp — dpt's batch_norm on numbers from stdin, for
// crosscheck_batch_norm.py to compare with torch.nn.functional.batch_norm.
//
// stdin (whitespace-separated): B C, then x (B·C, row-major), weight (C),
// bias (C), dy (B·C), running mean (C), running var (C).
// stdout: six lines, "name v0 v1 …": y, dx, dweight, dbias (the gradients of
// Σ dy ⊙ y), running_mean, running_var (after one training-mode step).
#include <cstdio>
#include <iostream>
#include <vector>

#include "dpt/autograd.h"
#include "dpt/ops.h"

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

int main() {
  using dpt::Tensor;
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
  for (Tensor* t : {&x, &weight, &bias}) t->set_requires_grad(true);
  Tensor y = dpt::batch_norm(x, weight, bias, 1e-5f, &running);
  dpt::backward(y, dy);
  print("y", y);
  print("dx", x.grad());
  print("dweight", weight.grad());
  print("dbias", bias.grad());
  print("running_mean", running.mean);
  print("running_var", running.var);
  return 0;
}
