// bucket_state.cpp — the provided part of chapter 05's bookkeeping: a fresh
// BucketState for a layout, its reset between steps, and the parameters a
// forward did not reach (--find-unused-parameters). Not holes.
#include "ch05.h"

#include <memory>

#include "dpt/autograd.h"
#include "dpt/check.h"

namespace dpt::ch05 {

namespace {
// work[b] before bucket b launches: no rank's progress thread will ever run
// it, so waiting for it would wait forever. It says so instead.
struct NotLaunched final : Work {
  int bucket;
  explicit NotLaunched(int b) : bucket(b) {}
  void wait() override {
    DPT_CHECK(false, "waited for bucket " << bucket << ", which was never launched this step: no rank will ever "
                                                      "all-reduce it, so the wait could never end (wait only for "
                                                      "launched buckets; for the others, name the parameter that "
                                                      "never became ready)");
  }
  bool done() override { return false; }
};
}  // namespace

BucketState make_bucket_state(std::vector<Bucket> buckets, Device& device, std::function<void(int)> launch) {
  BucketState s;
  s.buckets = std::move(buckets);
  int params = 0;
  for (const Bucket& b : s.buckets) params += int(b.params.size());
  s.bucket_of.assign(std::size_t(params), -1);
  for (std::size_t b = 0; b < s.buckets.size(); ++b)
    for (int p : s.buckets[b].params) {
      DPT_CHECK(p >= 0 && p < params && s.bucket_of[std::size_t(p)] < 0,
                "bucket layout: parameter " << p << " is out of range or in two buckets");
      s.bucket_of[std::size_t(p)] = int(b);
    }
  MemoryScope scope(MemoryCategory::Comm);  // DDP's buckets: communication buffers beside the gradients
  for (const Bucket& b : s.buckets) s.flat.push_back(Tensor::zeros({b.bytes / 4}, device));
  s.launch = std::move(launch);
  reset_bucket_state(s);
  return s;
}

void reset_bucket_state(BucketState& s) {
  s.ready.assign(s.bucket_of.size(), false);
  s.launched.assign(s.buckets.size(), false);
  s.work.clear();
  for (std::size_t b = 0; b < s.buckets.size(); ++b) s.work.push_back(std::make_shared<NotLaunched>(int(b)));
}

std::vector<int> find_unused_parameters(const Tensor& loss, std::vector<Tensor>& params) {
  std::vector<bool> reached = reaches(loss, params);
  std::vector<int> unused;
  for (std::size_t p = 0; p < params.size(); ++p) {
    if (reached[p]) continue;
    if (!params[p].grad().defined()) params[p].set_grad(Tensor::zeros(params[p].shape(), params[p].device()));
    unused.push_back(int(p));
  }
  return unused;
}

}  // namespace dpt::ch05
