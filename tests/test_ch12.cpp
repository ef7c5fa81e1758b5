// test_ch12.cpp — chapter 12's operators and shards against sums and index
// one device's layer written out here: after f every rank holds x, and x's
// gradient is the whole model's; after g every rank holds the layer output,
// and each partial's gradient is the one loss's; a rank's slice, as a layer,
// gives the full layer's numbers for the features it owns, and the gathered
// tensor is the layer every rank's slice is part of. No test here indexes a
// slice's storage: what a slice holds is judged by the layer it makes.
//
// Here: copy_to_tp_region, reduce_from_tp_region, shard_weight,
// gather_weight. The layers and a whole model against one device in
// test_ch12_layers.cpp, the program in test_ch12_chapter.cpp.
#include "support/catch.h"
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "ch12.h"
#include "dpt/autograd.h"
#include "dpt/ops.h"
#include "support/findings.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch12;

namespace {
// Deterministic values for (rank, index): no two ranks alike, none zero.
float value(int rank, int64_t i) { return float((i * 7 + rank * 13) % 17 + 1) / 8.0f * ((i + rank) % 3 == 0 ? -1 : 1); }

std::vector<float> values(int rank, int64_t n) {
  std::vector<float> v(std::size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) v[std::size_t(i)] = value(rank, i);
  return v;
}

using dpt_test::Findings;

// max |a_i − b_i|; NaN wins.
double gap(const std::vector<float>& a, const std::vector<double>& b) {
  double g = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - b[i]);
    if (std::isnan(d)) return d;
    g = std::max(g, d);
  }
  return g;
}

// "max gap G, R x the largest |entry| of NAME": what was measured, in the
// reference's own scale; no guess at the mistake that made it.
std::string gap_of(double g, const std::vector<double>& reference, const std::string& name) {
  double largest = 0;
  for (double r : reference) largest = std::max(largest, std::fabs(r));
  char text[160];
  std::snprintf(text, sizeof text, "max gap %.4g, %.3g x the largest |entry| of %s", g, largest > 0 ? g / largest : 0.0,
                name.c_str());
  return text;
}
constexpr int64_t kB = 3, kD = 5;

// A probe input for a layer of `in` features: the `in` unit vectors, so the layer's
// output shows every weight entry, then two rows of values (every feature at once).
std::vector<float> probe_input(int64_t B, int64_t in) {
  std::vector<float> x(std::size_t(B * in), 0);
  for (int64_t n = 0; n < B; ++n)
    for (int64_t j = 0; j < in; ++j) x[std::size_t(n * in + j)] = n < in ? (n == j ? 1.0f : 0.0f) : value(90 + int(n), j);
  return x;
}

// One device's layer as nn.h defines it, weight (out, in): y[n][o] = Σ_j x[n][j] · w[o][j] (+ bias[o]),
// over input features from ≤ j < to only (the others taken as 0). The values are multiples of 1/8:
// every sum here and in linear() is exact, so a right slice matches to the bit.
std::vector<double> layer(const std::vector<float>& x, int64_t B, const std::vector<float>& w, int64_t out, int64_t in,
                          int64_t from, int64_t to, const std::vector<float>* bias = nullptr) {
  std::vector<double> y(std::size_t(B * out), 0);
  for (int64_t n = 0; n < B; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double acc = bias ? (*bias)[std::size_t(o)] : 0.0;
      for (int64_t j = from; j < to; ++j) acc += double(x[std::size_t(n * in + j)]) * w[std::size_t(o * in + j)];
      y[std::size_t(n * out + o)] = acc;
    }
  return y;
}

// Columns [first, first + count) of a (rows, width) matrix.
std::vector<double> columns(const std::vector<double>& m, int64_t rows, int64_t width, int64_t first, int64_t count) {
  std::vector<double> c;
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t j = first; j < first + count; ++j) c.push_back(m[std::size_t(n * width + j)]);
  return c;
}

Tensor tensor(const std::vector<float>& v, const Shape& shape, Device& device) { return Tensor::from_vector(shape, v, device); }
}  // namespace

