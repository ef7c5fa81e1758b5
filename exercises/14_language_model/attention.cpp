// exercises/14_language_model/attention.cpp — hole: causal self-attention.
// The contract is dpt::ch14::causal_attention in
// chapters/14_language_model/ch14.h; hints in tiers are in
// docs/ch14_language_model.md (§ Hints).
//
// Pointers:
//   - dpt/ops.h, section "a transformer's ops", has differentiable pieces
//     that work on all G heads at once; which ones, in what order and with
//     which arguments follow from the contract's laws.
//   - Built from ops.h's ops, your function's backward comes from autograd
//     (gpt.cpp's gpt_attention calls it). Loops of your own would need a
//     backward of their own.
#include "ch14.h"

#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch14 {

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  (void)q, (void)k, (void)v;
  throw NotImplemented("ch14: causal_attention — see exercises/14_language_model/attention.cpp");
}

}  // namespace dpt::ch14
