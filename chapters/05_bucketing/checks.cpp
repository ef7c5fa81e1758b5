// chapters/05_bucketing/checks.cpp — chapter 05's checks (checks.h): each
// judged from a record kept apart from your holes, against ch05.h.
#include "checks.h"

#include <algorithm>
#include <memory>

#include "dpt/check.h"
#include "dpt/data_parallel.h"
#include "dpt/report.h"
#include "dpt/timing.h"

namespace dpt::ch05 {

namespace {

LayoutCheck check_layout(const std::vector<Bucket>& layout, const std::vector<int64_t>& bytes, const BucketPlan& plan) {
  LayoutCheck c;
  for (std::size_t b = 0; b < layout.size(); ++b) {
    const int64_t cap = b == 0 ? plan.first_cap_bytes : plan.cap_bytes;
    auto size_of = [&](int p) { return p >= 0 && std::size_t(p) < bytes.size() ? bytes[std::size_t(p)] : 0; };
    int64_t sum = 0;
    for (int p : layout[b].params) sum += size_of(p);
    const std::string name = str("bucket ", b, ": ", format_bytes(double(sum)), ", cap ", format_bytes(double(cap)));
    if (layout[b].params.size() > 1 && sum > cap && c.over_cap++ == 0) c.first_over = name;
    if (b + 1 < layout.size() && !layout[b + 1].params.empty()) {
      const int64_t next = size_of(layout[b + 1].params.front());
      if (sum + next <= cap && c.not_full++ == 0)
        c.first_not_full =
            str(name, ", and bucket ", b + 1, "'s first parameter (", format_bytes(double(next)), ") fits");
    }
  }
  return c;
}

// wait_and_unpack's error path, which training at the defaults never takes
// (every parameter gets its gradient): bucket 0 never launched, its first
// parameter never marked ready, every other bucket launched by hand with an
// all-reduce that finishes when waited for. "" when the error names that
// parameter and "bucket 0" after every launched bucket finished; else what
// went wrong, in words.
struct FinishedOnWait : Work {
  bool finished = false;
  void wait() override { finished = true; }
  bool done() override { return finished; }
};

std::string unpack_one_missing(const std::vector<Bucket>& layout, const MLP& model, Device& device) {
  BucketState state = make_bucket_state(layout, device, [](int) {});
  std::vector<std::shared_ptr<FinishedOnWait>> works;
  for (std::size_t b = 1; b < layout.size(); ++b) {
    works.push_back(std::make_shared<FinishedOnWait>());
    state.work[b] = works.back();
    state.launched[b] = true;
  }
  std::fill(state.ready.begin(), state.ready.end(), true);
  const int missing = layout.front().params.front();
  state.ready[std::size_t(missing)] = false;
  std::vector<Tensor> grads;
  std::vector<std::string> names;
  for (const auto& named : model.named_parameters()) {
    grads.push_back(Tensor::zeros(named.tensor.shape(), device));
    names.push_back(named.name);
  }
  const std::string name = names[std::size_t(missing)];
  try {
    wait_and_unpack(state, grads, names);
  } catch (const NotImplemented&) {
    throw;
  } catch (const Error& e) {
    const std::string message = e.what();
    for (std::size_t i = 0; i < works.size(); ++i)
      if (!works[i]->finished)
        return "the error came before launched bucket " + std::to_string(i + 1) + " was waited for";
    if (message.find(name) == std::string::npos || message.find("bucket 0") == std::string::npos)
      return "the error must name " + name + " and bucket 0; it said: " + message;
    return "";
  }
  return "it returned although bucket 0 never launched (" + name + " got no gradient)";
}

ShuffledLaunches launch_shuffled(const std::vector<Bucket>& layout, Device& device, uint64_t seed) {
  ShuffledLaunches r;
  std::vector<int> order;  // the parameters, in the order the hooks fire
  for (const Bucket& b : layout) order.insert(order.end(), b.params.begin(), b.params.end());
  std::vector<int> launched;
  BucketState state = make_bucket_state(layout, device, [](int) {});
  auto complete = [&](int b) {
    for (int p : state.buckets[std::size_t(b)].params)
      if (!state.ready[std::size_t(p)]) return false;
    return true;
  };
  state.launch = [&](int b) {  // the record, kept apart from your hole
    if (b != int(launched.size())) ++r.out_of_order;
    if (!complete(b)) ++r.unready;
    launched.push_back(b);
  };
  Rng rng(seed);
  for (int shuffle = 0; shuffle < 20; ++shuffle) {
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.next_u64() % i]);
    reset_bucket_state(state);
    launched.clear();
    for (int p : order) mark_ready(state, p);
    r.missing += int(layout.size()) - int(launched.size());
  }
  return r;
}