// ----------------------------------------------------------------------------
// f: every rank holds x; x's gradient is the whole model's

TEST_CASE("copy_to_tp_region: every rank holds x, and x's gradient = the whole model's d loss / dx", "[ch12][hole:copy_to_tp_region]") {
  for (int T : {1, 2, 3, 4}) {
    Findings found;
    // The whole model's loss is Σ_r sum(y ∘ C_r): rank r's branch alone sees sum(y ∘ C_r).
    std::vector<double> whole(std::size_t(kB * kD), 0);
    for (int r = 0; r < T; ++r)
      for (int64_t i = 0; i < kB * kD; ++i) whole[std::size_t(i)] += value(100 + r, i);
    dpt_test::run_ranks(T, [&](Context& ctx) {
      Tensor x = Tensor::from_vector({kB, kD}, values(0, kB * kD), ctx.device);  // replicated
      x.set_requires_grad(true);
      Tensor y = copy_to_tp_region(ctx.comm, x);
      const std::vector<float> seen = y.to_vector(), want = x.to_vector();
      if (seen != want) {
        found.add("T=" + std::to_string(T) + ", rank " + std::to_string(ctx.rank) +
                  ": forward must hold x's values (every slice reads the same x); element 0 is " + std::to_string(seen[0]) +
                  ", x's is " + std::to_string(want[0]));
        return;
      }
      Tensor branch = Tensor::from_vector({kB, kD}, values(100 + ctx.rank, kB * kD), ctx.device);
      backward(y, branch);
      if (!x.grad().defined()) {
        found.add("T=" + std::to_string(T) + ": x got no gradient: the result must be part of the graph (dpt::record)");
        return;
      }
      const std::vector<float> dx = x.grad().to_vector();
      const double g = gap(dx, whole);
      if (g > 1e-5)
        found.add("T=" + std::to_string(T) + ", rank " + std::to_string(ctx.rank) +
                  ": x's gradient is not the whole model's d loss / dx (what one device holding every slice computes; "
                  "the loss depends on x through every rank's slice): " + gap_of(g, whole, "one device's"));
    });
    found.require_none();
  }
}

// ----------------------------------------------------------------------------
// g: every rank holds the layer output; each partial's gradient is the one loss's

TEST_CASE("reduce_from_tp_region: the layer output on every rank, and each partial's gradient = one device's", "[ch12][hole:reduce_from_tp_region]") {
  for (int T : {1, 2, 3, 4}) {
    Findings found;
    std::vector<double> total(std::size_t(kB * kD), 0), upstream(std::size_t(kB * kD));
    for (int r = 0; r < T; ++r)
      for (int64_t i = 0; i < kB * kD; ++i) total[std::size_t(i)] += value(r, i);
    for (int64_t i = 0; i < kB * kD; ++i) upstream[std::size_t(i)] = value(50, i);
    dpt_test::run_ranks(T, [&](Context& ctx) {
      const std::string who = "T=" + std::to_string(T) + ", rank " + std::to_string(ctx.rank);
      Tensor partial = Tensor::from_vector({kB, kD}, values(ctx.rank, kB * kD), ctx.device);
      partial.set_requires_grad(true);
      Tensor y = reduce_from_tp_region(ctx.comm, partial);
      const double g = gap(y.to_vector(), total);
      if (g > 1e-5) {
        const std::vector<float> own = values(ctx.rank, kB * kD);
        found.add(who + ": after forward this rank must hold the layer output the T partials define: max gap " +
                  std::to_string(g) + (gap(y.to_vector(), std::vector<double>(own.begin(), own.end())) == 0
                                           ? " (it holds its own partial only)" : ""));
        return;
      }
      // Replicated layers above: the same upstream gradient on every rank.
      Tensor c = Tensor::from_vector({kB, kD}, values(50, kB * kD), ctx.device);
      backward(y, c);
      if (!partial.grad().defined()) {
        found.add(who + ": the partial got no gradient: the result must be part of the graph (dpt::record)");
        return;
      }
      const std::vector<float> dp = partial.grad().to_vector();
      const double gg = gap(dp, upstream);
      if (gg > 1e-6)
        found.add(who + ": the partial's gradient is not d loss / d partial_t of the model's one loss (what one device computes): "
                        + gap_of(gg, upstream, "one device's"));
    });
    found.require_none();
  }
}

