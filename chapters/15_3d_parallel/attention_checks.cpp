// attention_checks.cpp — attention_slices' laws and a probe of tp_attention
// (attention_checks.h).
#include "attention_checks.h"

#include <cmath>

#include "ch15.h"
#include "dpt/autograd.h"
#include "dpt/report.h"
#include "exchange_pairs.h"
#include "slice_placement.h"

namespace dpt::ch15 {

namespace {
constexpr int64_t kProbeBatch = 2;

float probe_world_max(Context& ctx, double x) {
  float v = std::isnan(x) ? INFINITY : float(std::fabs(x));  // a NaN must win the Max on every rank: inf does
  ctx.comm.all_reduce(&v, 1, ReduceOp::Max);
  return v;
}

// A block of random weights and non-zero, distinct biases, the same on every rank.
GptBlock probe_block(const GptShape& shape) {
  Rng rng(7);
  Gpt model(shape, Device::host(), rng);
  GptBlock b = model.blocks[0];
  for (Tensor* p : {&b.attn_bias, &b.attn_proj_bias}) {
    std::vector<float> v(std::size_t(p->numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * float(i + 1);
    *p = Tensor::from_vector(p->shape(), v, Device::host());
  }
  return b;
}

std::vector<float> probe_normals(std::size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

double probe_relative_gap(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return NAN;
  double gap = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(double(got[i]) - double(want[i]));
    gap = std::isnan(d) || std::isnan(gap) ? NAN : std::max(gap, d);
    scale = std::max(scale, double(std::fabs(want[i])));
  }
  return gap / scale;
}

// The block's attention parameters flattened in the placement's index space.
std::vector<float> attention_flat(const Tensor& w, const Tensor& b, const Tensor& pw, const Tensor& pb) {
  std::vector<float> out;
  for (const Tensor* t : {&w, &b, &pw, &pb}) {
    const std::vector<float> v = t->to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// One device's attention of `b` on x (rows, C).
Tensor one_device_attention(const GptBlock& b, const GptShape& shape, const std::vector<float>& x) {
  const int64_t C = shape.width;
  return gpt_attention(Tensor::from_vector({int64_t(x.size()) / C, C}, x, Device::host()), b, shape, kProbeBatch);
}

// Gap / max |y| between Σ_t attention(rank t's entries only) + c_proj.bias and the block's attention.
double heads_law_gap(const GptBlock& b, const GptShape& shape, const std::vector<SlicePlacement>& where) {
  const AttentionRanges at = attention_ranges(shape);
  const std::vector<float> full = attention_flat(b.attn_weight, b.attn_bias, b.attn_proj_weight, b.attn_proj_bias);
  const std::vector<float> x = probe_normals(std::size_t(kProbeBatch * shape.context * shape.width), 11);
  const std::vector<float> want = one_device_attention(b, shape, x).to_vector();
  std::vector<float> sum = b.attn_proj_bias.to_vector();  // the bias once, broadcast below
  std::vector<float> total(want.size());
  for (std::size_t i = 0; i < total.size(); ++i) total[i] = sum[i % sum.size()];
  for (const SlicePlacement& p : where) {
    std::vector<float> kept(full.size(), 0.0f);
    for (const std::vector<int64_t>* idx : {&p.qkv_weight, &p.qkv_bias, &p.proj_weight})
      for (int64_t i : *idx)
        if (i >= 0 && i < at.proj_bias) kept[std::size_t(i)] = full[std::size_t(i)];
    GptBlock mine = b;
    auto cut = [&kept](const Tensor& like, int64_t first) {
      return Tensor::from_vector(like.shape(), std::vector<float>(kept.begin() + first, kept.begin() + first + like.numel()),
                                 Device::host());
    };
    mine.attn_weight = cut(b.attn_weight, at.qkv_weight), mine.attn_bias = cut(b.attn_bias, at.qkv_bias);
    mine.attn_proj_weight = cut(b.attn_proj_weight, at.proj_weight), mine.attn_proj_bias = cut(b.attn_proj_bias, at.proj_bias);
    const std::vector<float> part = one_device_attention(mine, shape, x).to_vector();
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += part[i];
  }
  return probe_relative_gap(total, want);
}
}  // namespace

GptShape probe_shape(const GptShape& run_shape) {
  GptShape s = run_shape;
  s.layers = 1, s.context = 5, s.width = 3 * run_shape.heads, s.vocab = std::max<int64_t>(run_shape.vocab, 2);
  return s;
}

bool add_slice_verdicts(Context& ctx, Communicator& tp_group, const GptShape& run_shape, Verdicts& v) {
  const GptShape shape = probe_shape(run_shape);
  const int tp = tp_group.size();
  const AttentionRanges at = attention_ranges(shape);
  std::vector<SlicePlacement> where;
  for (int t = 0; t < tp; ++t) where.push_back(slice_placement(shape, t, tp));  // the same on every rank
  // Law 1: copies of the right tensors.
  int64_t misplaced = 0;
  for (const SlicePlacement& p : where) {
    for (int64_t i : p.qkv_weight) misplaced += !(i >= at.qkv_weight && i < at.qkv_bias);
    for (int64_t i : p.qkv_bias) misplaced += !(i >= at.qkv_bias && i < at.proj_weight);
    for (int64_t i : p.proj_weight) misplaced += !(i >= at.proj_weight && i < at.proj_bias);
    bool whole = int64_t(p.proj_bias.size()) == at.end - at.proj_bias;
    for (std::size_t i = 0; whole && i < p.proj_bias.size(); ++i) whole = p.proj_bias[i] == at.proj_bias + int64_t(i);
    misplaced += !whole;
  }
  // Law 2: every entry of c_attn and c_proj's weight on exactly one rank, once.
  std::vector<int> held(std::size_t(at.proj_bias), 0);
  for (const SlicePlacement& p : where)
    for (const std::vector<int64_t>* idx : {&p.qkv_weight, &p.qkv_bias, &p.proj_weight})
      for (int64_t i : *idx)
        if (i >= 0 && i < at.proj_bias) ++held[std::size_t(i)];
  int64_t none = 0, twice = 0;
  for (int n : held) none += n == 0, twice += n > 1;
  // Law 3: a rank's entries alone compute its heads' share.
  const double heads = heads_law_gap(probe_block(shape), shape, where);
  const float worst[3] = {probe_world_max(ctx, double(misplaced)), probe_world_max(ctx, double(none + twice)),
                          probe_world_max(ctx, heads)};
  const bool ok = worst[0] == 0 && worst[1] == 0 && worst[2] <= 1e-5f;
  if (!ctx.is_root()) return ok;
  const std::string where_said = str(" (a block of ", shape.heads, " heads, width ", shape.width, ", tp ", tp, ")");
  v.at_most("attention_slices: each share holds unchanged entries of its own tensor, c_proj.bias whole" + where_said,
            worst[0], 0, str(misplaced, " share entries hold no entry of their tensor, or c_proj.bias is not whole"));
  v.at_most("attention_slices: every entry of c_attn and c_proj.weight held by exactly one rank, once", worst[1], 0,
            str(none, " entries held by no rank, ", twice, " by more than one or twice"));
  v.at_most("attention_slices: a rank's entries alone compute its heads' share: Σ_t attention(rank t's entries) + "
            "c_proj.bias = the block's (max |Δ| / max |y|)",
            worst[2], 1e-5,
            "the same sums in another order: ~1e-7; a head's q, k, v or c_proj entries on another rank: tenths");
  return ok;
}

bool add_attention_probe_verdicts(Context& ctx, Communicator& tp_group, const GptShape& run_shape, Verdicts& v) {
  const GptShape shape = probe_shape(run_shape);
  const int t = tp_group.rank(), tp = tp_group.size();
  const int64_t C = shape.width, rows = kProbeBatch * shape.context;
  const GptBlock b = probe_block(shape);
  const std::vector<float> xv = probe_normals(std::size_t(rows * C), 11), rv = probe_normals(std::size_t(rows * C), 12);
  // One device, unsplit.
  GptBlock one = b;
  for (Tensor* p : {&one.attn_weight, &one.attn_bias, &one.attn_proj_weight, &one.attn_proj_bias})
    *p = p->clone().set_requires_grad(true);
  Tensor x1 = Tensor::from_vector({rows, C}, xv, Device::host()).set_requires_grad(true);
  Tensor y1 = gpt_attention(x1, one, shape, kProbeBatch);
  backward(y1, Tensor::from_vector({rows, C}, rv, Device::host()));
  const std::vector<float> dfull =
      attention_flat(one.attn_weight.grad(), one.attn_bias.grad(), one.attn_proj_weight.grad(), one.attn_proj_bias.grad());
  // The group, on your slices and chapter 12's pair.
  AttentionSlices mine = attention_slices(b, shape, t, tp, ctx.device);
  const SlicePlacement where = slice_placement(shape, t, tp);
  Tensor x = Tensor::from_vector({rows, C}, xv, ctx.device).set_requires_grad(true);
  TrafficLog& log = tp_group.traffic();
  const int r = log.rank();
  auto seen = [&] { return std::pair<int64_t, int64_t>{log.collective_calls("all_reduce", r), log.collective_bytes("all_reduce", r)}; };
  const auto s0 = seen();
  Tensor y = tp_attention(tp_group, tensor_parallel_pair(tp_group), x, mine, shape, kProbeBatch);
  const auto s1 = seen();
  const bool shaped = y.defined() && y.shape() == Shape{rows, C};
  if (shaped) backward(y, Tensor::from_vector({rows, C}, rv, ctx.device));
  const auto s2 = seen();
  auto grad_of = [](const Tensor& p) { return p.grad().defined() ? p.grad().to_vector() : std::vector<float>(); };
  // A share's gradient against one device's at the entries the share holds.
  auto share_gap = [&](const std::vector<std::pair<const Tensor*, const std::vector<int64_t>*>>& shares) {
    std::vector<float> got, want;
    for (const auto& [share, idx] : shares) {
      const std::vector<float> g = grad_of(*share);
      if (g.size() != idx->size()) return double(NAN);
      for (std::size_t i = 0; i < g.size(); ++i) {
        if ((*idx)[i] < 0) return double(NAN);
        got.push_back(g[i]), want.push_back(dfull[std::size_t((*idx)[i])]);
      }
    }
    return probe_relative_gap(got, want);
  };
  const double gaps[4] = {
      shaped ? probe_relative_gap(y.to_vector(), y1.to_vector()) : NAN,
      shaped ? probe_relative_gap(grad_of(x), x1.grad().to_vector()) : NAN,
      shaped ? share_gap({{&mine.qkv_weight, &where.qkv_weight}, {&mine.qkv_bias, &where.qkv_bias}}) : NAN,
      shaped ? share_gap({{&mine.proj_weight, &where.proj_weight}, {&mine.proj_bias, &where.proj_bias}}) : NAN};
  const int64_t floats = rows * C;
  const bool traffic_ok = s1.first - s0.first == 1 && s1.second - s0.second == 4 * floats &&
                          s2.first - s1.first == 1 && s2.second - s1.second == 4 * floats;
  float worst[5];
  for (int i = 0; i < 4; ++i) worst[i] = probe_world_max(ctx, gaps[i]);
  worst[4] = probe_world_max(ctx, traffic_ok ? 0.0 : 1.0);
  bool ok = worst[4] == 0;
  for (int i = 0; i < 4; ++i) ok = ok && worst[i] <= 1e-5f;
  if (!ctx.is_root()) return ok;
  const std::string why = "the same sums in another order: ~1e-7 of the largest entry; a rank's share lost or counted "
                          "twice: a tenth or more";
  // Off in its output alone, right in every gradient: a constant term, one no gradient flows back through.
  const bool only_output = worst[0] > 1e-5f && worst[1] <= 1e-5f && worst[2] <= 1e-5f && worst[3] <= 1e-5f;
  v.at_most("tp_attention: its output = one device's attention, on every rank (max |Δ| / max |y|)", worst[0], 1e-5,
            only_output ? why + "; here the output alone is off and every gradient right: a term each rank adds "
                                "whole, before the ranks' terms are summed, counts tp times"
                        : why);
  v.at_most("tp_attention: x's gradient = one device's, the whole model's on every rank", worst[1], 1e-5, why);
  v.at_most("tp_attention: c_attn's shares' gradients = one device's at the entries each holds", worst[2], 1e-5, why);
  v.at_most("tp_attention: c_proj's shares' gradients (weight; bias whole) = one device's", worst[3], 1e-5, why);
  v.holds(str("tp_attention: one all-reduce of B·T·C = ", floats, " floats in forward and one in backward, no more"),
          worst[4] == 0,
          str("rank 0: forward ", s1.first - s0.first, " all-reduce(s) of ", s1.second - s0.second, " bytes, backward ",
              s2.first - s1.first, " of ", s2.second - s1.second));
  return ok;
}

}  // namespace dpt::ch15
