// exercises/15_3d_parallel/tp_attention.cpp — hole: attention split over a
// tensor-parallel group by heads. The contracts are
// dpt::ch15::attention_slices and dpt::ch15::tp_attention in
// chapters/15_3d_parallel/ch15.h; hints in tiers are in
// docs/ch15_3d_parallel.md (§ Hints).
//
// What you may use (which of them, and where, is the hole):
//   - pair.f and pair.g (ch15.h's ExchangePair), the only way the ranks talk;
//   - chapter 14's causal_attention (ch14.h) and gpt.cpp's gpt_attention, the
//     one-device version this must equal; ch12::add_bias (bias.h);
//   - linear, columns, reshape, swap_axes_12 (dpt/ops.h); Tensor::data(),
//     Tensor::from_vector (dpt/tensor.h) to cut slices on the host.
#include "bias.h"
#include "ch14.h"
#include "ch15.h"
#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch15 {

AttentionSlices attention_slices(const GptBlock& block, const GptShape& shape, int t, int tp, Device& device) {
  (void)block, (void)shape, (void)t, (void)tp, (void)device;
  throw NotImplemented("ch15: attention_slices — see exercises/15_3d_parallel/tp_attention.cpp");
}

Tensor tp_attention(Communicator& group, const ExchangePair& pair, const Tensor& x, const AttentionSlices& mine,
                    const GptShape& shape, int64_t batch) {
  (void)group, (void)pair, (void)x, (void)mine, (void)shape, (void)batch;
  throw NotImplemented("ch15: tp_attention — see exercises/15_3d_parallel/tp_attention.cpp");
}

}  // namespace dpt::ch15
