// bucketed_training.cpp — chapter 05's loop: forward, backward with buckets
// launched from the grad-ready hooks, wait + unpack, optimizer step; and the
// record of what happened when, kept apart from the holes it checks. With
// --trace the record is also in the timeline: an instant "grad ready NAME" per
// parameter and a span "launch bucket b" (the pack) on the rank's track, and
// "all-reduce bucket b" on its async track, each with its step.
//
// On a GPU the buckets live on the rank's GPU and two streams share the work,
// as in PyTorch DDP: the rank thread's current (compute) stream runs backward
// and each bucket's pack, then records an event; the ring runs on a
// communication stream that waits for that event on the GPU (the rank thread
// never blocks), and the job leaves the bucket final before its Work
// completes. On host memory (cpu:k) there are no streams: the same path, with
// the GPU steps skipped (gpu < 0).
//
// Which clock times the record. On host memory the host's: backward runs on
// the rank thread, a ring on its progress thread. On a GPU the host only
// queues backward's kernels, and a ring's first send blocks until its pack has
// run on the GPU, so host intervals would time the queueing and count the wait
// for backward as communication. There CUDA events time them on the GPU's
// clock: backward's start and end on the compute stream, each ring's start
// (reached once its pack has run) and end on the communication stream, all
// read as milliseconds after an anchor event at the step's start. Hidden =
// the overlap of the two, on that one clock. The trace keeps the host
// threads' spans (when each thread queued or waited) and, on a GPU, adds the
// GPU's own: backward on the rank's "GPU compute stream" track and each ring
// on its "GPU comm stream" track, placed by the host instant at which the
// anchor was reached (with --trace only: the step then waits for the anchor,
// when the stream is idle anyway after the previous step's loss was read).
// The loss is read after the optimizer step, where the host would wait for the
// GPU anyway (the next batch's upload), not between forward and backward.
#include "bucketed_training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <sstream>

#include "ch04.h"
#include "dpt/check.h"
#include "dpt/data_parallel.h"
#include "dpt/floats.h"
#include "dpt/gpu.h"
#include "dpt/ops.h"
#include "dpt/optim.h"
#include "dpt/report.h"
#include "dpt/timing.h"

namespace dpt::ch05 {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Everything one rank's step touches from two threads. Held by shared_ptr so
// that queued all-reduces keep it alive even if the step throws; for the same
// reason it keeps its own copy of the rank's Context (whose members refer to
// the communicator, device and tracer, which outlive the rank's work): when
// the rank's function throws, launch() drops the Context it was given and
// only then lets the still-queued all-reduces fail against the stopped world.
struct Engine : std::enable_shared_from_this<Engine> {
  Context ctx;
  std::vector<Tensor> params;
  std::vector<std::string> names;  // parameter → its name, for the trace
  int64_t step = 0;
  BucketState state;
  bool syncing = false;  // true during the backward whose gradients are final for this step
  bool overlap = true;
  std::vector<int> deferred;  // --no-overlap: ready parameters, replayed after backward
  int gpu = -1;                              // the rank's GPU, -1 on host memory
  std::unique_ptr<gpu::Stream> comm_stream;  // on a GPU: where the rings run
  // On a GPU: the record's intervals as events on `gpu` (made once, recorded
  // again every step; see the file comment).
  struct GpuClock {
    gpu::Event anchor;                           // compute stream, before the step's first forward
    gpu::Event backward_start, backward_end;     // compute stream, around the syncing backward
    std::vector<std::unique_ptr<gpu::Event>> ring_start, ring_end;  // bucket → comm stream, around its ring
  };
  std::unique_ptr<GpuClock> clock;
  Clock::time_point anchor_reached;  // with --trace on a GPU: when the host saw the anchor reached
  // The record (written by the rank thread, except comm_* by the progress
  // thread; read after wait(), which orders the two).
  std::vector<bool> seen_ready;             // parameter → its hook fired this step
  Clock::time_point last_ready;             // when the last gradient became ready
  std::vector<Clock::time_point> launched;  // bucket → launch time
  std::vector<Clock::time_point> comm_start, comm_end;
  std::vector<int> order;                   // buckets in launch order
  int launched_unready = 0;
  int held_back = 0;

