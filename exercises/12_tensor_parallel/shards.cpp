// exercises/12_tensor_parallel/shards.cpp — hole: which slice of a weight a
// rank owns, and the slices put back together. The contracts are
// dpt::ch12::shard_weight and dpt::ch12::gather_weight in
// chapters/12_tensor_parallel/ch12.h; hints in tiers are in
// docs/ch12_tensor_parallel.md (§ Hints).
//
// Pointers:
//   - tensor.h: full.rows(a, b) is a view of rows [a, b); t.to(device) copies;
//     Tensor::from_vector(shape, values, device) builds one from host floats.
//   - group.all_gather(input, output): output holds size() blocks of
//     input.numel() floats, block r from rank r. t.to(Device::host()) copies
//     a tensor to the host; t.reshape(shape) is a view.
#include "ch12.h"

#include "dpt/check.h"

namespace dpt::ch12 {

Tensor shard_weight(const Tensor& full, Split split, int rank, int ranks, Device& device) {
  (void)full, (void)split, (void)rank, (void)ranks, (void)device;
  throw NotImplemented("ch12: shard_weight — see exercises/12_tensor_parallel/shards.cpp");
}

Tensor gather_weight(Communicator& group, const Tensor& shard, Split split) {
  (void)group, (void)shard, (void)split;
  throw NotImplemented("ch12: gather_weight — see exercises/12_tensor_parallel/shards.cpp");
}

}  // namespace dpt::ch12
