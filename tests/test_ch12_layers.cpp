// test_ch12_layers.cpp — chapter 12's two parallel layers against one
// device's layer written out here in double (y = x·Wᵀ + b and its three
// gradients), and a whole split MLP's gradient against one device's.
#include "support/catch.h"
#include <cmath>
#include <string>
#include <vector>

#include "ch12.h"
#include "dpt/data.h"
#include "dpt/nn.h"
#include "dpt/autograd.h"
#include "dpt/ops.h"
#include "support/findings.h"
#include "support/ranks.h"
#include "tp_model.h"

using namespace dpt;
using namespace dpt::ch12;

namespace {
float layer_value(int seed, int64_t i) { return float((i * 5 + seed * 11) % 19 - 9) / 16.0f; }
std::vector<float> layer_values(int seed, int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n), 0.0f);
  for (int64_t i = 0; i < n; ++i) v[std::size_t(i)] = layer_value(seed, i);
  return v;
}

// One device's layer and its gradients for loss = Σ C ∘ y, in double: the oracle.
struct Layer {
  int64_t B, in, out;
  std::vector<float> x, w, b, c;  // (B,in), (out,in), (out), (B,out)
  double y(int64_t s, int64_t o) const {
    double acc = b[std::size_t(o)];
    for (int64_t k = 0; k < in; ++k) acc += double(x[std::size_t(s * in + k)]) * w[std::size_t(o * in + k)];
    return acc;
  }
  double dw(int64_t o, int64_t k) const {
    double acc = 0;
    for (int64_t s = 0; s < B; ++s) acc += double(c[std::size_t(s * out + o)]) * x[std::size_t(s * in + k)];
    return acc;
  }
  double db(int64_t o) const {
    double acc = 0;
    for (int64_t s = 0; s < B; ++s) acc += c[std::size_t(s * out + o)];
    return acc;
  }
  double dx(int64_t s, int64_t k) const {
    double acc = 0;
    for (int64_t o = 0; o < out; ++o) acc += double(c[std::size_t(s * out + o)]) * w[std::size_t(o * in + k)];
    return acc;
  }
};
Layer make_layer(int64_t B, int64_t in, int64_t out) {
  return {B, in, out, layer_values(1, B * in), layer_values(2, out * in), layer_values(3, out), layer_values(4, B * out)};
}

using dpt_test::Findings;

// Float sums of ≤ 12 products of values ≤ 0.6: rounding ~1e-7; a wrong block or a missing sum is ≥ 1/16.
constexpr double kTolerance = 1e-5;
}  // namespace

