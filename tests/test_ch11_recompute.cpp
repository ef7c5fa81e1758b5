// test_ch11_recompute.cpp — activation recomputation (recompute.h) and the
// hole under it, recompute_backward: the segments each policy cuts (provided
// code); gradients bit for bit equal to the core's own forward and backward
// (MLP::forward, no ch11 code) in fp32, and to no recomputation in bf16 and
// fp16; peak activation bytes on the ledger equal the per-op count (the
// checkpoints still needed plus one segment) and fall with recomputation.
#include "support/catch.h"
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "dpt/autograd.h"
#include "dpt/check.h"
#include "dpt/memory_ledger.h"
#include "dpt/ops.h"
#include "ch11.h"
#include "recompute.h"

using namespace dpt;
using namespace dpt::ch11;

namespace {
std::vector<float> grads_of(const MLP& model) {
  std::vector<float> g;
  for (const Tensor& w : model.parameters()) g.insert(g.end(), w.grad().data(), w.grad().data() + w.numel());
  return g;
}
void clear(const MLP& model) {
  for (Tensor w : model.parameters()) w.zero_grad();
}
bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// A recompute_backward that stops (a dpt::Error, not NotImplemented) left
// some parameter without its gradient: the property, then the error.
std::string stopped(const Error& e) {
  std::string what = e.what();  // through forward_backward it already names the hole
  if (what.rfind("recompute_backward", 0) != 0) what = "recompute_backward threw '" + what + "'";
  return "every parameter must end with plain backward's gradient, and " + what;
}

// forward_backward (recomputing by r, so through the hole); an Error from the
// hole fails the test with the property it broke.
void recomputed_step(const MLP& model, const Batch& batch, Precision p, float scale, Recompute r) {
  try {
    forward_backward(model, batch, p, scale, r, nullptr);
  } catch (const NotImplemented&) {
    throw;
  } catch (const Error& e) {
    FAIL(precision_name(p) << ", --recompute " << recompute_name(r) << ": " << stopped(e));
  }
}
}  // namespace

TEST_CASE("segment_bounds: none, every layer, every ceil(sqrt(L)) layers", "[ch11]") {
  CHECK(segment_bounds(9, Recompute::None) == std::vector<int64_t>{0, 9});
  CHECK(segment_bounds(4, Recompute::EveryLayer) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(segment_bounds(9, Recompute::Sqrt) == std::vector<int64_t>{0, 3, 6, 9});
  CHECK(segment_bounds(10, Recompute::Sqrt) == std::vector<int64_t>{0, 4, 8, 10});  // ceil(3.16) = 4
  CHECK(segment_bounds(1, Recompute::Sqrt) == std::vector<int64_t>{0, 1});
}

TEST_CASE("recomputation gives the same gradients, bit for bit, in fp32, bf16 and fp16", "[ch11][hole:recompute_backward]") {
  Rng rng(7);
  MLP model({12, 16, 16, 16, 16, 3}, Device::cpu(0), rng);
  Dataset data = make_synthetic(8, 12, 3, 5);
  Batch batch = gather_batch(data, {0, 1, 2, 3, 4, 5, 6, 7}, Device::cpu(0));
  // fp32's oracle: the core alone.
  clear(model);
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
  const std::vector<float> core = grads_of(model);
  for (Precision p : {Precision::FP32, Precision::BF16, Precision::FP16}) {
    clear(model);
    forward_backward(model, batch, p, 1024.0f, Recompute::None, nullptr);
    const std::vector<float> plain = grads_of(model);
    if (p == Precision::FP32) {
      std::vector<float> scaled_core = core;
      for (float& g : scaled_core) g *= 1024.0f;  // exact: a power of 2
      INFO("fp32 with no recomputation must be the core's forward and backward (times the scale 1024)");
      CHECK(same(plain, scaled_core));
    }
    for (Recompute r : {Recompute::EveryLayer, Recompute::Sqrt}) {
      clear(model);
      recomputed_step(model, batch, p, 1024.0f, r);
      INFO(precision_name(p) << ", --recompute " << recompute_name(r)
                             << ": the gradients must be those without recomputation, bit for bit (each segment's "
                                "backward must start from the gradient its output received)");
      CHECK(same(grads_of(model), plain));
    }
  }
}

TEST_CASE("recomputation: peak activation bytes on the ledger = the per-op count, and smaller", "[ch11][hole:recompute_backward]") {
  Device& device = Device::cpu(1);
  Rng rng(3);
  MLP model({64, 128, 128, 128, 128, 128, 128, 128, 128, 128, 10}, device, rng);  // 10 layers
  Dataset data = make_synthetic(16, 64, 10, 2);
  std::vector<int64_t> rows(16);
  for (int64_t i = 0; i < 16; ++i) rows[std::size_t(i)] = i;
  Batch batch = gather_batch(data, rows, device);
  double none_peak = 0;
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    for (Recompute r : {Recompute::None, Recompute::EveryLayer, Recompute::Sqrt}) {
      clear(model);
      device.reset_peak();
      const double before = double(device.ledger().current(MemoryCategory::Activations));
      if (r == Recompute::None) forward_backward(model, batch, p, 1.0f, r, nullptr);
      else recomputed_step(model, batch, p, 1.0f, r);
      const double peak = double(device.ledger().peak(MemoryCategory::Activations)) - before;
      const double predicted = predicted_activation_bytes(model, 16, p, r);
      INFO(precision_name(p) << ", --recompute " << recompute_name(r) << ": peak activation bytes " << peak
                             << ", counted per op " << predicted
                             << (peak > predicted + 16 ? ": more than the ops keep — a checkpoint, or a segment's graph, "
                                                         "still held?"
                                                       : ""));
      CHECK(std::fabs(peak - predicted) <= 16);  // scalars (the loss, its scaled copy) besides
      if (r == Recompute::None) none_peak = peak;
      else CHECK(peak < 0.6 * none_peak);  // 10 layers: checkpoints + one segment, well under all 10 layers
    }
  }
}

