// test_ch15.cpp — chapter 15's attention hole over 2 and 4 rank threads,
// judged by laws, whatever layout attention_slices chooses: where each share
// entry came from is read back by calling attention_slices on a block whose
// entries are their own indices. The split forward and its gradients are
// judged against one device's unsplit attention (chapter 14's
// gpt_attention, the function the contract names), the exchanges against
// the threads traffic log.
#include "support/catch.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ch15.h"
#include "dpt/autograd.h"
#include "dpt/ops.h"
#include "exchange_pairs.h"
#include "gpt.h"
#include "support/findings.h"
#include "support/ranks.h"

using namespace dpt;
using namespace dpt::ch15;

namespace {
// 4 heads of size 3 (C = 12: head size ≠ tp, so a split by features of the
// wrong width cannot pass), 2 sequences of 4 tokens (tp 2 and 4 divide T).
const GptShape kShape{/*vocab*/ 7, /*context*/ 4, /*layers*/ 1, /*heads*/ 4, /*width*/ 12};
constexpr int64_t kBatch = 2, kTime = 4, kC = 12;
// The index space of one block's attention: c_attn.weight, c_attn.bias, c_proj.weight, c_proj.bias.
constexpr int64_t kAttnBias = 3 * kC * kC, kProjWeight = kAttnBias + 3 * kC, kProjBias = kProjWeight + kC * kC,
                  kEntries = kProjBias + kC;

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

std::vector<float> flat_attention(const Tensor& w, const Tensor& b, const Tensor& pw, const Tensor& pb) {
  std::vector<float> out;
  for (const Tensor* t : {&w, &b, &pw, &pb}) {
    const std::vector<float> v = t->to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Each share's entries as indices into the block's attention (-1: no entry's value).
struct Placed {
  std::vector<int64_t> w, b, pw, pb;
};
Placed placed(int t, int tp) {
  std::vector<float> n(static_cast<std::size_t>(kEntries));
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = float(i + 1);
  auto part = [&](const Shape& s, int64_t first, int64_t count) {
    return Tensor::from_vector(s, std::vector<float>(n.begin() + first, n.begin() + first + count), Device::host());
  };
  GptBlock indexed;
  indexed.attn_weight = part({3 * kC, kC}, 0, kAttnBias);
  indexed.attn_bias = part({3 * kC}, kAttnBias, 3 * kC);
  indexed.attn_proj_weight = part({kC, kC}, kProjWeight, kC * kC);
  indexed.attn_proj_bias = part({kC}, kProjBias, kC);
  const AttentionSlices s = attention_slices(indexed, kShape, t, tp, Device::host());
  auto back = [](const Tensor& x) {
    std::vector<int64_t> out;
    if (!x.defined()) return out;
    for (float v : x.to_vector()) out.push_back(v >= 1 && v <= float(kEntries) && v == std::nearbyint(v) ? int64_t(v) - 1 : -1);
    return out;
  };
  return {back(s.qkv_weight), back(s.qkv_bias), back(s.proj_weight), back(s.proj_bias)};
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

// One device's attention of `b` on x (B·T, C).
std::vector<float> one_device(const GptBlock& b, const std::vector<float>& x) {
  return gpt_attention(Tensor::from_vector({kBatch * kTime, kC}, x, Device::host()), b, kShape, kBatch).to_vector();
}

// The split sums the same ≤ 3C products in another order (the ranks'
// partial sums added by the exchange): float rounding, ~1e-7 of the largest
// entry. A rank's share lost or counted twice (a missing exchange, the bias
// on every rank) moves entries by a tenth of the largest or more.
constexpr double kTolerance = 1e-5;

// Rank t's rows of a (B·T, C) activation held by positions (ch15.h's words).
std::vector<int64_t> attn_test_rows(int t, int tp) {
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t tau = 0; tau < kTime / tp; ++tau) rows.push_back(b * kTime + t * (kTime / tp) + tau);
  return rows;
}
std::vector<float> attn_test_pick(const std::vector<float>& whole, const std::vector<int64_t>& rows) {
  std::vector<float> out;
  for (int64_t r : rows) out.insert(out.end(), whole.begin() + r * kC, whole.begin() + (r + 1) * kC);
  return out;
}
}  // namespace

TEST_CASE("attention_slices: copies of their tensors, every entry on exactly one rank, a rank's entries compute its heads' share",
          "[ch15][hole:attention_slices]") {
  const GptBlock b = full_block();
  const std::vector<float> before = flat_attention(b.attn_weight, b.attn_bias, b.attn_proj_weight, b.attn_proj_bias);
  const std::vector<float> x = normals(std::size_t(kBatch * kTime * kC), 11), want = one_device(b, x);
  for (int tp : {1, 2, 4}) {
    std::vector<int> held(std::size_t(kProjBias), 0);  // how many share entries hold each entry of c_attn, c_proj.weight
    std::vector<float> total(want.size());
    for (std::size_t i = 0; i < total.size(); ++i) total[i] = b.attn_proj_bias.data()[i % kC];
    for (int t = 0; t < tp; ++t) {
      INFO("tp " << tp << ", rank " << t);
      const AttentionSlices s = attention_slices(b, kShape, t, tp, Device::host());
      for (const Tensor* p : {&s.qkv_weight, &s.qkv_bias, &s.proj_weight, &s.proj_bias}) CHECK(p->requires_grad());
      const Placed p = placed(t, tp);
      // Law 1: each share holds unchanged entries of its own tensor; c_proj.bias whole.
      auto within = [](const std::vector<int64_t>& idx, int64_t lo, int64_t hi) {
        return std::all_of(idx.begin(), idx.end(), [&](int64_t i) { return i >= lo && i < hi; });
      };
      {
        INFO("law: qkv_weight, qkv_bias and proj_weight hold entries of c_attn.weight, c_attn.bias and c_proj.weight "
             "respectively, and proj_bias is c_proj.bias whole");
        CHECK(within(p.w, 0, kAttnBias));
        CHECK(within(p.b, kAttnBias, kProjWeight));
        CHECK(within(p.pw, kProjWeight, kProjBias));
        CHECK(max_gap(s.proj_bias.to_vector(), b.attn_proj_bias.to_vector()) == 0);
      }
      // The values are the block's at those entries (the read-back is about indices; this is about values).
      std::vector<float> got, at;
      for (const auto& [share, idx] : {std::pair<const Tensor*, const std::vector<int64_t>*>{&s.qkv_weight, &p.w},
                                       {&s.qkv_bias, &p.b}, {&s.proj_weight, &p.pw}}) {
        const std::vector<float> v = share->to_vector();
        REQUIRE(v.size() == idx->size());
        for (std::size_t i = 0; i < v.size(); ++i)
          if ((*idx)[i] >= 0) got.push_back(v[i]), at.push_back(before[std::size_t((*idx)[i])]);
      }
      {
        INFO("law: the shares are unchanged copies of the block's entries");
        CHECK(max_gap(got, at) == 0);
      }
      // Law 3's term: one device's attention of the block with only rank t's entries kept.
      std::vector<float> kept(before.size(), 0.0f);
      for (const std::vector<int64_t>* idx : {&p.w, &p.b, &p.pw})
        for (int64_t i : *idx)
          if (i >= 0 && i < kProjBias) ++held[std::size_t(i)], kept[std::size_t(i)] = before[std::size_t(i)];
      GptBlock mine;
      auto cut = [&](const Shape& sh, int64_t first, int64_t n) {
        return Tensor::from_vector(sh, std::vector<float>(kept.begin() + first, kept.begin() + first + n), Device::host());
      };
      mine.attn_weight = cut({3 * kC, kC}, 0, kAttnBias), mine.attn_bias = cut({3 * kC}, kAttnBias, 3 * kC);
      mine.attn_proj_weight = cut({kC, kC}, kProjWeight, kC * kC), mine.attn_proj_bias = cut({kC}, kProjBias, kC);
      const std::vector<float> term = one_device(mine, x);
      for (std::size_t i = 0; i < total.size(); ++i) total[i] += term[i];
    }
    INFO("tp " << tp);
    // Law 2: every entry of c_attn and c_proj.weight held by exactly one rank, once.
    {
      INFO("law: every entry of c_attn.weight, c_attn.bias and c_proj.weight is held by exactly one rank, once "
           "(counted: entries held by none, entries held more than once)");
      CHECK(std::count(held.begin(), held.end(), 0) == 0);
      CHECK(std::count_if(held.begin(), held.end(), [](int n) { return n > 1; }) == 0);
    }
    // Law 3: Σ_t attention(rank t's entries) + c_proj.bias = the block's attention.
    {
      INFO("law: a head's entries are all on the rank that owns it — one device's attention on the block with only rank "
           "t's entries kept, summed over t, plus c_proj.bias, must be the block's attention (max gap / max |y|)");
      CHECK(relative_gap(total, want) <= kTolerance);
    }
  }
  CHECK(max_gap(flat_attention(b.attn_weight, b.attn_bias, b.attn_proj_weight, b.attn_proj_bias), before) == 0);
}

namespace {
// One device's y and gradients of loss = Σ r ⊙ y, and the group's on `pair`
// (x held whole, or by positions), compared; "" when every law held.
void check_against_one_device(int tp, bool by_positions, dpt_test::Findings& found) {
  const GptBlock b = full_block();
  const int64_t rows = kBatch * kTime;
  const std::vector<float> xv = normals(std::size_t(rows * kC), 11), rv = normals(std::size_t(rows * kC), 12);
  GptBlock one = b;
  for (Tensor* p : {&one.attn_weight, &one.attn_bias, &one.attn_proj_weight, &one.attn_proj_bias})
    *p = p->clone().set_requires_grad(true);
  Tensor x1 = Tensor::from_vector({rows, kC}, xv, Device::host()).set_requires_grad(true);
  Tensor y1 = gpt_attention(x1, one, kShape, kBatch);
  const std::vector<float> want_y = y1.to_vector();
  backward(y1, Tensor::from_vector({rows, kC}, rv, Device::host()));
  const std::vector<float> dfull = flat_attention(one.attn_weight.grad(), one.attn_bias.grad(),
                                                  one.attn_proj_weight.grad(), one.attn_proj_bias.grad());
  dpt_test::run_ranks(tp, [&](Context& ctx) {
    const int t = ctx.rank;
    const std::string who = "tp " + std::to_string(tp) +
                            (by_positions ? " (on your gather_sequence and scatter_sequence: if their tests fail, fix them first)"
                                          : "") +
                            ", rank " + std::to_string(t) + ": ";
    std::vector<int64_t> mine_rows(static_cast<std::size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) mine_rows[std::size_t(r)] = r;
    if (by_positions) mine_rows = attn_test_rows(t, tp);
    const Placed where = placed(t, tp);
    AttentionSlices mine = attention_slices(b, kShape, t, tp, ctx.device);
    const ExchangePair pair = by_positions ? sequence_parallel_pair(ctx.comm, kBatch) : tensor_parallel_pair(ctx.comm);
    Tensor x = Tensor::from_vector({int64_t(mine_rows.size()), kC}, attn_test_pick(xv, mine_rows), ctx.device)
                   .set_requires_grad(true);
    Tensor y = tp_attention(ctx.comm, pair, x, mine, kShape, kBatch);
    if (y.shape() != x.shape())
      return found.add(who + "the output is " + shape_str(y.shape()) + ", not this rank's part " + shape_str(x.shape()));
    const double gy = relative_gap(y.to_vector(), attn_test_pick(want_y, mine_rows));
    if (gy > kTolerance) found.add(who + "the output is not one device's attention: max gap / max |entry| " + std::to_string(gy));
    backward(y, Tensor::from_vector(y.shape(), attn_test_pick(rv, mine_rows), ctx.device));
    for (const Tensor* s : {&x, &mine.qkv_weight, &mine.qkv_bias, &mine.proj_weight, &mine.proj_bias})
      if (!s->grad().defined()) return found.add(who + "a tensor the loss depends on got no gradient");
    std::vector<float> bias_gradient(std::size_t(kC), 0.0f);  // c_proj.bias adds to each of my rows once
    for (int64_t r : mine_rows)
      for (int64_t c = 0; c < kC; ++c) bias_gradient[std::size_t(c)] += rv[std::size_t(r * kC + c)];
    // A share's gradient against one device's at the entries the share holds.
    auto share_gap = [&](std::initializer_list<std::pair<const Tensor*, const std::vector<int64_t>*>> shares) {
      std::vector<float> got, want;
      for (const auto& [share, idx] : shares) {
        const std::vector<float> g = share->grad().to_vector();
        if (g.size() != idx->size()) return double(INFINITY);
        for (std::size_t i = 0; i < g.size(); ++i) {
          if ((*idx)[i] < 0) return double(INFINITY);
          got.push_back(g[i]), want.push_back(dfull[std::size_t((*idx)[i])]);
        }
      }
      return relative_gap(got, want);
    };
    const struct { const char* what; double gap; } gaps[] = {
        {"x's gradient (the whole model's, at my rows)",
         relative_gap(x.grad().to_vector(), attn_test_pick(x1.grad().to_vector(), mine_rows))},
        {"c_attn's shares' gradients", share_gap({{&mine.qkv_weight, &where.w}, {&mine.qkv_bias, &where.b}})},
        {"c_proj's share's weight gradient", share_gap({{&mine.proj_weight, &where.pw}})},
        {"c_proj's bias gradient (the output gradient summed over my rows)",
         relative_gap(mine.proj_bias.grad().to_vector(), bias_gradient)}};
    for (const auto& g : gaps)
      if (g.gap > kTolerance) found.add(who + g.what + " is not one device's: max gap / max |entry| " + std::to_string(g.gap));
  });
}
}  // namespace

TEST_CASE("tp_attention: the output, x's gradient and every share's gradient = one device's attention, on every rank",
          "[ch15][hole:tp_attention]") {
  for (int tp : {2, 4}) {
    dpt_test::Findings found;
    check_against_one_device(tp, false, found);
    found.require_none();
  }
}

TEST_CASE("tp_attention on sequence parallelism's pair: each rank's positions of one device's attention and gradients",
          "[ch15][hole:tp_attention][hole:gather_sequence][hole:scatter_sequence]") {
  for (int tp : {2, 4}) {
    dpt_test::Findings found;
    check_against_one_device(tp, true, found);
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
    Tensor y = tp_attention(ctx.comm, tensor_parallel_pair(ctx.comm), x, mine, kShape, kBatch);
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
