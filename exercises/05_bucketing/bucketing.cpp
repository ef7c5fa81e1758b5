// exercises/05_bucketing/bucketing.cpp — holes: the bucket layout, the ready
// hook's launch rule, the wait and copy-back.
//
// The contracts are in chapters/05_bucketing/ch05.h: read them first. Stuck?
// The chapter page's Hints (docs/ch05_bucketing.md, "Hints") open one tier
// at a time. Pointers:
//  * state.buckets, state.bucket_of, state.ready, state.launched are yours to
//    read and write; state.launch(b) is the only way to start an all-reduce.
//  * Copy tensors with dpt::unflatten (dpt/flatten.h), not host loops.
//  * Never wait for something no rank will run: it would hang until the timeout.
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
