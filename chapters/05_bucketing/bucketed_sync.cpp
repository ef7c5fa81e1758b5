// bucketed_sync.cpp — chapter 05's bucketed sync for any parameter list
// (bucketed_sync.h): the engine set up on the parameters, backward with the
// engine's marks around it, the wait, and the verdicts on the engine's record.
// What happens inside the hooks and on the progress thread is the engine's
// (bucket_engine.cpp).
#include "bucketed_sync.h"

#include "bucket_engine.h"
#include "dpt/check.h"

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
  try {
    wait_and_unpack(e.state, grads, e.names);
  } catch (const NotImplemented&) {  // a stub: let the launched rings end first, so a lecture can run past it (holes.h)
    for (int b : e.order) {
      try {
        e.state.work[std::size_t(b)]->wait();
      } catch (...) {  // the hole's message is the one to report
      }
    }
    throw;
  }
}

BucketStep BucketedSync::summarise() const { return engine_->summarise(backward_start_, backward_end_); }

}  // namespace dpt::ch05
