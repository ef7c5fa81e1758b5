// solutions/15_3d_parallel/tp_attention.cpp — attention split by heads.
// A head needs its own q, k and v features and nothing of another head's, so
// rank t's heads take rows of c_attn from each of its three blocks and
// compute their attention alone: a narrower attention of H/tp heads over
// C/tp features. c_proj mixes every head's output, so it is split by its
// input columns and the ranks' products are terms of a sum: pair.f in front
// of c_attn, pair.g after c_proj's product, the bias added once, after g.
#include <vector>

#include "bias.h"
#include "ch14.h"
#include "ch15.h"
#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch15 {

AttentionSlices attention_slices(const GptBlock& block, const GptShape& shape, int t, int tp, Device& device) {
  DPT_CHECK(tp >= 1 && t >= 0 && t < tp && shape.heads % tp == 0,
            "attention_slices: " << shape.heads << " heads do not divide among " << tp << " ranks (rank " << t << ")");
  const int64_t C = shape.width, k = C / tp, begin = t * k;  // rank t's features of q, k, v and y
  const float* w = block.attn_weight.data();
  const float* b = block.attn_bias.data();
  std::vector<float> qkv_w, qkv_b;
  for (int64_t which = 0; which < 3; ++which) {  // q, k, v: rows which·C + [begin, begin + k)
    const int64_t first = which * C + begin;
    qkv_w.insert(qkv_w.end(), w + first * C, w + (first + k) * C);
    qkv_b.insert(qkv_b.end(), b + first, b + first + k);
  }
  std::vector<float> proj(std::size_t(C * k));  // c_proj's columns [begin, begin + k)
  const float* p = block.attn_proj_weight.data();
  for (int64_t i = 0; i < C; ++i)
    for (int64_t j = 0; j < k; ++j) proj[std::size_t(i * k + j)] = p[i * C + begin + j];
  AttentionSlices s;
  s.qkv_weight = Tensor::from_vector({3 * k, C}, qkv_w, device);
  s.qkv_bias = Tensor::from_vector({3 * k}, qkv_b, device);
  s.proj_weight = Tensor::from_vector({C, k}, proj, device);
  s.proj_bias = block.attn_proj_bias.to(device);
  for (Tensor* x : {&s.qkv_weight, &s.qkv_bias, &s.proj_weight, &s.proj_bias}) x->set_requires_grad(true);
  return s;
}

Tensor tp_attention(Communicator& group, const ExchangePair& pair, const Tensor& x, const AttentionSlices& mine,
                    const GptShape& shape, int64_t batch) {
  GptShape heads = shape;  // this rank's heads: a narrower attention
  heads.heads = shape.heads / group.size(), heads.width = shape.width / group.size();
  GptBlock narrow;
  narrow.attn_weight = mine.qkv_weight, narrow.attn_bias = mine.qkv_bias, narrow.attn_proj_weight = mine.proj_weight;
  const Tensor whole = pair.f(x);                                    // (B·T, C) on every rank
  const Tensor partial = gpt_attention(whole, narrow, heads, batch);  // (B·T, C): this rank's term of c_proj's sum
  return ch12::add_bias(pair.g(partial), mine.proj_bias);
}

}  // namespace dpt::ch15
