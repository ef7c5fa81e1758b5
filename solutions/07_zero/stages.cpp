// solutions/07_zero/stages.cpp — what makes a ZeRO stage that stage: what a
// rank does when a bucket of gradients is ready, and at the update. The
// plainest correct code.
#include "ch07.h"
#include "dpt/floats.h"
#include "sharded_ring.h"

namespace dpt::ch07 {

void on_bucket_ready(ZeroState& s, Range range, Tensor& bucket) {
  const int r = s.comm.rank();
  std::vector<int64_t> bounds = shard_bounds(s.part, range);
  const int64_t begin = bounds[std::size_t(r)], count = bounds[std::size_t(r) + 1] - begin;
  // Every stage: the sum of our part ends here, and is made the mean.
  ring_reduce_scatter(s.comm, bucket.data(), bounds);
  divide_floats(bucket.data() + begin, count, float(s.part.world));
  if (s.stage == 0) {  // everyone updates everything: everyone needs every mean (an all-reduce)
    ring_all_gather(s.comm, bucket.data(), bounds);
    return;
  }
  if (s.stage == 1) return;  // the full gradient buffer stays; only our part of it is read
  // Stages 2, 3: our part goes to its place in the gradient shard, the bucket goes.
  const int64_t into = range.begin + begin - r * s.part.shard;
  copy_floats(s.grads.data() + into, bucket.data() + begin, count);
  bucket = Tensor();
}

void update_parameters(ZeroState& s, int64_t t) {
  if (s.stage == 0) {  // a full replica of everything: the whole buffer steps
    adam_update(s.adam, t, s.params, s.grads, s.m, s.v);
    return;
  }
  // From stage 1 on, m and v exist for our shard only: we step our shard.
  const Range own = s.part.shard_of(s.comm.rank());
  Tensor p = s.stage <= 2 ? s.params.slice(own.begin, s.part.shard) : s.params;
  Tensor g = s.stage <= 1 ? s.grads.slice(own.begin, s.part.shard) : s.grads;
  adam_update(s.adam, t, p, g, s.m, s.v);
  // Stages 1, 2 keep full parameters: every other shard must arrive from its owner.
  if (s.stage <= 2) ring_all_gather(s.comm, s.params.data(), shard_bounds(s.part, {0, s.part.padded}));
}

}  // namespace dpt::ch07
