// solutions/05_bucketing/bucketing.cpp — chapter 05's holes, the plainest
// correct code: a byte-capped layout in reverse parameter order, the ready
// hook that launches buckets in index order, the wait and copy-back.
#include "ch05.h"

#include "dpt/check.h"
#include "dpt/data_parallel.h"

namespace dpt::ch05 {

std::vector<Bucket> assign_buckets(const std::vector<int64_t>& param_bytes, int64_t cap_bytes,
                                   int64_t first_cap_bytes) {
  DPT_CHECK(cap_bytes >= 0 && first_cap_bytes >= 0,
            "bucket caps must be >= 0 bytes, got " << cap_bytes << " and " << first_cap_bytes);
  std::vector<Bucket> buckets;
  Bucket open;
  auto cap = [&] { return buckets.empty() ? first_cap_bytes : cap_bytes; };
  auto close = [&] {
    buckets.push_back(open);
    open = Bucket{};
  };
  for (int p = int(param_bytes.size()) - 1; p >= 0; --p) {  // backward finishes the last layer first
    if (!open.params.empty() && open.bytes + param_bytes[std::size_t(p)] > cap()) close();
    open.params.push_back(p);
    open.bytes += param_bytes[std::size_t(p)];
    if (open.bytes >= cap()) close();
  }
  if (!open.params.empty()) close();
  return buckets;
}

void mark_ready(BucketState& s, int param) {
  DPT_CHECK(param >= 0 && std::size_t(param) < s.ready.size(), "mark_ready: no parameter #" << param);
  DPT_CHECK(!s.ready[std::size_t(param)], "parameter #" << param << " was marked ready twice in one step: "
                                                        "the grad-ready hook must fire once per parameter");
  s.ready[std::size_t(param)] = true;
  --s.missing[std::size_t(s.bucket_of[std::size_t(param)])];
  // In index order only: a complete bucket behind an incomplete one waits.
  while (s.next_launch < int(s.buckets.size()) && s.missing[std::size_t(s.next_launch)] == 0)
    s.launch(s.next_launch++);
}

void wait_and_unpack(BucketState& s, std::vector<Tensor>& grads, const std::vector<std::string>& names) {
  if (s.next_launch < int(s.buckets.size())) {
    // The buckets that did launch run on every rank: let them finish (they
    // use state.flat) before the error; waiting for the stuck one would hang.
    for (int b = 0; b < s.next_launch; ++b) s.work[std::size_t(b)]->wait();
    for (std::size_t b = std::size_t(s.next_launch); b < s.buckets.size(); ++b)
      for (int p : s.buckets[b].params)
        DPT_CHECK(s.ready[std::size_t(p)],
                  "parameter " << names[std::size_t(p)] << " (#" << p << ") got no gradient this step; bucket " << b
                               << " was never all-reduced (is the parameter frozen or unused on this rank?)");
    DPT_CHECK(false, "bucket " << s.next_launch << " was never launched although all its parameters were ready");
  }
  for (std::size_t b = 0; b < s.buckets.size(); ++b) {
    s.work[b]->wait();  // bucket b now holds the mean over ranks
    std::vector<Tensor> mine;
    for (int p : s.buckets[b].params) mine.push_back(grads[std::size_t(p)]);
    unflatten(s.flat[b], mine);  // copy back, device to device: the gradients are tensors of their own
  }
}

}  // namespace dpt::ch05
