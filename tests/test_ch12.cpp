// test_ch12.cpp — chapter 12's operators and shards against sums and index
// formulas written out here: after f every rank holds x, and x's gradient is
// the whole model's; after g every rank holds the layer output, and each
// partial's gradient is the one loss's; a rank's slice is the block of
// features the contract names, and the gather puts every block in its place.
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

TEST_CASE("shard_weight: rank t owns the block of output or input features the contract names, each entry once", "[ch12][hole:shard_weight]") {
  const int64_t out = 6, in = 8;
  Tensor full = Tensor::from_vector({out, in}, values(7, out * in), Device::host());
  Tensor bias = Tensor::from_vector({out}, values(8, out), Device::host());
  Device& device = Device::cpu(1);
  for (int T : {1, 2}) {
    for (int t = 0; t < T; ++t) {
      INFO("T=" << T << ", rank " << t);
      Tensor rows = shard_weight(full, Split::Output, t, T, device);
      REQUIRE(rows.shape() == Shape{out / T, in});
      CHECK(&rows.device() == &device);
      // Each check is a bool, so a failure prints the property, not the index formula.
      for (int64_t i = 0; i < out / T; ++i)
        for (int64_t j = 0; j < in; ++j)
          if (rows.data()[i * in + j] != full.data()[(t * out / T + i) * in + j])
            FAIL("Split::Output slice entry (" << i << ", " << j << ") is not the full weight's entry for output feature "
                                               << t * out / T + i << ", input " << j);
      Tensor cols = shard_weight(full, Split::Input, t, T, device);
      REQUIRE(cols.shape() == Shape{out, in / T});
      for (int64_t i = 0; i < out; ++i)
        for (int64_t j = 0; j < in / T; ++j)
          if (cols.data()[i * (in / T) + j] != full.data()[i * in + t * in / T + j])
            FAIL("Split::Input slice entry (" << i << ", " << j << ") is not the full weight's entry for output feature " << i
                                              << ", input " << t * in / T + j);
      Tensor b = shard_weight(bias, Split::Output, t, T, device);
      REQUIRE(b.shape() == Shape{out / T});
      for (int64_t i = 0; i < out / T; ++i)
        if (b.data()[i] != bias.data()[t * out / T + i])
          FAIL("bias slice entry " << i << " is not the full bias's entry for output feature " << t * out / T + i);
    }
  }
  // T = 4 divides the inputs (8) but not the outputs (6): a sentence, not a slice of the wrong size.
  CHECK(shard_weight(full, Split::Input, 3, 4, device).shape() == Shape{out, 2});
  CHECK_THROWS_AS(shard_weight(full, Split::Output, 0, 4, device), Error);
  CHECK_THROWS_AS(shard_weight(full, Split::Input, 0, 3, device), Error);
}

TEST_CASE("gather_weight: the slices of every rank put back in place, on the host, on every rank", "[ch12][hole:gather_weight]") {
  const int64_t out = 4, in = 6;
  const std::vector<float> full = values(9, out * in), bias = values(10, out);
  for (int T : {1, 2}) {
    Findings found;
    dpt_test::run_ranks(T, [&](Context& ctx) {
      const int t = ctx.rank;
      // The slices by the index formulas, written here (not by shard_weight).
      std::vector<float> rows, cols, b;
      for (int64_t i = t * out / T; i < (t + 1) * out / T; ++i)
        for (int64_t j = 0; j < in; ++j) rows.push_back(full[std::size_t(i * in + j)]);
      for (int64_t i = 0; i < out; ++i)
        for (int64_t j = t * in / T; j < (t + 1) * in / T; ++j) cols.push_back(full[std::size_t(i * in + j)]);
      for (int64_t i = t * out / T; i < (t + 1) * out / T; ++i) b.push_back(bias[std::size_t(i)]);
      struct Case { const char* what; Tensor shard; Split split; Shape shape; const std::vector<float>& want; };
      for (const Case& c : {Case{"a weight split by outputs", Tensor::from_vector({out / T, in}, rows, ctx.device), Split::Output, {out, in}, full},
                            Case{"a weight split by inputs", Tensor::from_vector({out, in / T}, cols, ctx.device), Split::Input, {out, in}, full},
                            Case{"a bias split by outputs", Tensor::from_vector({out / T}, b, ctx.device), Split::Output, {out}, bias}}) {
        Tensor got = gather_weight(ctx.comm, c.shard, c.split);
        const std::string who = "T=" + std::to_string(T) + ", rank " + std::to_string(t) + ", " + c.what;
        if (got.shape() != c.shape) found.add(who + ": shape " + shape_str(got.shape()) + ", expected " + shape_str(c.shape));
        else if (!got.device().is_host_memory()) found.add(who + ": the full tensor must be on the host");
        else if (got.to_vector() != c.want) found.add(who + ": an entry is not in its place in the full tensor");
      }
    });
    found.require_none();
  }
}