TEST_CASE("column_parallel_linear: rank t's block of the layer's output, its slices' gradients, x's gradient = one device's", "[ch12][hole:column_parallel_linear]") {
  const Layer L = make_layer(3, 5, 8);
  for (int T : {1, 2, 4}) {
    Findings found;
    dpt_test::run_ranks(T, [&](Context& ctx) {
      const int t = ctx.rank;
      const int64_t k = L.out / T, first = t * k;
      std::vector<float> w, b, c;
      for (int64_t o = first; o < first + k; ++o) {
        w.insert(w.end(), L.w.begin() + o * L.in, L.w.begin() + (o + 1) * L.in);
        b.push_back(L.b[std::size_t(o)]);
      }
      for (int64_t s = 0; s < L.B; ++s)
        for (int64_t o = first; o < first + k; ++o) c.push_back(L.c[std::size_t(s * L.out + o)]);
      Tensor x = Tensor::from_vector({L.B, L.in}, L.x, ctx.device), ws = Tensor::from_vector({k, L.in}, w, ctx.device),
             bs = Tensor::from_vector({k}, b, ctx.device);
      for (Tensor* p : {&x, &ws, &bs}) p->set_requires_grad(true);
      Tensor y = column_parallel_linear(ctx.comm, x, ws, bs);
      const std::string who = "T=" + std::to_string(T) + ", rank " + std::to_string(t);
      if (y.shape() != Shape{L.B, k}) return found.add(who + ": output " + shape_str(y.shape()) + ", expected this rank's block (" +
                                                       std::to_string(L.B) + ", " + std::to_string(k) + ")");
      double gy = 0, gw = 0, gb = 0, gx = 0;
      const std::vector<float> yv = y.to_vector();
      for (int64_t s = 0; s < L.B; ++s)
        for (int64_t o = 0; o < k; ++o) gy = std::max(gy, std::fabs(yv[std::size_t(s * k + o)] - L.y(s, first + o)));
      if (gy > kTolerance) return found.add(who + ": the output is not outputs [" + std::to_string(first) + ", " +
                                            std::to_string(first + k) + ") of x*W^T + b: max gap " + std::to_string(gy));
      backward(y, Tensor::from_vector({L.B, k}, c, ctx.device));  // the whole loss is the sum over ranks
      for (const auto& [p, name] : {std::pair<Tensor, const char*>{ws, "the weight slice"}, {bs, "the bias slice"}, {x, "x"}})
        if (!p.grad().defined()) return found.add(who + ": " + name + " got no gradient: the loss depends on it on every rank");
      const std::vector<float> dw = ws.grad().to_vector(), db = bs.grad().to_vector(), dx = x.grad().to_vector();
      for (int64_t o = 0; o < k; ++o) {
        gb = std::max(gb, std::fabs(db[std::size_t(o)] - L.db(first + o)));
        for (int64_t j = 0; j < L.in; ++j) gw = std::max(gw, std::fabs(dw[std::size_t(o * L.in + j)] - L.dw(first + o, j)));
      }
      for (int64_t s = 0; s < L.B; ++s)
        for (int64_t j = 0; j < L.in; ++j) gx = std::max(gx, std::fabs(dx[std::size_t(s * L.in + j)] - L.dx(s, j)));
      if (gw > kTolerance || gb > kTolerance)
        found.add(who + ": the slices' gradients are not their block of the full layer's: weight gap " + std::to_string(gw) +
                  ", bias gap " + std::to_string(gb));
      if (gx > kTolerance) {
        double largest = 0;  // the gap in one device's scale: what was measured, not a guess at the cause
        for (int64_t s = 0; s < L.B; ++s)
          for (int64_t j = 0; j < L.in; ++j) largest = std::max(largest, std::fabs(L.dx(s, j)));
        found.add(who + ": x's gradient is not the whole layer's d loss / dx (as one device computes it; the loss depends on x "
                        "through every rank's block of outputs): max gap " + std::to_string(gx) + ", " +
                  std::to_string(gx / largest) + " x the largest |entry| of one device's");
      }
    });
    found.require_none();
  }
}

