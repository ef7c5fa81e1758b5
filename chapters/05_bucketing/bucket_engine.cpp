// bucket_engine.cpp — chapter 05's engine at work during one step (see
// bucket_engine.h): the grad-ready hook that calls your mark_ready, the launch
// it triggers (pack the bucket, queue its ring), and the ring job on the
// rank's progress thread. Each also writes the step's record, kept apart from
// the holes it checks. With --trace the record is also in the timeline: an
// instant "grad ready NAME" per parameter and a span "launch bucket b" (the
// pack) on the rank's track, and "all-reduce bucket b" on its async track,
// each with its step.
//
// On a GPU the buckets live on the rank's GPU and two streams share the work,
// as in PyTorch DDP: the rank thread's current (compute) stream runs backward
// and each bucket's pack, then records an event; the ring runs on a
// communication stream that waits for that event on the GPU (the rank thread
// never blocks), and the job leaves the bucket final before its Work
// completes. On host memory (cpu:k) there are no streams: the same path, with
// the GPU steps skipped (gpu < 0).
#include "bucket_engine.h"

#include <algorithm>

#include "ch04.h"
#include "dpt/check.h"
#include "dpt/flatten.h"

namespace dpt::ch05 {

void BucketEngine::use_gpu(int device, std::size_t buckets) {
  gpu = device;
  if (gpu < 0) return;
  gpu::set_current_device(gpu);  // events live on the GPU current when made: record them on its streams only
  comm_stream = std::make_unique<gpu::Stream>(gpu);
  clock = std::make_unique<GpuClock>();
  for (std::size_t b = 0; b < buckets; ++b) {
    clock->ring_start.push_back(std::make_unique<gpu::Event>());
    clock->ring_end.push_back(std::make_unique<gpu::Event>());
  }
}

void BucketEngine::mark_compute(gpu::Event& event) const { event.record(gpu::current_stream(gpu)); }

void BucketEngine::reset() {
  reset_bucket_state(state);
  deferred.clear();
  seen_ready.assign(params.size(), false);
  order.clear();
  launched_unready = 0;
  held_back = 0;
}

void BucketEngine::on_ready(int p, bool unused) {
  if (!syncing) return;  // an earlier micro-batch: the gradient is not final yet
  seen_ready[std::size_t(p)] = true;
  if (ctx.trace.enabled())
    ctx.trace.instant("grad ready " + names[std::size_t(p)], "compute",
                      {{"param", double(p)}, {"step", double(step)}, {"unused", unused ? 1.0 : 0.0}});
  last_ready = Clock::now();
  if (!overlap) {
    deferred.push_back(p);
    return;
  }
  mark_ready(state, p);
  if (waited_too_long()) ++held_back;  // the record's own count (step_record.cpp)
}

bool BucketEngine::complete(int b) const {
  for (int p : state.buckets[std::size_t(b)].params)
    if (!seen_ready[std::size_t(p)]) return false;
  return true;
}

void BucketEngine::launch(int b) {
  DPT_CHECK(b >= 0 && std::size_t(b) < state.buckets.size(),
            "mark_ready launched bucket " << b << ", but there are " << state.buckets.size() << " buckets");
  DPT_CHECK(std::find(order.begin(), order.end(), b) == order.end(),
            "mark_ready launched bucket " << b << " twice in one step: each bucket is all-reduced once per step");
  auto span = ctx.trace.span("launch bucket " + std::to_string(b), "comm", {{"bucket", double(b)}, {"step", double(step)}});
  if (!complete(b)) ++launched_unready;
  order.push_back(b);
  launched[std::size_t(b)] = Clock::now();
  std::vector<Tensor> grads;
  for (int p : state.buckets[std::size_t(b)].params) {
    Tensor g = params[std::size_t(p)].grad();  // undefined if launched too early: send zeros, the verdict says so
    grads.push_back(g.defined() ? g : Tensor::zeros(params[std::size_t(p)].shape(), ctx.device));
  }
  Tensor& flat = state.flat[std::size_t(b)];
  flatten_into(grads, flat);  // (bytes/4,) on the rank's device: device copies, on the compute stream
  std::shared_ptr<gpu::Event> packed = record_packed();
  state.work[std::size_t(b)] = ctx.comm.async(
      [self = shared_from_this(), b, step = step, packed] { self->all_reduce_bucket(b, step, packed.get()); });
}

std::shared_ptr<gpu::Event> BucketEngine::record_packed() {
  if (gpu < 0) return nullptr;
  gpu::set_current_device(gpu);  // the event lives on the bucket's GPU
  auto packed = std::make_shared<gpu::Event>();
  mark_compute(*packed);
  return packed;
}

// On the progress thread: the ring, chapter 04's, averaging bucket b. On a
// GPU its adds and copies go to the communication stream, queued after
// `packed`; the ring's first sendrecv waits for that stream, so for the pack.
// There the ring's interval is the comm stream's, between two events: the
// start is reached once the pack has run (and this job has begun), the end
// once the ring's last add or copy has.
void BucketEngine::all_reduce_bucket(int b, int64_t in_step, const gpu::Event* packed) {
  Tensor& flat = state.flat[std::size_t(b)];
  comm_start[std::size_t(b)] = Clock::now();
  {
    auto span = ctx.trace.span("all-reduce bucket " + std::to_string(b), "comm",
                               {{"bucket", double(b)}, {"bytes", 4.0 * double(flat.numel())}, {"step", double(in_step)}});
    std::unique_ptr<gpu::StreamGuard> on_comm_stream;
    if (packed) {
      gpu::set_current_device(comm_stream->device());
      comm_stream->wait(*packed);  // a wait on the GPU, not on the host
      clock->ring_start[std::size_t(b)]->record(*comm_stream);
      on_comm_stream = std::make_unique<gpu::StreamGuard>(*comm_stream);
    }
    try {
      ch04::ring_all_reduce(ctx.comm, flat.data(), flat.numel(), ReduceOp::Avg);
    } catch (...) {  // the ring's queued kernels may still use the bucket: let them end first
      if (packed) comm_stream->synchronize();
      throw;
    }
    // Final before the Work completes: wait_and_unpack reads the bucket on
    // the compute stream, which knows nothing of this one. (So is ring_end:
    // the rank thread reads it after that wait.)
    if (packed) {
      clock->ring_end[std::size_t(b)]->record(*comm_stream);
      comm_stream->synchronize();
    }
  }
  comm_end[std::size_t(b)] = Clock::now();
}

}  // namespace dpt::ch05