  explicit Engine(const Context& c) : ctx(c) {}

  // On a GPU: the communication stream and the clock's events, made on it.
  void use_gpu(int device, std::size_t buckets) {
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

  // On a GPU: `event` marks the end of the rank thread's compute stream so far.
  void mark_compute(gpu::Event& event) const { event.record(gpu::current_stream(gpu)); }

  void reset() {
    reset_bucket_state(state);
    deferred.clear();
    seen_ready.assign(params.size(), false);
    order.clear();
    launched_unready = 0;
    held_back = 0;
  }

  // The hook on parameter p (or, with --find-unused-parameters, the forward
  // not reaching it): record, then your mark_ready (now or, without overlap,
  // after backward).
  void on_ready(int p, bool unused = false) {
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
    // The record's own oracle: every bucket of the longest complete prefix
    // should have launched by now (they may; waiting only hides less).
    std::size_t may = 0;
    while (may < state.buckets.size() && complete(int(may))) ++may;
    if (order.size() < may) ++held_back;
  }

  bool complete(int b) const {
    for (int p : state.buckets[std::size_t(b)].params)
      if (!seen_ready[std::size_t(p)]) return false;
    return true;
  }

  // state.launch: pack bucket b, queue its ring all-reduce.
  void launch(int b) {
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

  // On a GPU: an event after the pack on the compute stream, which the
  // communication stream will wait for. nullptr on host memory.
  std::shared_ptr<gpu::Event> record_packed() {
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
  void all_reduce_bucket(int b, int64_t in_step, const gpu::Event* packed) {
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

  // What this step's record says (after wait_and_unpack; on a GPU also after
  // the compute stream has reached backward_end).
  BucketStep summarise(Clock::time_point bw_start, Clock::time_point bw_end) const {
    BucketStep s;
    if (clock) {
      time_on_gpu(s);
    } else {
      s.backward_s = seconds_between(bw_start, bw_end);
      for (std::size_t b = 0; b < state.buckets.size(); ++b) {
        s.comm_s += seconds_between(comm_start[b], comm_end[b]);
        auto from = std::max(comm_start[b], bw_start), to = std::min(comm_end[b], bw_end);
        if (to > from) s.hidden_s += seconds_between(from, to);
      }
    }
    for (std::size_t b = 0; b < state.buckets.size(); ++b)
      if (launched[b] < last_ready) ++s.launched_early;
    for (std::size_t i = 0; i < order.size(); ++i) s.in_order = s.in_order && order[i] == int(i);
    s.in_order = s.in_order && order.size() == state.buckets.size();
    s.launched_unready = launched_unready;
    s.held_back = held_back;
    return s;
  }

  // backward_s, comm_s, hidden_s from the events, in seconds on the GPU's
  // clock. Every event was recorded after the anchor, on its stream or (a
  // ring's, via its pack) after it: each time below is >= 0. Waiting on the
  // last event of each stream makes every earlier one reached as well.
  void time_on_gpu(BucketStep& s) const {
    auto at = [&](const gpu::Event& e) { return 1e-3 * double(e.elapsed_ms_since(clock->anchor)); };
    clock->backward_end.synchronize();
    const double bw_start = at(clock->backward_start), bw_end = at(clock->backward_end);
    s.backward_s = bw_end - bw_start;
    trace_gpu("backward (GPU)", "compute", Tracer::GpuStream::Compute, bw_start, bw_end, {{"step", double(step)}});
    for (std::size_t b = 0; b < state.buckets.size(); ++b) {
      clock->ring_end[b]->synchronize();
      const double start = at(*clock->ring_start[b]), end = at(*clock->ring_end[b]);
      s.comm_s += end - start;
      s.hidden_s += std::max(0.0, std::min(end, bw_end) - std::max(start, bw_start));
      trace_gpu("all-reduce bucket " + std::to_string(b) + " (GPU)", "comm", Tracer::GpuStream::Comm, start, end,
                {{"step", double(step)}, {"bucket", double(b)}});
    }
  }
  // With --trace: a GPU interval, seconds after the anchor, on the host clock.
  void trace_gpu(const std::string& name, const char* category, Tracer::GpuStream stream, double from, double to,
                 std::initializer_list<TraceArg> args) const {
    if (!ctx.trace.enabled()) return;
    auto host = [&](double seconds) {
      return anchor_reached + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    };
    ctx.trace.gpu_span(name, category, stream, host(from), host(to), args);
  }
};
}  // namespace

std::vector<int64_t> parameter_bytes(const MLP& model) {
  std::vector<int64_t> bytes;
  for (const Tensor& p : model.parameters()) bytes.push_back(4 * p.numel());
  return bytes;
}

std::string describe_layout(const std::vector<Bucket>& layout, const MLP& model) {
  auto named = model.named_parameters();
  Table table("bucket layout (filled in reverse parameters() order)", {"bucket", "parameters", "bytes"});
  for (std::size_t b = 0; b < layout.size(); ++b) {
    std::string names;
    for (int p : layout[b].params) names += (names.empty() ? "" : ", ") + named[std::size_t(p)].name;
    table.add_row({std::to_string(b), names, format_bytes(double(layout[b].bytes))});
  }
  return table.str();
}

BucketedRun train_bucketed(Context& ctx, const Options& o, const Dataset& data, MLP& replica, const BucketPlan& plan,
                           const std::string& label, StepRecorder* recorder) {
  DPT_CHECK(plan.accumulate >= 1, "--accumulate must be >= 1, got " << plan.accumulate);
  auto engine = std::make_shared<Engine>(ctx);
  Engine& e = *engine;
  e.params = replica.parameters();
  e.overlap = plan.overlap;
  BucketedRun run;
  run.layout = assign_buckets(parameter_bytes(replica), plan.cap_bytes, plan.first_cap_bytes);
  e.state = make_bucket_state(run.layout, ctx.device, [&e](int b) { e.launch(b); });
  std::size_t nb = run.layout.size();
  e.use_gpu(ctx.device.kind() == DeviceKind::Cuda ? ctx.device.index() : -1, nb);
  run.gpu_clock = e.gpu >= 0;
  e.launched.resize(nb), e.comm_start.resize(nb), e.comm_end.resize(nb);
  for (const NamedTensor& p : replica.named_parameters()) e.names.push_back(p.name);
  for (std::size_t p = 0; p < e.params.size(); ++p)
    e.params[p].add_grad_ready_hook([&e, p](Tensor&) { e.on_ready(int(p)); });

  auto optimizer = make_optimizer(o.optimizer, e.params, o.lr);
  const int64_t K = plan.accumulate, micro = o.batch * ctx.world;  // samples per micro-batch, all ranks
  BatchSampler sampler(data.size(), micro * K, !o.no_shuffle, o.seed);  // same draw on every rank
  MetricsWriter metrics(ctx.is_root() ? o.metrics : "");
  ProgressBar bar(label, o.steps, ctx.is_root() && !o.quiet);
  ctx.comm.barrier();
  ctx.comm.traffic().clear();  // threads share one log: cleared between barriers
  ctx.comm.barrier();
  auto start = Clock::now();
  try {
    for (int64_t step = 0; step < o.steps; ++step) {
      auto step_start = Clock::now();
      ctx.comm.traffic().set_step(step);
      e.reset();
      e.step = step;
      optimizer->zero_grad();
      if (e.clock) {
        e.mark_compute(e.clock->anchor);
        if (ctx.trace.enabled()) {  // the trace's GPU spans are placed from here (see the file comment)
          e.clock->anchor.synchronize();
          e.anchor_reached = Clock::now();
        }
      }
      std::vector<int64_t> global = sampler.indices(step);
      float loss_sum = 0;
      std::vector<Tensor> gpu_losses;  // on a GPU: each micro-batch's loss, read after the optimizer step
      Clock::time_point bw_start, bw_end;
      for (int64_t k = 0; k < K; ++k) {
        std::vector<int64_t> slice(global.begin() + k * micro, global.begin() + (k + 1) * micro);
        Batch batch = gather_batch(data, strided_shard(slice, ctx.rank, ctx.world), ctx.device);
        Tensor loss;
        {
          auto span = ctx.trace.span("forward", "compute");
          loss = softmax_cross_entropy(replica.forward(batch.x), batch.y);
        }
        if (e.clock)
          gpu_losses.push_back(loss.clone());  // a device copy, queued: reading it now would stall the GPU's queue
        else
          loss_sum += loss.item();
        e.syncing = k == K - 1;  // DDP's no_sync for the others
        if (e.syncing && plan.find_unused)  // what backward will not reach is ready now, with a zero gradient
          for (int p : find_unused_parameters(loss, e.params)) e.on_ready(p, true);
        bw_start = Clock::now();
        if (e.clock) e.mark_compute(e.clock->backward_start);
        {
          auto span = ctx.trace.span(e.syncing ? "backward (buckets launch)" : "backward (no sync)", "compute",
                                     {{"step", double(step)}});
          (K == 1 ? loss : scale(loss, 1.0f / float(K))).backward();
        }
        bw_end = Clock::now();
        if (e.clock) e.mark_compute(e.clock->backward_end);
      }
      for (int p : e.deferred) mark_ready(e.state, p);  // --no-overlap: now, in the hooks' order
      {
        auto span = ctx.trace.span("wait + unpack", "comm");
        std::vector<Tensor> grads;
        for (Tensor& p : e.params) grads.push_back(p.grad());
        wait_and_unpack(e.state, grads, e.names);
      }
      if (recorder) recorder->record(step, o.steps, e.params);  // outside the timed spans
      {
        auto span = ctx.trace.span("optimizer", "compute");
        optimizer->step();
      }
      // On a GPU the first item() waits for the step's kernels; the same float sum as the host's.
      for (const Tensor& l : gpu_losses) loss_sum += l.item();
      float global_loss = loss_sum / float(K);
      ctx.comm.all_reduce(&global_loss, 1, ReduceOp::Avg);
      run.losses.push_back(global_loss);
      BucketStep s = e.summarise(bw_start, bw_end);
      s.step_s = seconds_between(step_start, Clock::now());
      run.steps.push_back(s);
      if (e.clock && ctx.trace.enabled())
        ctx.trace.instant("GPU clock (CUDA events)", "compute",
                          {{"step", double(step)}, {"backward_ms", s.backward_s * 1e3}, {"comm_ms", s.comm_s * 1e3},
                           {"hidden_ms", s.hidden_s * 1e3}});
      metrics.write(step, {{"loss", global_loss}, {"backward_s", s.backward_s}, {"comm_s", s.comm_s},
                           {"hidden_s", s.hidden_s}, {"step_s", s.step_s}});
      bar.update(step + 1, "loss " + fixed(global_loss, 4));
      if (!std::isfinite(global_loss)) {  // the same value on every rank: all stop here
        run.diverged_step = step;
        break;
      }
    }
  } catch (...) {
    for (Tensor& p : e.params) p.clear_grad_ready_hooks();
    throw;  // queued all-reduces hold `engine`: they may finish or fail after this
  }
  for (Tensor& p : e.params) p.clear_grad_ready_hooks();
  bar.finish();
  run.seconds = seconds_between(start, Clock::now());
  run.traffic = ctx.comm.gather_traffic();
  return run;
}

}  // namespace dpt::ch05
