// exercises/14_language_model/attention.cpp — hole: causal self-attention.
// The contract is dpt::ch14::causal_attention in
// chapters/14_language_model/ch14.h; hints in tiers are in
// docs/ch14_language_model.md (§ Hints).
//
// Pointers:
//   - batched_matmul(a, ta, b, tb, alpha) (dpt/ops.h): G products at once,
//     alpha · op(a) · op(b), op(x) = xᵀ of each (T, D) matrix when its flag
//     is set.
//   - softmax(x, causal) (dpt/ops.h): over the last axis; causal masks the
//     entries (i, j) with j > i of each (T, T) matrix.
//   - Every op in ops.h is differentiable: built from them, your function's
//     backward comes from autograd (gpt.cpp's gpt_attention calls it).
#include "ch14.h"

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch14 {

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  (void)q, (void)k, (void)v;
  throw NotImplemented("ch14: causal_attention — see exercises/14_language_model/attention.cpp");
}

}  // namespace dpt::ch14
