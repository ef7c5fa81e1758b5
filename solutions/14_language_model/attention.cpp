// solutions/14_language_model/attention.cpp — causal scaled dot-product
// attention from the core's differentiable ops: scores q·kᵀ/√D (a dot product
// of D unit-variance terms has variance D), a softmax over the keys with the
// future masked, the weights times v. Autograd gives the backward.
#include <cmath>

#include "ch14.h"
#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch14 {

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  DPT_CHECK(q.dim() == 3 && q.shape() == k.shape() && q.shape() == v.shape(),
            "causal_attention: q, k and v must be (G, T, D), all the same shape");
  const float scale = 1.0f / std::sqrt(float(q.size(2)));
  Tensor scores = batched_matmul(q, false, k, true, scale);  // (G, T, T): query i against key j
  Tensor weights = softmax(scores, /*causal=*/true);         // over the keys j ≤ i; rows sum to 1
  return batched_matmul(weights, false, v, false);           // (G, T, D)
}

}  // namespace dpt::ch14