TEST_CASE("row_parallel_linear: the full layer's output on every rank, and each slice's gradient = one device's", "[ch12][hole:row_parallel_linear]") {
  const Layer L = make_layer(3, 8, 5);
  for (int T : {1, 2, 4}) {
    Findings found;
    dpt_test::run_ranks(T, [&](Context& ctx) {
      const int t = ctx.rank;
      const int64_t k = L.in / T, first = t * k;
      std::vector<float> xs, w;
      for (int64_t s = 0; s < L.B; ++s)
        for (int64_t j = first; j < first + k; ++j) xs.push_back(L.x[std::size_t(s * L.in + j)]);
      for (int64_t o = 0; o < L.out; ++o)
        for (int64_t j = first; j < first + k; ++j) w.push_back(L.w[std::size_t(o * L.in + j)]);
      Tensor x = Tensor::from_vector({L.B, k}, xs, ctx.device), ws = Tensor::from_vector({L.out, k}, w, ctx.device),
             b = Tensor::from_vector({L.out}, L.b, ctx.device);
      for (Tensor* p : {&x, &ws, &b}) p->set_requires_grad(true);
      Tensor y = row_parallel_linear(ctx.comm, x, ws, b);
      const std::string who = "T=" + std::to_string(T) + ", rank " + std::to_string(t);
      if (y.shape() != Shape{L.B, L.out}) return found.add(who + ": output " + shape_str(y.shape()) + ", expected the full (" +
                                                           std::to_string(L.B) + ", " + std::to_string(L.out) + ")");
      const std::vector<float> yv = y.to_vector();
      double gy = 0, bias = 0;  // the gap, and in the bias's scale: what was measured, not a guess at the cause
      for (int64_t o = 0; o < L.out; ++o) bias = std::max(bias, double(std::fabs(L.b[std::size_t(o)])));
      for (int64_t s = 0; s < L.B; ++s)
        for (int64_t o = 0; o < L.out; ++o) gy = std::max(gy, std::fabs(yv[std::size_t(s * L.out + o)] - L.y(s, o)));
      if (gy > kTolerance)
        return found.add(who + ": the output is not x*W^T + b of the unsplit layer, on every rank: max gap " +
                         std::to_string(gy) + ", " + std::to_string(gy / bias) + " x the bias's largest |entry|");
      backward(y, Tensor::from_vector({L.B, L.out}, L.c, ctx.device));  // replicated above: the same C everywhere
      for (const auto& [p, name] : {std::pair<Tensor, const char*>{ws, "the weight slice"}, {b, "the bias (held whole on every rank)"},
                                    {x, "x's block"}})
        if (!p.grad().defined()) return found.add(who + ": " + name + " got no gradient: the loss depends on it on every rank");
      const std::vector<float> dw = ws.grad().to_vector(), db = b.grad().to_vector(), dx = x.grad().to_vector();
      double gw = 0, gb = 0, gx = 0, dw_max = 0, dx_max = 0;  // _max: one device's largest |entry|, the gaps' scale
      for (int64_t o = 0; o < L.out; ++o) {
        gb = std::max(gb, std::fabs(db[std::size_t(o)] - L.db(o)));
        for (int64_t j = 0; j < k; ++j) {
          gw = std::max(gw, std::fabs(dw[std::size_t(o * k + j)] - L.dw(o, first + j)));
          dw_max = std::max(dw_max, std::fabs(L.dw(o, first + j)));
        }
      }
      for (int64_t s = 0; s < L.B; ++s)
        for (int64_t j = 0; j < k; ++j) {
          gx = std::max(gx, std::fabs(dx[std::size_t(s * k + j)] - L.dx(s, first + j)));
          dx_max = std::max(dx_max, std::fabs(L.dx(s, first + j)));
        }
      const auto scale = [](double gap, double largest) {
        return "max gap " + std::to_string(gap) + ", " + std::to_string(gap / largest) + " x the largest |entry| of one device's";
      };
      if (gb > kTolerance) found.add(who + ": the bias gradient is not the full layer's (the same on every rank): max gap " + std::to_string(gb));
      if (gw > kTolerance) found.add(who + ": the weight slice's gradient is not its block of the full layer's: " + scale(gw, dw_max));
      if (gx > kTolerance) found.add(who + ": x's block of the input gradient is not the full layer's: " + scale(gx, dx_max));
    });
    found.require_none();
  }
}

