// solutions/15_3d_parallel/tp_attention.cpp — attention split by heads.
// A head needs its own q, k and v features and nothing of another head's, so
// rank t's heads take rows of c_attn from each of its three blocks
// (column-parallel: f in front) and compute their attention alone; c_proj
// mixes every head's output, so it is split by its input columns
// (row-parallel: g after it, the bias added once, after the sum).
#include <vector>

#include "ch12.h"
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

Tensor tp_attention(Communicator& group, const Tensor& x, const AttentionSlices& mine, const GptShape& shape,
                    int64_t batch) {
  const int64_t H = shape.heads / group.size(), D = shape.head_size(), k = H * D;  // this rank's heads
  const int64_t T = x.size(0) / batch;
  Tensor qkv = ch12::column_parallel_linear(group, x, mine.qkv_weight, mine.qkv_bias);  // (B·T, 3k)
  auto heads = [&](int64_t which) {  // this rank's q, k or v as (B·H, T, D)
    Tensor part = reshape(columns(qkv, which * k, k), {batch, T, H, D});
    return reshape(swap_axes_12(part), {batch * H, T, D});
  };
  Tensor y = ch14::causal_attention(heads(0), heads(1), heads(2));
  y = reshape(swap_axes_12(reshape(y, {batch, H, T, D})), {batch * T, k});  // this rank's block of y's features
  return ch12::row_parallel_linear(group, y, mine.proj_weight, mine.proj_bias);
}

}  // namespace dpt::ch15
