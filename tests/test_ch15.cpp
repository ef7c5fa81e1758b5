// test_ch15.cpp — chapter 15's hole: attention split by heads over 2 and 4
// rank threads. The slices are judged against the full block indexed here
// (rank t's heads own features [t·C/tp, (t+1)·C/tp) of q, k, v and y); the
// split forward and its gradients against one device's unsplit attention
// (chapter 14's gpt_attention, the function the contract names), the
// exchanges against the threads traffic log.
#include "support/catch.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ch15.h"
#include "dpt/autograd.h"
#include "dpt/ops.h"
#include "gpt.h"
#include "support/findings.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch15;

namespace {
// 4 heads of size 3 (C = 12: head size ≠ tp, so a split by features of the
// wrong width cannot pass), 2 sequences of 5 tokens.
const GptShape kShape{/*vocab*/ 7, /*context*/ 5, /*layers*/ 1, /*heads*/ 4, /*width*/ 12};
constexpr int64_t kBatch = 2, kTime = 5;

// A block with no zero and no repeated entry (nanoGPT's init leaves biases at 0).
GptBlock full_block() {
  Rng rng(7);
  Gpt model(kShape, Device::host(), rng);
  GptBlock b = model.blocks[0];
  for (Tensor* p : {&b.attn_bias, &b.attn_proj_bias}) {
    std::vector<float> v(std::size_t(p->numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * float(i + 1);
    *p = Tensor::from_vector(p->shape(), v, Device::host()).set_requires_grad(true);
  }
  return b;
}

std::vector<float> normals(std::size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

// Entry (r, j) of rank t's share as this test indexes the full tensor.
float qkv_entry(const Tensor& full, int64_t r, int64_t j, int t, int tp, int64_t cols) {
  const int64_t C = kShape.width, k = C / tp;
  return full.data()[(r / k * C + t * k + r % k) * cols + j];  // block r/k (q, k or v), rank t's k rows of it
}

double max_gap(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double gap = 0;
  for (std::size_t i = 0; i < got.size(); ++i) gap = std::max(gap, double(std::fabs(got[i] - want[i])));
  return gap;
}
// max |got − want| / max |want|: the gap in one device's own scale.
double relative_gap(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 0;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  return max_gap(got, want) / scale;
}

// The split sums the same ≤ 3C products in another order (the ranks'
// partial sums added by the all-reduce): float rounding, ~1e-7 of the
// largest entry. A rank's share lost or counted twice (a missing f, the
// bias before g) moves entries by a tenth of the largest or more.
constexpr double kTolerance = 1e-5;
}  // namespace

TEST_CASE("attention_slices: rank t owns its heads' q, k, v rows of c_attn and the c_proj columns their outputs meet, each entry once",
          "[ch15][hole:attention_slices]") {
  const GptBlock b = full_block();
  const int64_t C = kShape.width;
  for (int tp : {1, 2, 4}) {
    const int64_t k = C / tp;
    std::vector<int> owners(std::size_t(3 * C * C + C * C), 0);  // how many ranks own each weight entry
    for (int t = 0; t < tp; ++t) {
      INFO("tp " << tp << ", rank " << t);
      const AttentionSlices s = attention_slices(b, kShape, t, tp, Device::host());
      REQUIRE(s.qkv_weight.shape() == Shape{3 * k, C});
      REQUIRE(s.qkv_bias.shape() == Shape{3 * k});
      REQUIRE(s.proj_weight.shape() == Shape{C, k});  // applied by linear to this rank's k features of y
      REQUIRE(s.proj_bias.shape() == Shape{C});
      std::vector<float> want_w, want_b, want_p;
      for (int64_t r = 0; r < 3 * k; ++r) {
        for (int64_t j = 0; j < C; ++j) {
          want_w.push_back(qkv_entry(b.attn_weight, r, j, t, tp, C));
          ++owners[std::size_t((r / k * C + t * k + r % k) * C + j)];
        }
        want_b.push_back(qkv_entry(b.attn_bias, r, 0, t, tp, 1));
      }
      for (int64_t i = 0; i < C; ++i)
        for (int64_t j = 0; j < k; ++j) {
          want_p.push_back(b.attn_proj_weight.data()[i * C + t * k + j]);
          ++owners[std::size_t(3 * C * C + i * C + t * k + j)];
        }
      CHECK(max_gap(s.qkv_weight.to_vector(), want_w) == 0);  // q rows of heads t·H/tp…, then k's, then v's
      CHECK(max_gap(s.qkv_bias.to_vector(), want_b) == 0);
      CHECK(max_gap(s.proj_weight.to_vector(), want_p) == 0);
      CHECK(max_gap(s.proj_bias.to_vector(), b.attn_proj_bias.to_vector()) == 0);
      for (const Tensor* p : {&s.qkv_weight, &s.qkv_bias, &s.proj_weight, &s.proj_bias}) CHECK(p->requires_grad());
    }
    CHECK(std::all_of(owners.begin(), owners.end(), [](int n) { return n == 1; }));
  }
}

TEST_CASE("tp_attention: the output, x's gradient and every share's gradient = one device's attention, on every rank",
          "[ch15][hole:tp_attention]") {
  const GptBlock b = full_block();
  const int64_t C = kShape.width, rows = kBatch * kTime;
  const std::vector<float> xv = normals(std::size_t(rows * C), 11), rv = normals(std::size_t(rows * C), 12);
  // One device, unsplit: y and the gradients of loss = Σ r ⊙ y.
  GptBlock one = b;
  for (Tensor* p : {&one.attn_weight, &one.attn_bias, &one.attn_proj_weight, &one.attn_proj_bias})
    *p = p->clone().set_requires_grad(true);
  Tensor x1 = Tensor::from_vector({rows, C}, xv, Device::host()).set_requires_grad(true);
  Tensor y1 = gpt_attention(x1, one, kShape, kBatch);
  const std::vector<float> want_y = y1.to_vector();
  backward(y1, Tensor::from_vector({rows, C}, rv, Device::host()));
  for (int tp : {2, 4}) {
    dpt_test::Findings found;
    dpt_test::run_ranks(tp, [&](Context& ctx) {
      const int t = ctx.rank;
      const int64_t k = C / tp;
      const std::string who = "tp " + std::to_string(tp) + ", rank " + std::to_string(t) + ": ";
      // Rank t's shares cut here (not by attention_slices: this test is about the forward).
      std::vector<float> w, bias, p;
      for (int64_t r = 0; r < 3 * k; ++r) {
        for (int64_t j = 0; j < C; ++j) w.push_back(qkv_entry(b.attn_weight, r, j, t, tp, C));
        bias.push_back(qkv_entry(b.attn_bias, r, 0, t, tp, 1));
      }
      for (int64_t i = 0; i < C; ++i)
        for (int64_t j = 0; j < k; ++j) p.push_back(b.attn_proj_weight.data()[i * C + t * k + j]);
      AttentionSlices mine{Tensor::from_vector({3 * k, C}, w, ctx.device), Tensor::from_vector({3 * k}, bias, ctx.device),
                           Tensor::from_vector({C, k}, p, ctx.device), b.attn_proj_bias.to(ctx.device)};
      for (Tensor* s : {&mine.qkv_weight, &mine.qkv_bias, &mine.proj_weight, &mine.proj_bias}) s->set_requires_grad(true);
      Tensor x = Tensor::from_vector({rows, C}, xv, ctx.device).set_requires_grad(true);
      Tensor y = tp_attention(ctx.comm, x, mine, kShape, kBatch);
      if (y.shape() != Shape{rows, C}) return found.add(who + "the output is " + shape_str(y.shape()) + ", not (B·T, C)");
      const double gy = relative_gap(y.to_vector(), want_y);
      if (gy > kTolerance) found.add(who + "the output is not one device's attention: max gap / max |entry| " + std::to_string(gy));
      backward(y, Tensor::from_vector({rows, C}, rv, ctx.device));  // every rank: the same, whole loss
      for (const Tensor* s : {&x, &mine.qkv_weight, &mine.qkv_bias, &mine.proj_weight, &mine.proj_bias})
        if (!s->grad().defined()) return found.add(who + "a tensor the loss depends on got no gradient");
      std::vector<float> dw, db, dp;
      const Tensor &gw = one.attn_weight.grad(), &gb = one.attn_bias.grad(), &gp = one.attn_proj_weight.grad();
      for (int64_t r = 0; r < 3 * k; ++r) {
        for (int64_t j = 0; j < C; ++j) dw.push_back(qkv_entry(gw, r, j, t, tp, C));
        db.push_back(qkv_entry(gb, r, 0, t, tp, 1));
      }
      for (int64_t i = 0; i < C; ++i)
        for (int64_t j = 0; j < k; ++j) dp.push_back(gp.data()[i * C + t * k + j]);
      const struct { const char* what; double gap; } gaps[] = {
          {"x's gradient (the whole model's, on every rank)", relative_gap(x.grad().to_vector(), x1.grad().to_vector())},
          {"c_attn's share's weight gradient", relative_gap(mine.qkv_weight.grad().to_vector(), dw)},
          {"c_attn's share's bias gradient", relative_gap(mine.qkv_bias.grad().to_vector(), db)},
          {"c_proj's share's weight gradient", relative_gap(mine.proj_weight.grad().to_vector(), dp)},
          {"c_proj's bias gradient (whole, on every rank)",
           relative_gap(mine.proj_bias.grad().to_vector(), one.attn_proj_bias.grad().to_vector())}};
      for (const auto& g : gaps)
        if (g.gap > kTolerance) found.add(who + g.what + " is not one device's: max gap / max |entry| " + std::to_string(g.gap));
    });
    found.require_none();
  }
}

TEST_CASE("tp_attention: the group exchanges one all-reduce of B·T·C floats in forward and one in backward",
          "[ch15][hole:tp_attention]") {
  const GptBlock b = full_block();
  const int64_t rows = kBatch * kTime, C = kShape.width;
  const int tp = 2;
  dpt_test::Findings found;
  dpt_test::run_ranks(tp, [&](Context& ctx) {
    AttentionSlices mine = attention_slices(b, kShape, ctx.rank, tp, ctx.device);
    Tensor x = Tensor::from_vector({rows, C}, normals(std::size_t(rows * C), 11), ctx.device).set_requires_grad(true);
    TrafficLog& log = ctx.comm.traffic();
    const int64_t calls0 = log.collective_calls("all_reduce", ctx.rank), bytes0 = log.collective_bytes("all_reduce", ctx.rank);
    Tensor y = tp_attention(ctx.comm, x, mine, kShape, kBatch);
    const int64_t calls1 = log.collective_calls("all_reduce", ctx.rank), bytes1 = log.collective_bytes("all_reduce", ctx.rank);
    backward(y, Tensor::from_vector({rows, C}, normals(std::size_t(rows * C), 12), ctx.device));
    const int64_t calls2 = log.collective_calls("all_reduce", ctx.rank), bytes2 = log.collective_bytes("all_reduce", ctx.rank);
    const int64_t floats = rows * C;
    auto pass = [&](const char* name, int64_t calls, int64_t bytes) {
      if (calls != 1 || bytes != 4 * floats)
        found.add(std::string(name) + ": " + std::to_string(calls) + " all-reduce(s) of " + std::to_string(bytes) +
                  " bytes in all, expected one of B·T·C = " + std::to_string(floats) + " floats");
    };
    pass("forward", calls1 - calls0, bytes1 - bytes0);
    pass("backward", calls2 - calls1, bytes2 - bytes1);
  });
  found.require_none();
}
