// nn.cpp — random numbers, Linear, BatchNorm1d and MLP.
#include "dpt/nn.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt {

// ----------------------------------------------------------------------------
// Rng: xoshiro256** seeded by splitmix64

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : state_) s = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  uint64_t result = rotl(state_[1] * 5, 7) * 9;
  uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

float Rng::uniform() { return float(next_u64() >> 40) * (1.0f / 16777216.0f); }

float Rng::normal() {
  float u1 = uniform(), u2 = uniform();
  if (u1 < 1e-12f) u1 = 1e-12f;  // log(0) guard
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864f * u2);
}

uint64_t Rng::below(uint64_t n) {
  DPT_CHECK(n > 0, "Rng::below(0)");
  return next_u64() % n;  // bias < n / 2^64: irrelevant at our sizes
}

// ----------------------------------------------------------------------------
// Linear

Linear::Linear(int64_t in_features, int64_t out_features, Device& device, Rng& rng) {
  DPT_CHECK(in_features > 0 && out_features > 0,
            "Linear(" << in_features << ", " << out_features << "): sizes must be positive");
  float bound = 1.0f / std::sqrt(float(in_features));
  // Drawn on the host (weights first, then biases), then copied to `device`:
  // a model on cuda:0 starts from the same numbers as one on cpu:0.
  std::vector<float> w(static_cast<std::size_t>(out_features * in_features));
  std::vector<float> b(static_cast<std::size_t>(out_features));
  for (float& value : w) value = rng.uniform(-bound, bound);
  for (float& value : b) value = rng.uniform(-bound, bound);
  weight = Tensor::from_vector({out_features, in_features}, w, device);
  bias = Tensor::from_vector({out_features}, b, device);
  weight.set_requires_grad(true);
  bias.set_requires_grad(true);
}

Tensor Linear::forward(const Tensor& x) const { return linear(x, weight, bias); }

// ----------------------------------------------------------------------------
// BatchNorm1d

BatchNorm1d::BatchNorm1d(int64_t features, Device& device)
    : weight(Tensor::full({features}, 1.0f, device)),
      bias(Tensor::zeros({features}, device)),
      running{Tensor::zeros({features}, device), Tensor::full({features}, 1.0f, device)} {
  weight.set_requires_grad(true);
  bias.set_requires_grad(true);
}

Tensor BatchNorm1d::forward(const Tensor& x, BatchStatistics* across) const {
  BatchNormRunning stats = running;  // handles: the update lands in this layer's tensors
  return batch_norm(x, weight, bias, 1e-5f, &stats, across);
}

Tensor BatchNorm1d::infer(const Tensor& x) const { return batch_norm_inference(x, weight, bias, running); }

// ----------------------------------------------------------------------------
// MLP

MLP::MLP(const std::vector<int64_t>& widths, Device& device, Rng& rng, bool batch_norm) : widths_(widths) {
  DPT_CHECK(widths.size() >= 2, "an MLP needs at least an input and an output width");
  for (std::size_t i = 0; i + 1 < widths.size(); ++i)
    layers_.emplace_back(widths[i], widths[i + 1], device, rng);
  if (batch_norm)
    for (std::size_t i = 1; i + 1 < widths.size(); ++i) norms_.emplace_back(widths[i], device);
}

Tensor MLP::forward(const Tensor& x) const {
  Tensor h = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    h = layers_[i].forward(h);
    if (i + 1 == layers_.size()) break;
    if (!norms_.empty()) h = norms_[i].forward(h, across_);
    h = relu(h);
  }
  return h;
}

Tensor MLP::infer(const Tensor& x) const {
  Tensor h = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    h = layers_[i].forward(h);
    if (i + 1 == layers_.size()) break;
    if (!norms_.empty()) h = norms_[i].infer(h);
    h = relu(h);
  }
  return h;
}

std::vector<NamedTensor> MLP::named_parameters() const {
  std::vector<NamedTensor> out;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    std::string prefix = "fc" + std::to_string(i);
    out.push_back({prefix + ".weight", layers_[i].weight});
    out.push_back({prefix + ".bias", layers_[i].bias});
    if (i < norms_.size()) {
      out.push_back({"bn" + std::to_string(i) + ".weight", norms_[i].weight});
      out.push_back({"bn" + std::to_string(i) + ".bias", norms_[i].bias});
    }
  }
  return out;
}

std::vector<NamedTensor> MLP::named_state() const {
  std::vector<NamedTensor> out = named_parameters();
  for (std::size_t i = 0; i < norms_.size(); ++i) {
    out.push_back({"bn" + std::to_string(i) + ".running_mean", norms_[i].running.mean});
    out.push_back({"bn" + std::to_string(i) + ".running_var", norms_[i].running.var});
  }
  return out;
}

std::vector<Tensor> MLP::parameters() const {
  std::vector<Tensor> out;
  for (auto& named : named_parameters()) out.push_back(named.tensor);
  return out;
}

int64_t MLP::num_parameters() const {
  int64_t n = 0;
  for (auto& p : parameters()) n += p.numel();
  return n;
}

double MLP::forward_flops(int64_t batch) const {
  double flops = 0;
  for (std::size_t i = 0; i + 1 < widths_.size(); ++i)
    flops += 2.0 * double(batch) * double(widths_[i]) * double(widths_[i + 1]);
  return flops;
}

std::vector<int64_t> parse_widths(const std::string& spec) {
  std::vector<int64_t> widths;
  std::stringstream in(spec);
  std::string part;
  while (std::getline(in, part, '-')) {
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    DPT_CHECK(used == part.size() && !part.empty() && value > 0,
              "model '" << spec << "': expected positive layer widths joined by '-', e.g. 784-256-10");
    widths.push_back(value);
  }
  DPT_CHECK(widths.size() >= 2, "model '" << spec << "': needs at least an input and an output width, e.g. 784-10");
  return widths;
}

void copy_parameters(const MLP& src, MLP& dst) {
  auto from = src.named_state();
  auto to = dst.named_state();
  DPT_CHECK(from.size() == to.size(), "copy_parameters: models have different layers (batch norm in one only?)");
  for (std::size_t i = 0; i < from.size(); ++i) {
    DPT_CHECK(from[i].tensor.shape() == to[i].tensor.shape(),
              "copy_parameters: " << from[i].name << " is " << shape_str(from[i].tensor.shape())
                                  << " vs " << shape_str(to[i].tensor.shape()));
    to[i].tensor.copy_from(from[i].tensor);
  }
}

}  // namespace dpt
