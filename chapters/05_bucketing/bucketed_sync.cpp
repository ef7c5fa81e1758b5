// bucketed_sync.cpp — chapter 05's bucketed sync for any parameter list
// (bucketed_sync.h): the engine set up on the parameters, backward with the
// engine's marks around it, the wait, and the verdicts on the engine's record.
// What happens inside the hooks and on the progress thread is the engine's
// (bucket_engine.cpp).
#include "bucketed_sync.h"

#include "bucket_engine.h"
#include "dpt/check.h"
#include "dpt/report.h"
#include "dpt/timing.h"

namespace dpt::ch05 {

BucketedSync::BucketedSync(Context& ctx, std::vector<Tensor> params, std::vector<std::string> names,
                           const BucketPlan& plan)
    : engine_(std::make_shared<BucketEngine>(ctx)), plan_(plan) {
  BucketEngine& e = *engine_;
  DPT_CHECK(names.size() == params.size(), "bucketed sync: " << params.size() << " parameters but " << names.size()
                                                             << " names");
  e.params = std::move(params);
  e.names = std::move(names);
  e.overlap = plan.overlap;
  std::vector<int64_t> bytes;
  for (const Tensor& p : e.params) bytes.push_back(4 * p.numel());
  e.state = make_bucket_state(assign_buckets(bytes, plan.cap_bytes, plan.first_cap_bytes), ctx.device,
                              [&e](int b) { e.launch(b); });
  const std::size_t nb = e.state.buckets.size();
  e.use_gpu(ctx.device.kind() == DeviceKind::Cuda ? ctx.device.index() : -1, nb);
  e.launched.resize(nb), e.comm_start.resize(nb), e.comm_end.resize(nb);
  for (std::size_t p = 0; p < e.params.size(); ++p)
    e.params[p].add_grad_ready_hook([&e, p](Tensor&) { e.on_ready(int(p)); });
}

BucketedSync::~BucketedSync() {
  for (Tensor& p : engine_->params) p.clear_grad_ready_hooks();
}

const std::vector<Bucket>& BucketedSync::layout() const { return engine_->state.buckets; }

bool BucketedSync::gpu_clock() const { return engine_->clock != nullptr; }

void BucketedSync::begin_step(int64_t step) {
  BucketEngine& e = *engine_;
  e.reset();
  e.step = step;
  if (e.clock) {
    e.mark_compute(e.clock->anchor);
    if (e.ctx.trace.enabled()) {  // the trace's GPU spans are placed from here (see step_record.cpp)
      e.clock->anchor.synchronize();
      e.anchor_reached = Clock::now();
    }
  }
}

void BucketedSync::backward(const Tensor& loss, bool syncing) {
  BucketEngine& e = *engine_;
  e.syncing = syncing;
  if (syncing && plan_.find_unused)  // what backward will not reach is ready now, with a zero gradient
    for (int p : find_unused_parameters(loss, e.params)) e.on_ready(p, true);
  backward_start_ = Clock::now();
  if (e.clock) e.mark_compute(e.clock->backward_start);
  {
    auto span = e.ctx.trace.span(syncing ? "backward (buckets launch)" : "backward (no sync)", "compute",
                                 {{"step", double(e.step)}});
    loss.backward();
  }
  backward_end_ = Clock::now();
  if (e.clock) e.mark_compute(e.clock->backward_end);
}

void BucketedSync::finish() {
  BucketEngine& e = *engine_;
  for (int p : e.deferred) mark_ready(e.state, p);  // --no-overlap: now, in the hooks' order
  auto span = e.ctx.trace.span("wait + unpack", "comm");
  std::vector<Tensor> grads;
  for (Tensor& p : e.params) grads.push_back(p.grad());
  wait_and_unpack(e.state, grads, e.names);
}

BucketStep BucketedSync::summarise() const { return engine_->summarise(backward_start_, backward_end_); }

// Counts over every step of every rank (the record is the engine's, not the holes').
void add_schedule_verdicts(Context& ctx, const std::vector<Bucket>& layout, const std::vector<BucketStep>& steps,
                           bool overlap, Verdicts& v) {
  // max_over_ranks clamps at 0, so every count here is "how many went wrong".
  double out_of_order = 0, unready = 0, held_back = 0, early_steps = 0;
  for (const BucketStep& s : steps) {
    out_of_order += s.in_order ? 0 : 1;
    unready += s.launched_unready;
    held_back += s.held_back;
    early_steps += s.launched_early > 0 ? 1 : 0;
  }
  out_of_order = max_over_ranks(ctx.comm, out_of_order);
  unready = max_over_ranks(ctx.comm, unready);
  held_back = max_over_ranks(ctx.comm, held_back);
  early_steps = max_over_ranks(ctx.comm, early_steps);
  if (!ctx.is_root()) return;
  std::vector<int> filled;  // the layout's parameters, bucket after bucket
  for (const Bucket& b : layout) filled.insert(filled.end(), b.params.begin(), b.params.end());
  bool reverse = true;
  for (std::size_t i = 0; i < filled.size(); ++i) reverse = reverse && filled[i] == int(filled.size() - 1 - i);
  v.holds("buckets hold every parameter once, in reverse parameters() order", reverse,
          reverse ? "the order backward finishes them" : "then the first bucket waits for the whole backward");
  v.at_most("steps whose buckets did not launch in the order every rank shares (worst rank)", out_of_order, 0,
            "ranks pair their collectives by issue order: every rank must issue the same buckets in the same order, "
            "whatever order its own hooks fire in");
  v.at_most("buckets launched before their last gradient was ready (worst rank)", unready, 0,
            "the all-reduce would send a gradient backward has not finished");
  if (overlap)
    v.at_most("hooks after which a bucket that could have launched still waited (worst rank)", held_back, 0,
              "as early as the contract allows: a bucket held back hides less of backward; in " +
                  fixed(early_steps, 0) + " steps one left before backward's last gradient");
  else
    v.at_most("--no-overlap: steps with a bucket launched before backward's last gradient", early_steps, 0,
              "without overlap every bucket waits for the whole backward");
}

}  // namespace dpt::ch05
