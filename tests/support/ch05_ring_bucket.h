// ch05_ring_bucket.h — a BucketState wired as chapter 05's loop wires it, for
// the tests that run the reducer on real ranks: launch packs the bucket and
// all-reduces it with chapter 04's ring on the progress thread.
#pragma once

#include <memory>
#include <vector>

#include "ch04.h"
#include "ch05.h"
#include "dpt/flatten.h"
#include "dpt/launch.h"

namespace dpt_test {

// A state whose launch packs the bucket's gradients of `params` (as they are
// at launch) and all-reduces it with chapter 04's ring on the progress thread
// (Avg), as the chapter's loop does. Held by shared_ptr: the queued work keeps
// it alive whatever happens to the caller.
inline std::shared_ptr<dpt::ch05::BucketState> ring_bucket_state(dpt::Context& ctx, std::vector<dpt::ch05::Bucket> layout,
                                                                 std::vector<dpt::Tensor> params) {
  auto shared = std::make_shared<dpt::ch05::BucketState>();
  auto launch = [&comm = ctx.comm, params, weak = std::weak_ptr<dpt::ch05::BucketState>(shared)](int b) {
    auto shared = weak.lock();
    std::vector<dpt::Tensor> grads;
    for (int p : shared->buckets[std::size_t(b)].params) grads.push_back(params[std::size_t(p)].grad());
    dpt::flatten_into(grads, shared->flat[std::size_t(b)]);
    shared->work[std::size_t(b)] = comm.async([&comm, shared, b] {
      dpt::Tensor& flat = shared->flat[std::size_t(b)];
      dpt::ch04::ring_all_reduce(comm, flat.data(), flat.numel(), dpt::ReduceOp::Avg);
    });
  };
  *shared = dpt::ch05::make_bucket_state(std::move(layout), ctx.device, launch);
  return shared;
}

}  // namespace dpt_test
