// exercises/12_tensor_parallel/parallel_linear.cpp — hole: the two linear
// layers of a tensor-parallel pair. The contracts are
// dpt::ch12::column_parallel_linear and dpt::ch12::row_parallel_linear in
// chapters/12_tensor_parallel/ch12.h; hints in tiers are in
// docs/ch12_tensor_parallel.md (§ Hints).
//
// What you may use (which of them, in which order, is the hole):
//   - linear(x, weight, bias) (dpt/ops.h): x · weightᵀ + bias; the bias may
//     be Tensor(), none.
//   - add_bias(y, bias) (bias.h, this chapter's folder): y + bias on every
//     row, an op of its own, differentiable in both.
//   - your two operators (conjugate.cpp): the only way a layer talks to the
//     other ranks.
#include "ch12.h"

#include "bias.h"
#include "dpt/check.h"
#include "dpt/ops.h"

namespace dpt::ch12 {

Tensor column_parallel_linear(Communicator& group, const Tensor& x, const Tensor& weight_shard,
                              const Tensor& bias_shard) {
  (void)group, (void)x, (void)weight_shard, (void)bias_shard;
  throw NotImplemented("ch12: column_parallel_linear — see exercises/12_tensor_parallel/parallel_linear.cpp");
}

Tensor row_parallel_linear(Communicator& group, const Tensor& x_shard, const Tensor& weight_shard, const Tensor& bias) {
  (void)group, (void)x_shard, (void)weight_shard, (void)bias;
  throw NotImplemented("ch12: row_parallel_linear — see exercises/12_tensor_parallel/parallel_linear.cpp");
}

}  // namespace dpt::ch12
