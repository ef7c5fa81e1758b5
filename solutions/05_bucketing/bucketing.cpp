// solutions/05_bucketing/bucketing.cpp — chapter 05's holes, the plainest
// correct code: a byte-capped layout in reverse parameter order, the ready
// hook that launches buckets in index order, the wait and copy-back.
#include "ch05.h"

#include "dpt/check.h"
#include "dpt/flatten.h"

namespace dpt::ch05 {

std::vector<Bucket> assign_buckets(const std::vector<int64_t>& param_bytes, int64_t cap_bytes,
                                   int64_t first_cap_bytes) {
  DPT_CHECK(cap_bytes >= 0 && first_cap_bytes >= 0,
            "bucket caps must be >= 0 bytes, got " << cap_bytes << " and " << first_cap_bytes);
  std::vector<Bucket> buckets;
  Bucket open;
  auto cap = [&] { return buckets.empty() ? first_cap_bytes : cap_bytes; };
  for (int p = int(param_bytes.size()) - 1; p >= 0; --p) {  // backward finishes the last layer first
    if (!open.params.empty() && open.bytes + param_bytes[std::size_t(p)] > cap()) {
      buckets.push_back(open);  // p does not fit: close the bucket, p starts the next
      open = Bucket{};
    }
    open.params.push_back(p);
    open.bytes += param_bytes[std::size_t(p)];
  }
  if (!open.params.empty()) buckets.push_back(open);
  return buckets;
}

namespace {
bool complete(const BucketState& s, std::size_t b) {
  for (int p : s.buckets[b].params)
    if (!s.ready[std::size_t(p)]) return false;
  return true;
}
}  // namespace

void mark_ready(BucketState& s, int param) {
  DPT_CHECK(param >= 0 && std::size_t(param) < s.ready.size(), "mark_ready: there is no parameter #" << param);
  DPT_CHECK(!s.ready[std::size_t(param)], "parameter #" << param << " was marked ready twice in one step: "
                                                        "the grad-ready hook fires once per parameter");
  s.ready[std::size_t(param)] = true;
  // Index order only: hooks fire in another order on another rank, but every
  // rank launches the same prefix 0, 1, 2, … of complete buckets, so the k-th
  // all-reduce is bucket k everywhere. A complete bucket behind an incomplete
  // one waits its turn.
  for (std::size_t b = 0; b < s.buckets.size(); ++b) {
    if (s.launched[b]) continue;
    if (!complete(s, b)) break;
    s.launched[b] = true;
    s.launch(int(b));
  }
}

void wait_and_unpack(BucketState& s, std::vector<Tensor>& grads, const std::vector<std::string>& names) {
  for (std::size_t b = 0; b < s.buckets.size(); ++b)
    if (s.launched[b]) s.work[b]->wait();  // bucket b now holds the mean over ranks
  for (std::size_t b = 0; b < s.buckets.size(); ++b) {
    // Only now, with every launched bucket finished: a parameter that never
    // got a gradient stops this bucket and all after it on this rank.
    for (int p : s.buckets[b].params)
      DPT_CHECK(s.launched[b] || s.ready[std::size_t(p)],
                "parameter " << names[std::size_t(p)] << " (#" << p << ") got no gradient this step; bucket " << b
                             << " was never all-reduced (is the parameter frozen or unused on this rank?)");
    DPT_CHECK(s.launched[b], "bucket " << b << " was never launched although all its parameters were marked ready");
    std::vector<Tensor> mine;
    for (int p : s.buckets[b].params) mine.push_back(grads[std::size_t(p)]);
    unflatten(s.flat[b], mine);  // copy back, device to device, in the bucket's fill order
  }
}

}  // namespace dpt::ch05