// Sizes whose buckets reach their caps exactly, the case a run's layout rarely
// shows: read in reverse, 2+2, 3+1 and 3+1 KiB under caps of 4 KiB each.
LayoutCheck check_exact_caps() {
  const std::vector<int64_t> bytes = {1024, 3072, 1024, 3072, 2048, 2048};
  const BucketPlan exact{4096, 4096};
  return check_layout(assign_buckets(bytes, exact.cap_bytes, exact.first_cap_bytes), bytes, exact);
}

}  // namespace

HoleChecks check_holes(const std::vector<Bucket>& layout, const MLP& model, const BucketPlan& plan, Device& device,
                       uint64_t seed) {
  HoleChecks h;
  h.caps = check_layout(layout, parameter_bytes(model), plan);
  h.exact = check_exact_caps();
  h.shuffled = launch_shuffled(layout, device, seed);
  h.unpacked = unpack_one_missing(layout, model, device);
  return h;
}

void add_verdicts(Verdicts& v, const Context& ctx, const HoleChecks& h, const BucketedRun& run, double s,
                  double spread) {
  const int64_t nb = int64_t(run.layout.size()), steps = int64_t(run.losses.size());
  v.at_most("buckets of several parameters over their cap", h.caps.over_cap, 0,
            h.caps.over_cap ? h.caps.first_over : "only a single parameter larger than the cap may pass it");
  v.at_most("buckets closed while the next bucket's first parameter still fitted under their cap",
            h.caps.not_full, 0, h.caps.not_full ? h.caps.first_not_full : "the buckets backward completes first are full");
  v.at_most("the same, on sizes whose buckets reach their caps exactly (2+2, 3+1, 3+1 KiB under 4 KiB)",
            h.exact.not_full + h.exact.over_cap, 0,
            h.exact.not_full ? h.exact.first_not_full + ": a bucket whose bytes equal its cap is within it"
            : h.exact.over_cap ? h.exact.first_over : "a bucket may end exactly at its cap");
  v.at_most("your mark_ready, hooks in 20 shuffled orders: launches out of the order every rank shares, "
                "before complete, or never",
            h.shuffled.out_of_order + h.shuffled.unready + h.shuffled.missing, 0,
            "another rank's hooks may fire in any of these orders, and its k-th all-reduce meets yours");
  v.holds("your wait_and_unpack, a parameter never marked ready: an error naming it and its bucket, after "
          "every launched bucket finished",
          h.unpacked.empty(), h.unpacked);
  v.holds("the loss stayed finite", run.diverged_step < 0,
          run.diverged_step < 0 ? "" : "not at step " + std::to_string(run.diverged_step));
  if (ctx.world == 1) {
    v.cannot_fail("training: ring traffic per bucket, identical replicas", on_one_rank(4));
    return;
  }
  add_ring_traffic_verdicts(v, run.traffic, s / double(nb), nb * steps, "training");
  v.at_most("replicas identical: max |w_r - w_0|", spread, 0, "every ring all-gather copies the same bits");
}

}  // namespace dpt::ch05