TEST_CASE("recompute_backward: each segment's forward runs once, one segment's graph alive at a time, every checkpoint released", "[ch11]") {
  Rng rng(9);
  MLP model({6, 8, 8, 8, 3}, Device::cpu(0), rng);  // 4 layers, 4 segments
  Dataset data = make_synthetic(4, 6, 3, 1);
  Batch batch = gather_batch(data, {0, 1, 2, 3}, Device::cpu(0));
  std::vector<Tensor> checkpoints;
  {
    NoGradGuard no_graph;
    Tensor h = batch.x;
    for (int64_t k = 0; k < 4; ++k) checkpoints.push_back(h), h = forward_layers(model, h, k, k + 1, Precision::FP32, nullptr);
  }
  std::vector<std::size_t> calls;
  std::vector<std::weak_ptr<TensorImpl>> outputs;  // each call's output: alive while anyone holds its graph
  std::size_t alive_at_a_call = 0;                 // earlier outputs still held when a forward was called
  clear(model);
  try {
    ch11::recompute_backward(
        checkpoints,
        [&](std::size_t k, const Tensor& in) {
          for (const auto& o : outputs) alive_at_a_call += o.expired() ? 0 : 1;
          calls.push_back(k);
          Tensor out = forward_layers(model, in, int64_t(k), int64_t(k) + 1, Precision::FP32, nullptr);
          outputs.push_back(out.impl());
          return out;
        },
        [&](const Tensor& logits) { return softmax_cross_entropy(logits, batch.y); });
  } catch (const NotImplemented&) {
    throw;
  } catch (const Error& e) {
    FAIL(stopped(e) << " (segments called: " << calls.size() << ")");
  }
  {
    std::vector<std::size_t> sorted = calls;
    std::sort(sorted.begin(), sorted.end());
    INFO("forward must be called once per segment: " << calls.size() << " calls for 4 segments");
    CHECK(sorted == std::vector<std::size_t>{0, 1, 2, 3});
  }
  {
    INFO("at most one segment's graph may be alive at a time: when a segment's forward was called, "
         << alive_at_a_call << " output(s) of earlier calls were still held");
    CHECK(alive_at_a_call == 0);
  }
  for (std::size_t k = 0; k < checkpoints.size(); ++k) {
    INFO("checkpoints[" << k << "] must be released (left undefined) by the end of its segment's backward");
    CHECK_FALSE(checkpoints[k].defined());
  }
  const std::vector<float> got = grads_of(model);
  clear(model);
  softmax_cross_entropy(model.forward(batch.x), batch.y).backward();
  INFO("the gradients must be the core's forward and backward's, bit for bit");
  CHECK(same(got, grads_of(model)));
}