TEST_CASE("a column-parallel then a row-parallel layer, forward and backward: at most two all-reduces per rank", "[ch12][hole:row_parallel_linear][needs:column_parallel_linear]") {
  const Layer first = make_layer(3, 6, 8), second = make_layer(3, 8, 5);  // in 6 -> hidden 8 (split) -> out 5
  for (int T : {2, 4}) {
    Findings found;
    dpt_test::run_ranks(T, [&](Context& ctx) {
      const int t = ctx.rank;
      const int64_t k = first.out / T;  // rank t's block of the hidden features: rows of W1, columns of W2
      std::vector<float> w1(first.w.begin() + t * k * first.in, first.w.begin() + (t + 1) * k * first.in), w2;
      std::vector<float> b1(first.b.begin() + t * k, first.b.begin() + (t + 1) * k);
      for (int64_t o = 0; o < second.out; ++o)
        for (int64_t j = t * k; j < (t + 1) * k; ++j) w2.push_back(second.w[std::size_t(o * second.in + j)]);
      Tensor x = Tensor::from_vector({first.B, first.in}, first.x, ctx.device);
      Tensor w1s = Tensor::from_vector({k, first.in}, w1, ctx.device), b1s = Tensor::from_vector({k}, b1, ctx.device);
      Tensor w2s = Tensor::from_vector({second.out, k}, w2, ctx.device), b2 = Tensor::from_vector({second.out}, second.b, ctx.device);
      for (Tensor* p : {&x, &w1s, &b1s, &w2s, &b2}) p->set_requires_grad(true);
      TrafficLog& log = ctx.comm.traffic();
      const int64_t before = log.collective_calls("all_reduce", log.rank());
      Tensor y = row_parallel_linear(ctx.comm, relu(column_parallel_linear(ctx.comm, x, w1s, b1s)), w2s, b2);
      backward(y, Tensor::from_vector({second.B, second.out}, second.c, ctx.device));
      const int64_t calls = log.collective_calls("all_reduce", log.rank()) - before;
      if (calls > 2)
        found.add("T=" + std::to_string(T) + ", rank " + std::to_string(t) + ": the pair's forward and backward made " +
                  std::to_string(calls) + " all-reduces on this rank; the page's goal is at most two per pair and step");
    });
    found.require_none();
  }
}

TEST_CASE("a split MLP of two pairs: loss and every gradient = one device's on the same batch, T = 1, 2, 4", "[ch12]") {
  Rng rng(5);
  MLP full({12, 8, 6, 8, 4}, Device::host(), rng);
  Dataset data = make_synthetic(64, 12, 4, 3);
  Batch batch = gather_batch(data, {0, 5, 9, 13, 21, 34, 40, 55}, Device::host());
  // One device: the core's forward and backward on the whole model.
  Tensor one_loss = softmax_cross_entropy(full.forward(batch.x), batch.y);
  one_loss.backward();
  std::vector<float> one;
  double largest = 0;
  for (const Tensor& p : full.parameters())
    for (float g : p.grad().to_vector()) one.push_back(g), largest = std::max(largest, double(std::fabs(g)));
  for (int T : {1, 2, 4}) {
    Findings found;
    dpt_test::run_ranks(T, [&](Context& ctx) {
      TensorParallelMLP model(ctx.comm, full, ctx.device);
      Tensor loss = softmax_cross_entropy(model.forward(batch.x.to(ctx.device)), batch.y);
      loss.backward();
      const std::vector<float> tp = model.gather(true);
      const std::string who = "T=" + std::to_string(T) + ", rank " + std::to_string(ctx.rank);
      // Relative to the largest entry: sums in another order ~1e-7; a missing all-reduce is off by a share of the gradient.
      if (std::fabs(loss.item() - one_loss.item()) > 1e-5 * std::fabs(one_loss.item()))
        found.add(who + ": the loss " + std::to_string(loss.item()) + " is not one device's " + std::to_string(one_loss.item()));
      double worst = 0;
      std::size_t at = 0;
      for (std::size_t i = 0; i < tp.size(); ++i)
        if (std::fabs(tp[i] - one[i]) > worst) worst = std::fabs(tp[i] - one[i]), at = i;
      if (!(worst <= 1e-5 * largest))
        found.add(who + ": the gathered gradient is not one device's: max gap " + std::to_string(worst / largest) +
                  " of the largest entry, at flat index " + std::to_string(at) + " (parameters in fc0.weight, fc0.bias, ... order)");
    });
    found.require_none();
  }
}
