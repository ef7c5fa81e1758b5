// step_record.cpp — chapter 05's record of one step read back (see
// bucket_engine.h): backward, communication and the overlap of the two as
// times, and the order and timing of the launches as counts. The chapter's
// verdicts and the bench are computed from it, never from the holes' own
// state.
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
#include "bucket_engine.h"

#include <algorithm>
#include <chrono>

namespace dpt::ch05 {

BucketStep BucketEngine::summarise(Clock::time_point bw_start, Clock::time_point bw_end) const {
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

// After a hook: did a bucket the contract already allowed to launch still
// wait? (Not wrong: it only hides less of backward.)
bool BucketEngine::waited_too_long() const {
  std::size_t may = 0;
  while (may < state.buckets.size() && complete(int(may))) ++may;
  return order.size() < may;
}

// backward_s, comm_s, hidden_s from the events, in seconds on the GPU's
// clock. Every event was recorded after the anchor, on its stream or (a
// ring's, via its pack) after it: each time below is >= 0. Waiting on the
// last event of each stream makes every earlier one reached as well.
void BucketEngine::time_on_gpu(BucketStep& s) const {
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

void BucketEngine::trace_gpu(const std::string& name, const char* category, Tracer::GpuStream stream, double from,
                             double to, std::initializer_list<TraceArg> args) const {
  if (!ctx.trace.enabled()) return;
  auto host = [&](double seconds) {
    return anchor_reached + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  ctx.trace.gpu_span(name, category, stream, host(from), host(to), args);
}

}  // namespace dpt::ch05
