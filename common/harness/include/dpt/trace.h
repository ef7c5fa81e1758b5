/// @file trace.h
/// @brief `Tracer`: a per-rank timeline of compute and communication spans,
/// written as a Chrome Trace Event JSON file (open it in ui.perfetto.dev or
/// chrome://tracing), and per-category seconds for the metrics of each step.
///
///     {
///       auto span = ctx.trace.span("forward", "compute");   // ends at the brace
///       logits = model.forward(x);
///     }
///     double comm_s = ctx.trace.seconds("comm");   // Communicator calls add to "comm"
///
/// launch() gives every rank a Tracer (enabled by `--trace FILE`) and writes
/// one file at the end: one track per rank (pid 0, tid = rank, named
/// "rank R"), plus a track "rank R async" (tid 1000 + R) for the spans of the
/// rank's async progress thread, so overlapped communication shows under the
/// compute it hides behind. Timestamps are microseconds from a common origin:
/// the start of launch (threads), or the moment every process left a barrier
/// at launch (MPI, so tracks agree to within the barrier's skew).
///
/// GPU work is timed by CUDA events on the GPU's clock, not by host spans (the
/// host only queues it): a caller that mapped those onto this clock records
/// them with gpu_span(), on the tracks "rank R GPU compute stream" (tid 2000 +
/// R) and "rank R GPU comm stream" (tid 3000 + R), shown under the rank's.
///
/// Disabled, a span reads the clock twice and adds to its category's seconds;
/// nothing else is stored; an instant event costs nothing. Left out: flow
/// arrows.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dpt/span.h"

namespace dpt {

class Communicator;

/// One complete span a Tracer stored, on the clock every rank's timeline shares.
struct RecordedSpan {
  std::string name;      ///< "forward", "tp all_reduce"
  std::string category;  ///< "compute", "comm", …
  double start = 0;      ///< seconds since the tracer's origin (the run's common origin)
  double end = 0;        ///< seconds since the origin, >= start
  int lane = 0;          ///< 0 the rank's own thread, 1 its progress thread, 2 and 3 its GPU streams
};

/// One rank's timeline. Thread-safe (the rank thread and its progress thread
/// both record).
class Tracer : public SpanRecorder {
 public:
  /// A tracer for `rank`; events are stored only when `enabled`. Timestamps
  /// count from `origin`.
  Tracer(int rank, bool enabled, TraceClock::time_point origin = TraceClock::now());
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  /// The rank whose track this is.
  int rank() const { return rank_; }
  /// True when events are stored (a --trace file was asked for).
  bool enabled() const { return enabled_; }

  /// A span named `name` in `category` ("compute", "comm", "optimizer", ...)
  /// with optional numeric `args`. Keep the result alive for the scope.
  [[nodiscard]] TraceSpan span(std::string_view name, std::string_view category,
                               std::initializer_list<TraceArg> args = {}) {
    return TraceSpan(this, name, category, args);
  }
  /// Records an instant event `name` now on the calling thread's track (a
  /// "ph":"i" mark, e.g. "grad ready fc1.weight"), with optional `args`.
  void instant(std::string_view name, std::string_view category, std::initializer_list<TraceArg> args = {});
  /// Records counter `name` = `value` now (a "ph":"C" event, e.g. memory).
  void counter(std::string_view name, double value);
  /// Which GPU stream a gpu_span ran on.
  enum class GpuStream { Compute, Comm };
  /// Records a span that ran on a GPU stream from `start` to `end`: times on
  /// this clock that the caller mapped from CUDA events (a host instant at
  /// which an anchor event was reached, plus the events' elapsed times). It
  /// goes on the rank's GPU track for `stream` and adds nothing to seconds()
  /// (the host's spans already count the rank's time). Nothing when disabled.
  void gpu_span(std::string_view name, std::string_view category, GpuStream stream, TraceClock::time_point start,
                TraceClock::time_point end, std::initializer_list<TraceArg> args = {});

  /// Stores spans from now until stop_storing() even when not enabled: a
  /// chart of one step needs that step's spans without a --trace file.
  void start_storing() { storing_ = true; }
  /// Ends start_storing()'s window (spans are stored again only if enabled).
  void stop_storing() { storing_ = false; }
  /// The stored complete spans that began at or after `from` and ended by
  /// `to`, in the order they began.
  std::vector<RecordedSpan> spans_between(TraceClock::time_point from, TraceClock::time_point to) const;

  /// Seconds spent in spans of `category` since the last reset, on all of the
  /// rank's threads. A span nested in a span of the same category on the same
  /// thread is counted once (the outer one).
  double seconds(std::string_view category) const;
  /// Sets every category's seconds to 0 (e.g. at the start of each step).
  void reset_seconds();

  /// Number of stored events (0 when disabled).
  std::size_t event_count() const;
  /// This rank's events plus its track-name metadata, as a JSON array.
  std::string events_json() const;

  /// SpanRecorder: a span begins (TraceSpan calls it).
  SpanState begin_span(std::string_view name, std::string_view category,
                       std::initializer_list<TraceArg> args) override;
  /// SpanRecorder: a span ends.
  void end_span(const SpanState& state) override;

 private:
  struct Event;
  int category_index(std::string_view category);
  int start_event(std::string_view name, std::string_view category,
                  std::initializer_list<TraceArg> args, TraceClock::time_point start);
  void end_event(int event, int category, bool counts, TraceClock::time_point start,
                 TraceClock::time_point end);

  int rank_;
  bool enabled_;
  std::atomic<bool> storing_{false};  // start_storing()'s window: read on the rank's and its progress thread
  TraceClock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<std::string> categories_;
  std::vector<double> seconds_;
  std::vector<Event> events_;
  bool used_lane_[4] = {false, false, false, false};  // rank thread, async thread, GPU compute, GPU comm
};

/// Writes one Chrome trace file from ranks' events_json() arrays: valid JSON
/// {"traceEvents": [...], "displayTimeUnit": "ms"}, written to a temporary
/// file and renamed into place. Throws dpt::Error when it cannot write.
void write_chrome_trace(const std::string& path, const std::vector<std::string>& rank_events);

/// Collective: gathers every rank's events to rank 0, which writes `path`.
void gather_and_write_trace(Communicator& comm, const Tracer& tracer, const std::string& path);

}  // namespace dpt
