// recompute.cpp — forward keeping checkpoints, backward recomputing each
// segment (recompute.h).
#include "recompute.h"

#include <algorithm>
#include <cmath>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/memory_ledger.h"
#include "ch11.h"
#include "dpt/ops.h"
#include "half_linear.h"

namespace dpt::ch11 {

const char* recompute_name(Recompute r) {
  return r == Recompute::None ? "none" : r == Recompute::EveryLayer ? "every-layer" : "sqrt";
}

Recompute parse_recompute(const std::string& text) {
  if (text == "none") return Recompute::None;
  if (text == "every-layer") return Recompute::EveryLayer;
  if (text == "sqrt") return Recompute::Sqrt;
  throw Error("expected none, every-layer or sqrt, got '" + text + "'");
}

std::vector<int64_t> segment_bounds(int64_t layers, Recompute r) {
  const int64_t size = r == Recompute::None         ? layers
                       : r == Recompute::EveryLayer ? 1
                                                    : int64_t(std::ceil(std::sqrt(double(layers))));
  std::vector<int64_t> bounds;
  for (int64_t b = 0; b < layers; b += size) bounds.push_back(b);
  bounds.push_back(layers);
  return bounds;
}

Tensor forward_layers(const MLP& model, Tensor h, int64_t begin, int64_t end, Precision p, Flushes* flushes) {
  const std::vector<Linear>& layers = model.layers();
  for (int64_t i = begin; i < end; ++i) {
    h = store(half_linear(layers[std::size_t(i)], h, p), p, flushes);  // 16-bit inputs, fp32 sums, the output stored
    if (i + 1 < int64_t(layers.size())) h = relu(h);           // max(h, 0) of a 16-bit value is one
  }
  return h;
}

double forward_backward(const MLP& model, const Batch& batch, Precision p, float scale_by, Recompute r,
                        Flushes* flushes) {
  const int64_t layers = int64_t(model.layers().size());
  if (r == Recompute::None) {  // plain autograd: the whole graph kept from forward to backward
    Tensor loss;
    {
      MemoryScope scope(MemoryCategory::Activations);
      loss = softmax_cross_entropy(forward_layers(model, store(batch.x, p), 0, layers, p, flushes), batch.y);
    }
    MemoryScope scope(MemoryCategory::Grads);
    backward(scale(loss, scale_by));
    return loss.item();
  }
  // Forward: no graph; keep each segment's input (its checkpoint).
  const std::vector<int64_t> bounds = segment_bounds(layers, r);
  const std::size_t segments = bounds.size() - 1;
  std::vector<Tensor> checkpoints;
  double loss_value;
  {
    NoGradGuard no_graph;
    MemoryScope scope(MemoryCategory::Activations);
    Tensor h = store(batch.x, p);
    for (std::size_t k = 0; k < segments; ++k) {
      checkpoints.push_back(h);
      h = forward_layers(model, h, bounds[k], bounds[k + 1], p, nullptr);
    }
    loss_value = softmax_cross_entropy(h, batch.y).item();
  }
  // Backward: your recompute_backward, segment forwards charged to Activations.
  MemoryScope scope(MemoryCategory::Grads);
  try {
    recompute_backward(
        checkpoints,
        [&](std::size_t k, const Tensor& in) {
          MemoryScope activations(MemoryCategory::Activations);
          return forward_layers(model, in, bounds[k], bounds[k + 1], p, flushes);
        },
        [&](const Tensor& logits) {
          MemoryScope activations(MemoryCategory::Activations);
          return scale(softmax_cross_entropy(logits, batch.y), scale_by);
        });
  } catch (const NotImplemented&) {
    throw;
  } catch (const Error& e) {  // say which call stopped
    throw Error(std::string("recompute_backward stopped: ") + e.what(), e.where());
  }
  return loss_value;
}

double predicted_activation_bytes(const MLP& model, int64_t batch, Precision p, Recompute r) {
  const std::vector<int64_t>& w = model.widths();  // {in, hidden…, out}
  const int64_t layers = int64_t(w.size()) - 1;
  const bool half = p != Precision::FP32;
  const double b4 = 4.0 * double(batch);
  // What layer i keeps for backward, its input excluded.
  auto kept = [&](int64_t i) {
    const double out = double(w[std::size_t(i + 1)]);
    if (i + 1 < layers) return b4 * out * (half ? 3 : 2);  // Linear output, [stored copy,] ReLU output
    return b4 * out * (half ? 3 : 2);                      // Linear output, [stored copy,] softmax's probabilities
  };
  // The input of layer i: x stored (16-bit runs; fp32 reads the batch itself), or the previous ReLU's output.
  auto input = [&](int64_t i) { return i == 0 ? (half ? b4 * double(w[0]) : 0.0) : 0.0; };
  if (r == Recompute::None) {
    double all = input(0);
    for (int64_t i = 0; i < layers; ++i) all += kept(i);
    return all;
  }
  const std::vector<int64_t> bounds = segment_bounds(layers, r);
  // Checkpoint k: the input of layer bounds[k] (0 bytes for x in fp32; a ReLU output otherwise).
  auto checkpoint = [&](std::size_t k) {
    const int64_t i = bounds[k];
    return i == 0 ? input(0) : b4 * double(w[std::size_t(i)]);
  };
  // The worst moment: one segment's graph beside the checkpoints the
  // contract lets be held while that graph is alive.
  double worst = 0, held = 0;
  for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
    held += checkpoint(k);
    double segment = 0;
    for (int64_t i = bounds[k]; i < bounds[k + 1]; ++i) segment += kept(i);
    worst = std::max(worst, held + segment);
  }
  return worst;
}

}  // namespace dpt::ch11