// ----------------------------------------------------------------------------
// which slice a rank owns

TEST_CASE("shard_weight: rank t's slice, as a layer, gives the full layer's numbers for the features it owns", "[ch12][hole:shard_weight]") {
  const int64_t out = 6, in = 8, B = in + 2;
  Tensor full = Tensor::from_vector({out, in}, values(7, out * in), Device::host());
  Tensor bias = Tensor::from_vector({out}, values(8, out), Device::host());
  const std::vector<float> x = probe_input(B, in);
  Device& device = Device::cpu(1);
  for (int T : {1, 2}) {
    for (int t = 0; t < T; ++t) {
      INFO("T=" << T << ", rank " << t);
      const std::string who = "T=" + std::to_string(T) + ", rank " + std::to_string(t);
      const int64_t k_out = out / T, k_in = in / T;
      Tensor rows = shard_weight(full, Split::Output, t, T, device);
      REQUIRE(rows.shape() == Shape{k_out, in});
      CHECK(&rows.device() == &device);
      Tensor b = shard_weight(bias, Split::Output, t, T, device);
      REQUIRE(b.shape() == Shape{k_out});
      // Split::Output: on the same input, the slice's layer is the full layer's output features [t·k, (t+1)·k).
      const std::vector<float> w = full.to_vector(), bias_values = bias.to_vector();
      const std::vector<double> y = layer(x, B, w, out, in, 0, in), yb = layer(x, B, w, out, in, 0, in, &bias_values);
      const std::vector<double> want = columns(y, B, out, t * k_out, k_out), want_b = columns(yb, B, out, t * k_out, k_out);
      const double g = gap(linear(tensor(x, {B, in}, device), rows, Tensor()).to_vector(), want);
      if (g > 0)
        FAIL(who << ", Split::Output: the slice, as a layer, is not output features [" << t * k_out << ", " << (t + 1) * k_out
                 << ") of the full layer on the same input: " << gap_of(g, want, "the full layer's"));
      const double gb = gap(linear(tensor(x, {B, in}, device), rows, b).to_vector(), want_b);
      if (gb > 0)
        FAIL(who << ", Split::Output: with its bias slice added, the slice's layer is not output features [" << t * k_out
                 << ", " << (t + 1) * k_out << ") of the full layer with its bias: " << gap_of(gb, want_b, "the full layer's"));
      // Split::Input: fed input features [t·k, (t+1)·k), the slice's layer gives the full layer's
      // share of those features: the full layer on an input whose other features are 0.
      Tensor cols = shard_weight(full, Split::Input, t, T, device);
      REQUIRE(cols.shape() == Shape{out, k_in});
      const std::vector<double> share = layer(x, B, w, out, in, t * k_in, (t + 1) * k_in);
      const std::vector<double> mine = columns(std::vector<double>(x.begin(), x.end()), B, in, t * k_in, k_in);
      const double gi = gap(linear(tensor(std::vector<float>(mine.begin(), mine.end()), {B, k_in}, device), cols, Tensor()).to_vector(), share);
      if (gi > 0)
        FAIL(who << ", Split::Input: fed input features [" << t * k_in << ", " << (t + 1) * k_in << "), the slice's layer "
                 << "does not give the full layer's output on that input with every other feature 0: "
                 << gap_of(gi, share, "the full layer's"));
    }
  }
  // T = 4 divides the inputs (8) but not the outputs (6): a sentence, not a slice of the wrong size.
  CHECK(shard_weight(full, Split::Input, 3, 4, device).shape() == Shape{out, 2});
  CHECK_THROWS_AS(shard_weight(full, Split::Output, 0, 4, device), Error);
  CHECK_THROWS_AS(shard_weight(full, Split::Input, 0, 3, device), Error);
}

