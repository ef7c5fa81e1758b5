// solutions/07_zero/layers.cpp — a layer's parameters around its use: a view
// of the full buffer at stages 0–2; at stage 3 gathered from every rank's
// shard just before, and let go just after. The plainest correct code.
#include "ch07.h"
#include "dpt/floats.h"
#include "dpt/memory_ledger.h"
#include "sharded_ring.h"

namespace dpt::ch07 {

Tensor layer_parameters(ZeroState& s, int l) {
  const Range& range = s.layers[std::size_t(l)];
  if (s.stage <= 2) return s.params.slice(range.begin, range.size());  // every rank holds them all
  Tensor& slot = s.gathered[std::size_t(l)];
  if (!slot.defined()) slot = gather_layer(s.comm, s.part, range, s.params, s.device);  // unless prefetched
  return slot;
}

void layer_done(ZeroState& s, int l) {
  if (s.stage == 3) release_layer(s.gathered[std::size_t(l)]);
}

Tensor gather_layer(Communicator& comm, const Partition& part, Range range, const Tensor& param_shard, Device& device) {
  std::vector<int64_t> bounds = shard_bounds(part, range);
  Tensor full;
  {
    MemoryScope scope(MemoryCategory::Comm);
    full = Tensor::empty({range.size()}, device);
  }
  const int r = comm.rank();
  const int64_t begin = bounds[std::size_t(r)], count = bounds[std::size_t(r) + 1] - begin;
  const int64_t from = range.begin + begin - r * part.shard;  // where our part sits in our shard
  copy_floats(full.data() + begin, param_shard.data() + from, count);
  ring_all_gather(comm, full.data(), bounds);
  return full;
}

void release_layer(Tensor& gathered) { gathered = Tensor(); }

}  // namespace dpt::ch07
