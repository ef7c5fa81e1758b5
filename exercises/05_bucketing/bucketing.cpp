// exercises/05_bucketing/bucketing.cpp — holes: the bucket layout, the ready
// hook that launches buckets in order, the wait and copy-back.
//
// The spec of all three is in chapters/05_bucketing/ch05.h: read it first.
//
// Hints:
//  * assign_buckets: loop p = n-1 … 0. Keep one open Bucket; "close" = push it
//    to the result and start an empty one. Bucket 0's cap is first_cap_bytes.
//    Don't forget the last open bucket. With cap 0 every parameter is alone.
//  * mark_ready: state.bucket_of[p] is p's bucket, state.missing[b] counts what
//    it still waits for. Launch with a while loop on state.next_launch, never
//    with "the bucket p is in": bucket 2 complete before bucket 1 must wait.
//  * wait_and_unpack: state.next_launch < number of buckets means some
//    parameter never became ready: find it in that bucket (state.ready) and
//    DPT_CHECK with its name. Waiting on it instead would hang until the timeout.
//    state.work[b]->wait(), then dpt::unflatten(state.flat[b], the bucket's
//    gradients in state.buckets[b].params order) from dpt/data_parallel.h.
//    state.flat[b] is a tensor on the rank's device (a GPU under --device
//    cuda): copy it with unflatten, never with a host loop over its data().
#include "ch05.h"

#include "dpt/check.h"

namespace dpt::ch05 {

std::vector<Bucket> assign_buckets(const std::vector<int64_t>& param_bytes, int64_t cap_bytes,
                                   int64_t first_cap_bytes) {
  (void)param_bytes, (void)cap_bytes, (void)first_cap_bytes;
  throw NotImplemented("ch05: assign_buckets — see exercises/05_bucketing/bucketing.cpp");
}

void mark_ready(BucketState& state, int param) {
  (void)state, (void)param;
  throw NotImplemented("ch05: mark_ready — see exercises/05_bucketing/bucketing.cpp");
}

void wait_and_unpack(BucketState& state, std::vector<Tensor>& grads, const std::vector<std::string>& names) {
  (void)state, (void)grads, (void)names;
  throw NotImplemented("ch05: wait_and_unpack — see exercises/05_bucketing/bucketing.cpp");
}

}  // namespace dpt::ch05
