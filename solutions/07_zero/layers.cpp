// solutions/07_zero/layers.cpp — the life of a layer's parameters around one
// use: a view of the full buffer at stages 0–2; at stage 3 gathered from
// every rank's shard just before (unless gathered ahead), let go just after.
// The plainest correct code.
#include "ch07.h"
#include "dpt/floats.h"
#include "dpt/memory_ledger.h"
#include "sharded_ring.h"

namespace dpt::ch07 {

void use_layer(ZeroState& s, int l, const std::function<void(const Tensor& params)>& use) {
  const Range& range = s.layers[std::size_t(l)];
  if (s.stage <= 2) {  // every rank holds them all
    use(s.params.slice(range.begin, range.size()));
    return;
  }
  Tensor& full = s.gathered[std::size_t(l)];
  if (!full.defined()) {  // not gathered ahead (--prefetch): gather now
    std::vector<int64_t> bounds = shard_bounds(s.part, range);
    {
      MemoryScope scope(MemoryCategory::Comm);
      full = Tensor::empty({range.size()}, s.device);
    }
    const int r = s.comm.rank();
    const int64_t begin = bounds[std::size_t(r)], count = bounds[std::size_t(r) + 1] - begin;
    const int64_t from = range.begin + begin - r * s.part.shard;  // where our part sits in our shard
    copy_floats(full.data() + begin, s.params.data() + from, count);
    ring_all_gather(s.comm, full.data(), bounds);
  }
  use(full);
  full = Tensor();  // the last handle: its bytes go back to the device
}

}  // namespace dpt::ch07
