// solutions/12_tensor_parallel/parallel_linear.cpp — Megatron's MLP pair.
// Column-parallel: enter the region (f), then this rank's output block.
// Row-parallel: this rank's partial product, leave the region (g), and only
// then the bias: added before the sum it would be counted T times.
#include "ch12.h"

#include "bias.h"
#include "dpt/ops.h"

namespace dpt::ch12 {

Tensor column_parallel_linear(Communicator& group, const Tensor& x, const Tensor& weight_shard,
                              const Tensor& bias_shard) {
  return linear(copy_to_tp_region(group, x), weight_shard, bias_shard);
}

Tensor row_parallel_linear(Communicator& group, const Tensor& x_shard, const Tensor& weight_shard, const Tensor& bias) {
  Tensor partial = linear(x_shard, weight_shard, Tensor());  // (B, out): this rank's inputs' share of the product
  return add_bias(reduce_from_tp_region(group, partial), bias);
}

}  // namespace dpt::ch12
