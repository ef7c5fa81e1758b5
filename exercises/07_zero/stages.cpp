// exercises/07_zero/stages.cpp — holes: what makes a ZeRO stage that stage,
// when a bucket of gradients is ready and at the update.
//
// Contracts: chapters/07_zero/ch07.h (on_bucket_ready, update_parameters;
// ZeroState says what each stage keeps). Hints, one tier at a time:
// docs/ch07_zero.md, "Hints".
//  * Provided: ring_reduce_scatter and ring_all_gather (sharded_ring.h),
//    shard_bounds and Partition::shard_of, adam_update (ch07.h), Tensor's
//    slice, and copy_floats / divide_floats (dpt/floats.h).
//  * Not the library's collectives (comm.all_reduce …): they sum in another
//    order, and every stage must give stage 0's bits.
#include "ch07.h"

#include "dpt/floats.h"
#include "sharded_ring.h"

namespace dpt::ch07 {

void on_bucket_ready(ZeroState& s, Range range, Tensor& bucket) {
  (void)s, (void)range, (void)bucket;
  throw NotImplemented("ch07: on_bucket_ready — see exercises/07_zero/stages.cpp");
}

void update_parameters(ZeroState& s, int64_t t) {
  (void)s, (void)t;
  throw NotImplemented("ch07: update_parameters — see exercises/07_zero/stages.cpp");
}

}  // namespace dpt::ch07