TEST_CASE("gather_weight: the full tensor whose layer every rank's slice is part of, on the host, on every rank", "[ch12][hole:gather_weight]") {
  const int64_t out = 4, in = 6, B = in + 2;
  const std::vector<float> x = probe_input(B, in);
  for (int T : {1, 2}) {
    Findings found;
    const int64_t k_out = out / T, k_in = in / T;
    // Rank r's slices: any values (not cut from a full tensor here), shaped as shard_weight shapes them.
    auto rows_of = [&](int r) { return values(20 + r, k_out * in); };
    auto cols_of = [&](int r) { return values(40 + r, out * k_in); };
    auto bias_of = [&](int r) { return values(60 + r, k_out); };
    // What the full layers must compute on x: block r of the output features is rank r's
    // slice's layer (Output); the output is the sum of every rank's layer on its block of input
    // features (Input). Each slice is read in its own (rows, cols) shape.
    std::vector<double> by_rows(std::size_t(B * out), 0), by_cols(std::size_t(B * out), 0), bias(std::size_t(out), 0);
    for (int r = 0; r < T; ++r) {
      const std::vector<float> w = rows_of(r), c = cols_of(r), b = bias_of(r);
      for (int64_t n = 0; n < B; ++n)
        for (int64_t o = 0; o < out; ++o)
          for (int64_t j = 0; j < k_in; ++j) by_cols[std::size_t(n * out + o)] += double(x[std::size_t(n * in + r * k_in + j)]) * c[std::size_t(o * k_in + j)];
      for (int64_t n = 0; n < B; ++n)
        for (int64_t i = 0; i < k_out; ++i)
          for (int64_t j = 0; j < in; ++j) by_rows[std::size_t(n * out + r * k_out + i)] += double(x[std::size_t(n * in + j)]) * w[std::size_t(i * in + j)];
      for (int64_t i = 0; i < k_out; ++i) bias[std::size_t(r * k_out + i)] = b[std::size_t(i)];
    }
    dpt_test::run_ranks(T, [&](Context& ctx) {
      const int t = ctx.rank;
      struct Case { const char* what; Tensor shard; Split split; Shape shape; const std::vector<double>& want; };
      for (const Case& c : {Case{"a weight split by outputs", tensor(rows_of(t), {k_out, in}, ctx.device), Split::Output, {out, in}, by_rows},
                            Case{"a weight split by inputs", tensor(cols_of(t), {out, k_in}, ctx.device), Split::Input, {out, in}, by_cols},
                            Case{"a bias split by outputs", tensor(bias_of(t), {k_out}, ctx.device), Split::Output, {out}, bias}}) {
        Tensor got = gather_weight(ctx.comm, c.shard, c.split);
        const std::string who = "T=" + std::to_string(T) + ", rank " + std::to_string(t) + ", " + c.what;
        if (got.shape() != c.shape) { found.add(who + ": shape " + shape_str(got.shape()) + ", expected " + shape_str(c.shape)); continue; }
        if (!got.device().is_host_memory()) { found.add(who + ": the full tensor must be on the host"); continue; }
        // A bias is its own output; a weight is judged by the layer it makes on x.
        const std::vector<float> full = got.to_vector();
        const std::vector<double> made = c.shape.size() == 1 ? std::vector<double>(full.begin(), full.end())
                                                             : layer(x, B, full, out, in, 0, in);
        const double g = gap(std::vector<float>(made.begin(), made.end()), c.want);
        if (g > 0)
          found.add(who + (c.shape.size() == 1 ? ": the full bias does not hold rank r's slice as output features [r*k, (r+1)*k): "
                                                : c.split == Split::Output ? ": the full layer's output features [r*k, (r+1)*k) are not rank r's slice's layer: "
                                                                           : ": the full layer is not the sum of every rank's slice's layer on its block of input features: ") +
                    gap_of(g, c.want, "the slices' layers"));
      }
    });
    found.require_none();
  }
}
